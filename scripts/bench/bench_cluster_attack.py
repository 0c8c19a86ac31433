"""A parl_lite cluster while strangers attack it, against the same cluster left alone, in one run.

    python scripts/bench/bench_cluster_attack.py [--nofile 256] [--strangers 500] [--holders 200]
        [--flood 200] [--calls 2000]

Starts a master and a node through the ``parl-lite`` CLI with a low ``ulimit -n`` (``--nofile``),
connects a client over 127.0.0.1, and measures, first alone, then under each attack in turn:
- a synchronous trivial call on an actor created before the attacks (median µs, and the 99th
  percentile);
- a token holder connecting to the master (authentication and hello, median ms);
- creating an actor (placement, a session with the node, the actor's connection; median ms).
The attacks, each attacker a process of its own:
1. *holders*, all at once, reopening every connection the server drops once a second:
   ``--strangers`` connections from 127.0.0.1 to the master and as many to the node, each sending
   one byte per second and never authenticating (what took each server's file descriptors and a
   thread per connection before the caps); ``--holders`` HTTP connections to the master's web
   monitor from another user (uid 65534 when this runs as root, else this user), each sending its
   request one byte per second;
2. *flood*: ``--flood`` connections to the master and as many to the node, from 127.0.0.3-250 in
   turn, each one dropped reopened at once (a stranger filling the cap on unauthenticated
   connections from many addresses); meanwhile a token holder at 127.0.0.2 whose answer takes
   100 ms (a node on another machine) connects to the master 5 times (seconds, most of the 5);
3. *relay*, last (it takes the master away): the master is killed and a stranger (uid 65534 when
   run as root) binds its port, and relays each try of the node to rejoin to the node's own server,
   to open a session and an actor connection there and send a pickle that would create a file;
   only the call is measured (the master is gone), with how the relays ended and whether the file
   appeared.
After the holders stop a token holder connects again. Prints one JSON line: the figures alone and
under each attack, their ratios, the master's open file descriptors and threads (most seen under
the holders) and what the attackers saw.

Also the attackers' own entry points: ``bench_cluster_attack.py hold|flood|relay ...``
(tests/cluster/test_cluster_attacks.py, cluster/test_cluster_handshake.py and cluster/test_cluster_admission.py start
them through :func:`start_holders`, :func:`start_flood` and :func:`start_relay`).
"""
import argparse
import itertools
import json
import math
import os
import pickle
import resource
import select
import selectors
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import parl_lite
from parl_lite.ext.cluster import wire

OTHER_UID = 65534  # nobody
HOLD_PERIOD = 1.0  # seconds between two bytes an attacker sends on each connection


# --- the attackers ---------------------------------------------------------------------------------
def hold(address: str, count: int, opening: bytes, uid: Optional[int]) -> None:
    """Keep ``count`` connections to ``address`` open, each sending ``opening`` and then one byte per
    second, as user ``uid`` if given (this process becomes that user first: the interpreter may not
    be readable by it); reopen those the server dropped once a second. Prints ``{"held": n, "dropped": n}`` once
    a second (the number connected now, and dropped so far) and once more at SIGTERM."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    host, port = wire.split_address(address)
    selector = selectors.DefaultSelector()
    connected: Dict[socket.socket, bool] = {}  # socket -> its connect() has completed
    dropped = 0
    next_tick = time.monotonic()
    while not stopping:
        for key, events in selector.select(max(0.0, next_tick - time.monotonic())):
            sock = key.fileobj
            if events & selectors.EVENT_WRITE and not connected[sock]:
                connected[sock] = True
                selector.modify(sock, selectors.EVENT_READ)
                _send(sock, opening)
            elif events & selectors.EVENT_READ:
                try:
                    alive = bool(sock.recv(4096))  # the challenge, an HTTP reply: read, ignored
                except OSError:
                    alive = False
                if not alive:
                    selector.unregister(sock)
                    sock.close()
                    del connected[sock]
                    dropped += 1
        if time.monotonic() >= next_tick:
            next_tick += HOLD_PERIOD
            for sock, ready in connected.items():
                if ready:
                    _send(sock, b"X")
            while len(connected) < count:  # those dropped since the last tick, again
                sock = socket.socket()
                sock.setblocking(False)
                sock.connect_ex((host, port))
                connected[sock] = False
                selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
            print(json.dumps({"held": sum(connected.values()), "dropped": dropped}), flush=True)
    print(json.dumps({"held": sum(connected.values()), "dropped": dropped}), flush=True)


def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.send(data)
    except OSError:
        pass  # the read side sees it end


class Holders:
    """An attacker process running :func:`hold` (see :func:`start_holders`)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.last: Dict[str, int] = {"held": 0, "dropped": 0}

    def wait_until_held(self, count: int, timeout: float) -> Dict[str, int]:
        """Read the attacker's reports until it holds ``count`` connections (or ``timeout`` passes)."""
        deadline = time.monotonic() + timeout
        while self.last["held"] < count and time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.last = json.loads(line)
        return self.last

    def stop(self) -> Dict[str, int]:
        """Stop the attacker; its last report."""
        self.process.terminate()
        out, _ = self.process.communicate(timeout=30)
        lines = out.splitlines()
        if lines:
            self.last = json.loads(lines[-1])
        return self.last


def start_holders(address: str, count: int, opening: bytes = b"", uid: Optional[int] = None) -> Holders:
    """Start an attacker holding ``count`` connections to ``address`` (as user ``uid`` if given:
    this process must then be root)."""
    return Holders(_start("hold", address, str(count), opening.hex(), "" if uid is None else str(uid)))


def http_opening(port: int) -> bytes:
    """The start of an HTTP request that the attacker then never finishes."""
    return f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode()


# --- a flood from many loopback addresses, and a token holder on a slow link ---------------------
def flood(address: str, first: int, last: int, count: int) -> None:
    """Keep ``count`` connections to ``address`` open, each from the next of 127.0.0.FIRST-LAST in
    turn, never authenticating, and open another at once for each one the server drops (a stranger
    who fills the cap on unauthenticated connections from many addresses). Prints
    ``{"opened": n, "dropped": n}`` once a second and once more at SIGTERM."""
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    target = wire.split_address(address)
    sources = itertools.cycle([f"127.0.0.{n}" for n in range(first, last + 1)])
    selector = selectors.DefaultSelector()
    held: Set[socket.socket] = set()
    opened = dropped = 0
    next_tick = time.monotonic() + HOLD_PERIOD
    while not stopping:
        while len(held) < count:
            sock = socket.socket()
            sock.setblocking(False)
            sock.bind((next(sources), 0))
            sock.connect_ex(target)
            selector.register(sock, selectors.EVENT_READ)
            held.add(sock)
            opened += 1
        for key, _ in selector.select(max(0.0, next_tick - time.monotonic())):
            sock = key.fileobj
            try:
                alive = bool(sock.recv(4096))  # the opening: read, ignored
            except BlockingIOError:
                continue
            except OSError:
                alive = False
            if not alive:
                selector.unregister(sock)
                sock.close()
                held.discard(sock)
                dropped += 1
        if time.monotonic() >= next_tick:
            next_tick += HOLD_PERIOD
            print(json.dumps({"opened": opened, "dropped": dropped}), flush=True)
    print(json.dumps({"opened": opened, "dropped": dropped}), flush=True)


class Flood:
    """A flood process running :func:`flood` (see :func:`start_flood`)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def wait_until_dropped(self, count: int, timeout: float) -> Dict[str, int]:
        """Read the flood's reports until the server has dropped ``count`` of its connections."""
        deadline, last = time.monotonic() + timeout, {"opened": 0, "dropped": 0}
        while last["dropped"] < count and time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            last = json.loads(line)
        return last

    def stop(self) -> Dict[str, int]:
        """Stop the flood; its last report."""
        self.process.terminate()
        out, _ = self.process.communicate(timeout=30)
        lines = out.splitlines()
        return json.loads(lines[-1]) if lines else {"opened": 0, "dropped": 0}


def start_flood(address: str, first: int = 3, last: int = 250, count: int = 200) -> Flood:
    """Start a flood of ``address`` from 127.0.0.FIRST-LAST (:func:`flood`)."""
    return Flood(_start("flood", address, str(first), str(last), str(count)))


def slow_holder_connects(address: str, token: bytes, source: str, delay: float, budget: float,
                         identity: Optional[str] = None) -> Tuple[float, int]:
    """A token holder at ``source`` whose answer takes ``delay`` seconds more (a node on another
    machine), trying again 10 ms after each time the server drops it: the seconds until the server
    ``identity`` (default: the master) accepted its proof (inf if not within ``budget``), and the
    connections it took."""
    identity = identity or wire.MASTER
    start = time.monotonic()
    deadline, tries = start + budget, 0
    while time.monotonic() < deadline:
        tries += 1
        sock = socket.socket()
        try:
            sock.bind((source, 0))
            sock.settimeout(budget)
            sock.connect(wire.split_address(address))
            said, nonce = wire.read_opening(sock, address, deadline)
            time.sleep(delay)
            mine = os.urandom(wire.NONCE_BYTES)
            sock.sendall(mine + wire.client_proof(token, identity, nonce, mine))
            verdict = wire.receive_exactly(sock, 2, deadline)
        except (OSError, EOFError):  # dropped (a ClusterError is an OSError too): again
            time.sleep(0.01)
            continue
        finally:
            sock.close()
        if verdict != b"OK" or said != identity:
            raise wire.AuthenticationError(f"{address} is {said!r} and answered {verdict!r}")
        return time.monotonic() - start, tries
    return math.inf, tries


# --- a stranger on the master's port, relaying a rejoining node to the node's own server ----------
class _Payload:
    """Unpickling this runs ``touch PATH``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


# what the stranger knows of the protocol (docs/cluster.md): it reads no parl_lite code for it
_OPENING_HEAD = 36  # the bytes of a server's opening before the identity it states (none before PLC2)
_MASTER = "master"  # the identity a master states


def rewritten(opening: bytes, identity: str) -> bytes:
    """A server's opening with the identity it states replaced by ``identity`` (an opening of the
    older protocol, which states none, unchanged)."""
    if len(opening) <= _OPENING_HEAD:
        return opening
    named = identity.encode()
    return opening[:_OPENING_HEAD] + bytes([len(named)]) + named


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))  # the socket's timeout bounds each read: enough for an attacker
        if not chunk:
            raise EOFError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def relay_handshake(victim: socket.socket, target: str,
                    rewrite_as: Optional[str]) -> Tuple[Optional[socket.socket], str]:
    """Connect to ``target``, hand its opening to ``victim`` (its identity rewritten as ``rewrite_as``
    if given), the victim's answer to ``target`` and the verdict back. Returns the connection to
    ``target`` if it accepted the victim's proof as ours, and what happened."""
    server = socket.socket()  # not create_connection: its getaddrinfo imports a codec user 65534 cannot read
    server.settimeout(5)
    victim.settimeout(5)
    try:
        server.connect(wire.split_address(target))
        opening = server.recv(4096)  # a server sends its opening in one piece
        victim.sendall(rewritten(opening, rewrite_as) if rewrite_as else opening)
        try:
            answer = _exactly(victim, wire.ANSWER_BYTES)
        except (OSError, EOFError):
            server.close()
            return None, "the victim refused the opening"
        server.sendall(answer)
        verdict = server.recv(2 + 32)
        victim.sendall(verdict)
        if not verdict.startswith(b"OK"):
            server.close()
            return None, "the target refused the victim's answer"
        return server, "the target accepted the victim's answer"
    except (OSError, EOFError) as error:
        server.close()
        return None, f"the relay broke: {error}"


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return struct.pack("!IH", len(body), 0) + body


def _reply(sock: socket.socket) -> dict:
    size, _ = struct.unpack("!IH", _exactly(sock, 6))
    return json.loads(_exactly(sock, size))


def relay_rejoins(listen: str, target: str, payload_path: str, uid: Optional[int]) -> None:
    """Bind ``listen`` (the address of a master that went away) as user ``uid`` if given, and relay
    each node that connects to rejoin it to the server at ``target`` (the node's own), alternately
    with the target's opening as it is and with its identity rewritten as the master's; with the
    first connection the target accepts, open a session there, with the second an actor connection,
    and send it a pickle that runs ``touch PAYLOAD_PATH`` when unpickled. Prints one JSON line per
    connection relayed: ``{"attempt": n, "rewritten": bool, "outcome": "..."}``."""
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    listener = socket.create_server(wire.split_address(listen))
    listener.settimeout(0.2)
    print(json.dumps({"listening": listen}), flush=True)
    opened: List[socket.socket] = []
    attempt = 0
    while not stopping:
        try:
            victim, _ = listener.accept()
        except socket.timeout:
            continue
        rewrite_as = _MASTER if attempt % 2 else None
        server, outcome = relay_handshake(victim, target, rewrite_as)
        if server is not None:
            outcome = _use(server, opened, payload_path)
        victim.close()
        print(json.dumps({"attempt": attempt, "rewritten": rewrite_as is not None, "outcome": outcome}), flush=True)
        attempt += 1
    for sock in opened:
        sock.close()


def _use(server: socket.socket, opened: List[socket.socket], payload_path: str) -> str:
    """Open a session on ``server`` (an authenticated connection to a node), or, once one is open,
    an actor connection that gets the payload."""
    versions, client_id = wire.local_versions(), "5742a9e1c0de"
    if not opened:
        server.sendall(_frame({"versions": versions, "role": "session", "client_id": client_id, "files": []}))
        if _reply(server).get("ok"):
            server.sendall(struct.pack("!IH", 5, 0) + b"files")
            opened.append(server)
            return f"session opened: {_reply(server)}"
        return "session refused"
    server.sendall(_frame({"versions": versions, "role": "actor", "client_id": client_id, "actor_id": "5742a9e1c0df",
                           "reservation": "none", "max_memory": None, "class_name": "Payload"}))
    reply = _reply(server)
    if not reply.get("ok"):
        return f"actor refused: {reply}"
    payload = pickle.dumps(_Payload(payload_path))
    server.sendall(struct.pack("!IH", len(payload), 0) + payload)
    opened.append(server)
    return "actor opened, payload sent"


class Relay:
    """A stranger's process running :func:`relay_rejoins` (see :func:`start_relay`)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.reports: List[Dict] = []  # all it printed
        self._partial = b""

    @property
    def outcomes(self) -> List[Dict]:
        """The connections it relayed so far, as it reported them."""
        return [report for report in self.reports if "attempt" in report]

    def read(self, timeout: float) -> bool:
        """Take what the relay printed, waiting up to ``timeout`` seconds for something; False once
        it has exited."""
        descriptor = self.process.stdout.fileno()
        if not select.select([descriptor], [], [], timeout)[0]:
            return True
        chunk = os.read(descriptor, 65536)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        self.reports += [json.loads(line) for line in lines if line]
        return bool(chunk)

    def wait_for(self, attempts: int, timeout: float) -> List[Dict]:
        """Read the relay's reports until it has relayed ``attempts`` connections (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        while len(self.outcomes) < attempts and time.monotonic() < deadline:
            if not self.read(max(0.0, deadline - time.monotonic())):
                break
        return self.outcomes

    def stop(self) -> List[Dict]:
        """Stop the relay; the connections it relayed."""
        self.process.terminate()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.read(max(0.0, deadline - time.monotonic())):
            pass
        self.process.wait(timeout=30)
        self.process.stdout.close()
        return self.outcomes


def start_relay(listen: str, target: str, payload_path: str, uid: Optional[int] = None) -> Relay:
    """Start the stranger of :func:`relay_rejoins` (as user ``uid`` if given: this process must then
    be root); returns once it listens."""
    relay = Relay(_start("relay", listen, target, payload_path, "" if uid is None else str(uid)))
    deadline = time.monotonic() + 30
    while not relay.reports and time.monotonic() < deadline:
        if not relay.read(max(0.0, deadline - time.monotonic())):
            break
    if not relay.reports:
        relay.stop()
        raise RuntimeError(f"the relay could not listen on {listen}")
    return relay


def _start(*arguments: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *arguments], stdout=subprocess.PIPE,
                            text=True, cwd="/", env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


# --- what the master holds -------------------------------------------------------------------------
def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


def with_nofile(limit: int):
    """A ``preexec_fn`` that gives the child (and what it starts) ``ulimit -n`` ``limit``."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


# --- the benchmark ---------------------------------------------------------------------------------
@parl_lite.remote_class
class Echo:
    def noop(self) -> None:
        return None


def _cli(env: dict, cwd: Path, nofile: int, *arguments: str) -> str:
    return subprocess.run([sys.executable, "-m", "parl_lite.cli", *arguments], env=env, cwd=cwd, check=True,
                          capture_output=True, text=True, timeout=120, preexec_fn=with_nofile(nofile)).stdout


def _measure(args: argparse.Namespace, actor, address: str, token: bytes, samples: Dict[str, List[float]]) -> None:
    for _ in range(args.calls):
        start = time.perf_counter()
        actor.noop()
        samples["call"].append(time.perf_counter() - start)
    for _ in range(args.connects):
        start = time.perf_counter()
        framed, _ = wire.open_connection(address, token, "observer")
        samples["connect"].append(time.perf_counter() - start)
        framed.close()
    for _ in range(args.creations):
        start = time.perf_counter()
        created = Echo()
        samples["create"].append(time.perf_counter() - start)
        created.close()


def _summary(prefix: str, samples: Dict[str, List[float]]) -> Dict[str, float]:
    calls = sorted(samples["call"])
    figures = {f"{prefix}_call_us": statistics.median(calls) * 1e6,
               f"{prefix}_call_p99_us": calls[int(0.99 * (len(calls) - 1))] * 1e6}
    for name, unit in (("connect", "connect_ms"), ("create", "create_actor_ms")):
        if samples.get(name):
            figures[f"{prefix}_{unit}"] = statistics.median(samples[name]) * 1e3
    return figures


def _ratios(figures: Dict[str, object], attack: str) -> None:
    """``<figure>_<attack>_vs_alone`` for each figure measured alone and under ``attack``."""
    for name, unit in (("call", "us"), ("call_p99", "us"), ("connect", "ms"), ("create_actor", "ms")):
        attacked = figures.get(f"{attack}_{name}_{unit}")
        if isinstance(attacked, float):
            figures[f"{name}_{attack}_vs_alone"] = attacked / float(figures[f"alone_{name}_{unit}"])  # type: ignore


def _in_rounds(args: argparse.Namespace, actor, address: str, token: bytes, between=lambda: None) -> Dict:
    """The samples of :func:`_measure` taken in 5 rounds, ``between()`` after each."""
    samples: Dict[str, List[float]] = {"call": [], "connect": [], "create": []}
    for _ in range(5):
        _measure(_round(args), actor, address, token, samples)
        between()
    return samples


def _under_holders(args, actor, master: Dict, node: Dict, token: bytes, uid: Optional[int]) -> Dict[str, object]:
    monitor_port = int(master["monitor"].rstrip("/").rsplit(":", 1)[1])
    attackers = [start_holders(master["address"], args.strangers), start_holders(node["address"], args.strangers),
                 start_holders(f"127.0.0.1:{monitor_port}", args.holders, http_opening(monitor_port), uid)]
    figures: Dict[str, object] = {}
    try:
        for attacker, count in zip(attackers, (args.strangers, args.strangers, args.holders)):
            attacker.wait_until_held(count, timeout=20)
        most = {"fds": 0, "threads": 0}

        def look() -> None:
            most["fds"] = max(most["fds"], open_descriptors(master["pid"]))
            most["threads"] = max(most["threads"], threads(master["pid"]))

        figures.update(_summary("attacked", _in_rounds(args, actor, master["address"], token, look)))
    finally:
        seen = [attacker.stop() for attacker in attackers]
    start = time.perf_counter()
    wire.open_connection(master["address"], token, "observer")[0].close()
    figures["after_attack_connect_ms"] = (time.perf_counter() - start) * 1e3
    figures["master_fds_most"], figures["master_threads_most"] = most["fds"], most["threads"]
    for name, report in zip(("master_strangers", "node_strangers", "monitor_holders"), seen):
        figures[f"{name}_held_at_end"] = report["held"]
        figures[f"{name}_dropped"] = report["dropped"]
    return figures


def _under_flood(args, actor, master: Dict, node: Dict, token: bytes) -> Dict[str, object]:
    """Rounds with the floods running, each after a round with them stopped (SIGSTOP): the machine's
    other load is then the same for both."""
    floods = [start_flood(master["address"], count=args.flood), start_flood(node["address"], count=args.flood)]
    flooded: Dict[str, List[float]] = {"call": [], "connect": [], "create": []}
    paused: Dict[str, List[float]] = {"call": [], "connect": [], "create": []}
    used = {"attackers": 0.0, "servers": 0.0, "seconds": 0.0}
    try:
        for flood in floods:
            flood.wait_until_dropped(1000, timeout=30)
        for _ in range(5):
            _signal_all(floods, signal.SIGSTOP)
            time.sleep(0.5)  # the servers shed what the floods left waiting
            _measure(_round(args), actor, master["address"], token, paused)
            _signal_all(floods, signal.SIGCONT)
            time.sleep(0.5)
            before = _cpu_seconds([f.process.pid for f in floods]), _cpu_seconds([master["pid"], node["pid"]])
            started = time.monotonic()
            _measure(_round(args), actor, master["address"], token, flooded)
            used["seconds"] += time.monotonic() - started
            used["attackers"] += _cpu_seconds([f.process.pid for f in floods]) - before[0]
            used["servers"] += _cpu_seconds([master["pid"], node["pid"]]) - before[1]
        slow = [slow_holder_connects(master["address"], token, "127.0.0.2", 0.1, 3.0) for _ in range(5)]
    finally:
        _signal_all(floods, signal.SIGCONT)
        seen = [flood.stop() for flood in floods]
    figures: Dict[str, object] = {**_summary("flood", flooded), **_summary("flood_paused", paused)}
    figures["call_flood_vs_paused"] = figures["flood_call_us"] / figures["flood_paused_call_us"]  # type: ignore
    figures["flood_attackers_cpu_percent"] = 100 * used["attackers"] / used["seconds"]
    figures["flood_master_and_node_cpu_percent"] = 100 * used["servers"] / used["seconds"]
    figures["flood_slow_holder_in_within_3_s"] = sum(seconds < 3.0 for seconds, _ in slow)  # of 5
    most = max(seconds for seconds, _ in slow)
    figures["flood_slow_holder_connect_s_most"] = most if math.isfinite(most) else None
    figures["flood_slow_holder_connections_most"] = max(tries for _, tries in slow)
    for name, report in zip(("master", "node"), seen):
        figures[f"flood_{name}_opened"], figures[f"flood_{name}_dropped"] = report["opened"], report["dropped"]
    return figures


def _round(args: argparse.Namespace) -> argparse.Namespace:
    """A fifth of the measurements."""
    return argparse.Namespace(calls=args.calls // 5, connects=max(1, args.connects // 5),
                              creations=max(1, args.creations // 5))


def _signal_all(floods: List[Flood], number: int) -> None:
    for flood in floods:
        if flood.process.poll() is None:
            os.kill(flood.process.pid, number)


def _cpu_seconds(pids: List[int]) -> float:
    """User and system CPU seconds the processes ``pids`` have used (all their threads)."""
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _under_relay(actor, master: Dict, node: Dict, root: Path, uid: Optional[int]) -> Dict[str, object]:
    os.kill(master["pid"], signal.SIGKILL)
    while Path(f"/proc/{master['pid']}").exists() and _state(master["pid"]) != "Z":
        time.sleep(0.01)
    marker = root / "payload-ran"
    relay = start_relay(master["address"], node["address"], str(marker), uid)
    samples: Dict[str, List[float]] = {"call": []}
    try:
        deadline = time.monotonic() + 60
        while len(relay.outcomes) < 6 and time.monotonic() < deadline:  # the node tries every 0.1-2 s
            _measure(argparse.Namespace(calls=200, connects=0, creations=0), actor, "", b"", samples)
            relay.read(timeout=0.0)
    finally:
        outcomes = relay.stop()
    figures: Dict[str, object] = _summary("relay", samples)
    figures["relay_attempts"] = len(outcomes)
    figures["relay_accepted_by_the_node"] = sum("opened" in outcome["outcome"] for outcome in outcomes)
    figures["relay_refused_by_the_victim"] = sum("victim refused" in outcome["outcome"] for outcome in outcomes)
    figures["relay_refused_by_the_target"] = sum("target refused" in outcome["outcome"] for outcome in outcomes)
    figures["relay_payload_ran"] = marker.exists()
    return figures


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nofile", type=int, default=256, help="ulimit -n of the master and the node")
    parser.add_argument("--strangers", type=int, default=500, help="unauthenticated connections to each server")
    parser.add_argument("--holders", type=int, default=200, help="slow HTTP connections to the monitor")
    parser.add_argument("--flood", type=int, default=200, help="connections the flood keeps to each server")
    parser.add_argument("--calls", type=int, default=2000, help="sync calls timed alone and under attack")
    parser.add_argument("--connects", type=int, default=20, help="connections to the master timed")
    parser.add_argument("--creations", type=int, default=10, help="actor creations timed")
    args = parser.parse_args()
    uid = OTHER_UID if os.geteuid() == 0 else None
    figures: Dict[str, object] = {"load1_start": os.getloadavg()[0], "nofile": args.nofile,
                                  "attacker_uid": uid if uid is not None else os.geteuid()}
    with tempfile.TemporaryDirectory(prefix="bench_attack_") as folder:
        root = Path(folder)
        env = {**os.environ, "PARL_LITE_HOME": str(root / "home"), "PARL_LITE_EXIT_WITH": str(os.getpid())}
        env.pop("PARL_LITE_TOKEN", None)
        (root / "master").mkdir()
        _cli(env, root / "master", args.nofile, "start", "--port", "0", "--cpus", "2", "--monitor-port", "0")
        processes = json.loads((root / "home" / "cluster.json").read_text())["processes"]
        master = next(entry for entry in processes if entry["role"] == "master")
        node = next(entry for entry in processes if entry["role"] == "node")
        token = (root / "home" / "token").read_text().strip().encode()
        try:
            parl_lite.connect(master["address"], token_file=str(root / "home" / "token"))
            actor = Echo()
            for _ in range(200):
                actor.noop()
            alone: Dict[str, List[float]] = {"call": [], "connect": [], "create": []}
            _measure(args, actor, master["address"], token, alone)
            figures.update(_summary("alone", alone))
            figures.update(_under_holders(args, actor, master, node, token, uid))
            figures.update(_under_flood(args, actor, master, node, token))
            figures.update(_under_relay(actor, master, node, root, uid))
            for attack in ("attacked", "flood", "flood_paused", "relay"):
                _ratios(figures, attack)
        finally:
            parl_lite.shutdown()
            _cli(env, root, args.nofile, "stop")
    figures["load1_end"] = os.getloadavg()[0]
    print(json.dumps({name: round(value, 3) if isinstance(value, float) else value
                      for name, value in figures.items()}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["hold"]:
        hold(sys.argv[2], int(sys.argv[3]), bytes.fromhex(sys.argv[4]), int(sys.argv[5]) if sys.argv[5] else None)
    elif sys.argv[1:2] == ["flood"]:
        flood(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1:2] == ["relay"]:
        relay_rejoins(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if sys.argv[5] else None)
    else:
        main()
