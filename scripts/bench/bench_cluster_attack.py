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

The attackers are ``tests/cluster_attackers.py``, which the cluster's tests use too.
"""
import argparse
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import parl_lite
from parl_lite.ext.cluster import wire

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the attackers, shared with the cluster's tests
from cluster_attackers import (OTHER_UID, Flood, http_opening, slow_holder_connects, start_flood,  # noqa: E402
                               start_holders, start_relay)

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
    main()
