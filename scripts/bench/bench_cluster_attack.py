"""A parl_lite cluster while strangers attack it, against the same cluster left alone, in one run.

    python scripts/bench/bench_cluster_attack.py [--nofile 256] [--strangers 500] [--holders 200] [--calls 2000]

Starts a master and a node through the ``parl-lite`` CLI with a low ``ulimit -n`` (``--nofile``),
connects a client over 127.0.0.1, and measures, first alone, then under both attacks at once:
- a synchronous trivial call on an actor created before the attacks (median µs, and the 99th
  percentile);
- a token holder connecting to the master (authentication and hello, median ms);
- creating an actor (placement, a session with the node, the actor's connection; median ms).
The attacks, each in a process of its own, reopening every connection the server drops:
- ``--strangers`` connections from 127.0.0.1 to the master and as many to the node, each sending one
  byte per second and never authenticating, those dropped reopened at the next second (what took
  each server's file descriptors and a thread per connection before the caps);
- ``--holders`` HTTP connections to the master's web monitor from another user (uid 65534 when this
  runs as root, else this user), each sending its request one byte per second.
Then the attackers stop and a token holder connects again. Prints one JSON line: the figures
alone and under attack, their ratios, the connection after the attacks, the master's open file
descriptors and threads (most seen under attack) and what the attackers saw (connections held,
dropped by the servers).

Also the attackers' own entry point: ``bench_cluster_attack.py hold HOST:PORT COUNT OPENING_HEX UID``
(tests/test_cluster_hardening.py starts them through :func:`start_holders`).
"""
import argparse
import json
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

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
    process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "hold", address, str(count),
                                opening.hex(), "" if uid is None else str(uid)], stdout=subprocess.PIPE, text=True,
                               cwd="/", env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return Holders(process)


def http_opening(port: int) -> bytes:
    """The start of an HTTP request that the attacker then never finishes."""
    return f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode()


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
    return {f"{prefix}_call_us": statistics.median(calls) * 1e6,
            f"{prefix}_call_p99_us": calls[int(0.99 * (len(calls) - 1))] * 1e6,
            f"{prefix}_connect_ms": statistics.median(samples["connect"]) * 1e3,
            f"{prefix}_create_actor_ms": statistics.median(samples["create"]) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nofile", type=int, default=256, help="ulimit -n of the master and the node")
    parser.add_argument("--strangers", type=int, default=500, help="unauthenticated connections to each server")
    parser.add_argument("--holders", type=int, default=200, help="slow HTTP connections to the monitor")
    parser.add_argument("--calls", type=int, default=2000, help="sync calls timed alone and under attack")
    parser.add_argument("--connects", type=int, default=20, help="connections to the master timed")
    parser.add_argument("--creations", type=int, default=10, help="actor creations timed")
    args = parser.parse_args()
    uid = OTHER_UID if os.geteuid() == 0 else None
    figures: Dict[str, object] = {"load1_start": os.getloadavg()[0], "nofile": args.nofile,
                                  "monitor_attacker_uid": uid if uid is not None else os.geteuid()}
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
        monitor_port = int(master["monitor"].rstrip("/").rsplit(":", 1)[1])
        attackers: List[Holders] = []
        try:
            parl_lite.connect(master["address"], token_file=str(root / "home" / "token"))
            actor = Echo()
            for _ in range(200):
                actor.noop()
            alone: Dict[str, List[float]] = {"call": [], "connect": [], "create": []}
            _measure(args, actor, master["address"], token, alone)
            attackers = [start_holders(master["address"], args.strangers),
                         start_holders(node["address"], args.strangers),
                         start_holders(f"127.0.0.1:{monitor_port}", args.holders, http_opening(monitor_port), uid)]
            for attacker, count in zip(attackers, (args.strangers, args.strangers, args.holders)):
                attacker.wait_until_held(count, timeout=20)
            attacked: Dict[str, List[float]] = {"call": [], "connect": [], "create": []}
            most = {"fds": 0, "threads": 0}
            for _ in range(5):  # in rounds, looking at the master between them
                _measure(argparse.Namespace(calls=args.calls // 5, connects=max(1, args.connects // 5),
                                            creations=max(1, args.creations // 5)),
                         actor, master["address"], token, attacked)
                most["fds"] = max(most["fds"], open_descriptors(master["pid"]))
                most["threads"] = max(most["threads"], threads(master["pid"]))
            seen = [attacker.stop() for attacker in attackers]
            attackers = []
            start = time.perf_counter()
            wire.open_connection(master["address"], token, "observer")[0].close()
            figures["after_attack_connect_ms"] = (time.perf_counter() - start) * 1e3
            figures.update(_summary("alone", alone))
            figures.update(_summary("attacked", attacked))
            for name in ("call", "call_p99", "connect", "create_actor"):
                unit = "us" if name.startswith("call") else "ms"
                figures[f"{name}_attacked_vs_alone"] = (figures[f"attacked_{name}_{unit}"]
                                                        / figures[f"alone_{name}_{unit}"])
            figures["master_fds_most"] = most["fds"]
            figures["master_threads_most"] = most["threads"]
            for name, report in zip(("master_strangers", "node_strangers", "monitor_holders"), seen):
                figures[f"{name}_held_at_end"] = report["held"]
                figures[f"{name}_dropped"] = report["dropped"]
        finally:
            for attacker in attackers:
                attacker.stop()
            parl_lite.shutdown()
            _cli(env, root, args.nofile, "stop")
    figures["load1_end"] = os.getloadavg()[0]
    print(json.dumps({name: round(value, 3) if isinstance(value, float) else value
                      for name, value in figures.items()}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["hold"]:
        hold(sys.argv[2], int(sys.argv[3]), bytes.fromhex(sys.argv[4]), int(sys.argv[5]) if sys.argv[5] else None)
    else:
        main()
