"""Benchmark of ``@remote_class`` on a parl_lite cluster against a raw TCP socket, in one run.

    python scripts/bench/bench_cluster.py [--calls 3000]

Starts a master and two nodes on this machine through the ``parl-lite`` CLI (in a temporary
folder with its own token), connects to it over 127.0.0.1, and prints one JSON line:
- sync trivial call (median µs) and its ratio to a raw TCP loopback round trip of the same size,
  timed interleaved with it, as the scheduler places the processes (``sync_call_*``), then with
  the caller, the echo process and the actor's worker pinned to one core (``same_core_*``) and
  with the caller on one core and both servers on the other (``cross_core_*``): on this VM a round
  trip that wakes the other, halted vCPU costs 4x one that stays on a core, so an unpinned ratio
  swings with where the actor and the echo process happen to land, not with our code;
- async calls per second on one actor (``wait=False`` futures);
- a 64 MB float32 array as argument and return value: ms and GB/s each way, against the same
  bytes echoed through a raw TCP socket;
- PARL's example, 5 actors each summing to 1e7 from 5 threads, against serial and against 5 plain
  forked processes doing the same, in one session per node like the actors (what the cores give
  right now; median of interleaved rounds), and the CPU seconds the master and the nodes used
  meanwhile;
- creating an actor (ms, mean of 8);
- the 1-minute load average at the start and the end.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import parl_lite
from bench_remote import SUM_TO, Worker, _run_threads, _samples, _timed, count_to

ARRAY_BYTES = 64 * 2**20
SMALL_BYTES = 64  # about the size of a trivial call's frame
NUM_SUMMING_ACTORS = 5

# the workload of bench_remote.py (shipped to the nodes with this script's folder)
RemoteWorker = parl_lite.remote_class(Worker)
AsyncWorker = parl_lite.remote_class(Worker, wait=False)


def _echo_server(listener: socket.socket) -> None:
    """A raw TCP echo server in a forked process: what it reads it sends back."""
    connection, _ = listener.accept()
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = bytearray(ARRAY_BYTES)
    view = memoryview(buffer)
    while True:
        header = connection.recv(8, socket.MSG_WAITALL)
        if len(header) < 8:
            os._exit(0)
        size = int.from_bytes(header, "big")
        received = 0
        while received < size:
            received += connection.recv_into(view[received:size])
        connection.sendall(view[:size])


class RawTcp:
    """The baseline: length-prefixed bytes to an echo process over TCP on 127.0.0.1."""

    def __init__(self) -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        self.pid = os.fork()
        if self.pid == 0:
            _echo_server(listener)
        listener_port = listener.getsockname()[1]
        listener.close()
        self.sock = socket.create_connection(("127.0.0.1", listener_port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.small = bytes(SMALL_BYTES)
        self.reply = bytearray(ARRAY_BYTES)

    def round_trip(self, payload) -> None:
        size = memoryview(payload).nbytes
        self.sock.sendall(size.to_bytes(8, "big") + bytes(payload) if size <= SMALL_BYTES else size.to_bytes(8, "big"))
        if size > SMALL_BYTES:
            self.sock.sendall(payload)
        view = memoryview(self.reply)
        received = 0
        while received < size:
            received += self.sock.recv_into(view[received:size])

    def close(self) -> None:
        self.sock.close()
        os.waitpid(self.pid, 0)


def _forked_sums(per_node: list) -> None:
    """The example's parallel floor: the same number of processes summing, grouped as on the nodes.

    Each node's workers run in a session of their own (the node and its pool's zygote start one),
    and with the kernel's autogroup on, each session is a scheduling group that gets an equal share
    of the cores when they are contended: the floor gets one session per node, ``per_node[i]``
    processes in the i-th, so the kernel treats both alike.
    """
    leaders = []
    for count in per_node:
        leader = os.fork()
        if leader == 0:
            os.setsid()
            summers = []
            for _ in range(count):
                pid = os.fork()
                if pid == 0:
                    count_to(SUM_TO)
                    os._exit(0)
                summers.append(pid)
            for pid in summers:
                os.waitpid(pid, 0)
            os._exit(0)
        leaders.append(leader)
    for leader in leaders:
        os.waitpid(leader, 0)


def _stat_fields(path: str) -> list:
    """The fields of a ``/proc/.../stat`` file after the command name (field 3 on is index 0 on)."""
    with open(path) as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _cpu_seconds(pids: list) -> float:
    """User and system CPU seconds the processes ``pids`` have used so far."""
    fields = [_stat_fields(f"/proc/{pid}/stat") for pid in pids]
    return sum(int(f[11]) + int(f[12]) for f in fields) / os.sysconf("SC_CLK_TCK")


def _on_callers_core(pid: int) -> bool:
    """Process ``pid``'s main thread last ran on the core this thread last ran on."""
    return _stat_fields(f"/proc/{pid}/task/{pid}/stat")[36] == _stat_fields("/proc/thread-self/stat")[36]


def _sync_pinned(args: argparse.Namespace, raw: RawTcp, actor, figures: dict) -> None:
    """The sync call against raw TCP with both servers where the caller is, then on the other core."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return
    servers = [raw.pid, actor._channel.pid]
    try:
        os.sched_setaffinity(0, {cores[0]})
        for placement, core in (("same_core", cores[0]), ("cross_core", cores[1])):
            for pid in servers:
                os.sched_setaffinity(pid, {core})
            for _ in range(100):
                actor.noop()
                raw.round_trip(raw.small)
            tcp_samples, ours_samples = [], []
            for _ in range(10):
                tcp_samples += _samples(lambda: raw.round_trip(raw.small), args.calls // 20)
                ours_samples += _samples(actor.noop, args.calls // 20)
            figures[f"{placement}_tcp_us"] = statistics.median(tcp_samples) * 1e6
            figures[f"{placement}_sync_call_us"] = statistics.median(ours_samples) * 1e6
            figures[f"{placement}_vs_tcp"] = figures[f"{placement}_sync_call_us"] / figures[f"{placement}_tcp_us"]
    finally:
        for pid in (0, *servers):
            os.sched_setaffinity(pid, cores)


def _cli(env: dict, cwd: Path, *arguments: str) -> str:
    return subprocess.run([sys.executable, "-m", "parl_lite.cli", *arguments], env=env, cwd=cwd, check=True,
                          capture_output=True, text=True, timeout=120).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000, help="trivial calls timed for the latency figures")
    parser.add_argument("--array-repeats", type=int, default=5, help="64 MB round trips timed (median)")
    parser.add_argument("--example-rounds", type=int, default=3, help="rounds of PARL's example (median)")
    args = parser.parse_args()
    figures = {"load1_start": os.getloadavg()[0]}
    raw = RawTcp()  # forked before any thread of ours exists
    with tempfile.TemporaryDirectory(prefix="bench_cluster_") as folder:
        root = Path(folder)
        env = {**os.environ, "PARL_LITE_HOME": str(root / "home"), "PARL_LITE_EXIT_WITH": str(os.getpid())}
        env.pop("PARL_LITE_TOKEN", None)
        for name in ("master", "node-a", "node-b"):
            (root / name).mkdir()
        # a master alone, then two nodes with 3 actor slots each (the OS spreads them on the cores)
        _cli(env, root / "master", "start", "--port", "0", "--cpus", "0")
        address = json.loads((root / "home" / "cluster.json").read_text())["processes"][0]["address"]
        for name in ("node-a", "node-b"):
            _cli(env, root / name, "connect", "--address", address, "--cpus", "3")
        try:
            parl_lite.connect(address, token_file=str(root / "home" / "token"))
            recorded = json.loads((root / "home" / "cluster.json").read_text())["processes"]
            cluster_pids = [entry["pid"] for entry in recorded]  # the master and the two nodes
            _measure(args, raw, figures, cluster_pids)
        finally:
            parl_lite.shutdown()
            _cli(env, root, "stop")
    raw.close()
    figures["load1_end"] = os.getloadavg()[0]
    print(json.dumps({name: round(value, 3) for name, value in figures.items()}))


def _measure(args: argparse.Namespace, raw: RawTcp, figures: dict, cluster_pids: list) -> None:
    actor = RemoteWorker()
    for _ in range(300):
        actor.noop()
        raw.round_trip(raw.small)
    tcp_samples, ours_samples = [], []
    echo_with_us = actor_with_us = 0
    for _ in range(10):  # interleaved rounds, one median over all of each
        tcp_samples += _samples(lambda: raw.round_trip(raw.small), args.calls // 10)
        echo_with_us += _on_callers_core(raw.pid)
        ours_samples += _samples(actor.noop, args.calls // 10)
        actor_with_us += _on_callers_core(actor._channel.pid)
    # where the scheduler put the servers (out of 10 looks): a round trip across cores costs 3-4x here
    figures["echo_on_callers_core_of_10"] = echo_with_us
    figures["actor_on_callers_core_of_10"] = actor_with_us
    figures["tcp_round_trip_us"] = statistics.median(tcp_samples) * 1e6
    figures["sync_call_us"] = statistics.median(ours_samples) * 1e6
    figures["sync_call_vs_tcp"] = figures["sync_call_us"] / figures["tcp_round_trip_us"]
    _sync_pinned(args, raw, actor, figures)

    async_actor = AsyncWorker()
    parl_lite.get([async_actor.noop() for _ in range(1000)])
    figures["async_calls_per_s"] = 10000 / _timed(lambda: parl_lite.get([async_actor.noop() for _ in range(10000)]))

    array = np.ones(ARRAY_BYTES // 4, dtype=np.float32)
    actor.echo(array)
    raw.round_trip(array)
    tcp_64, ours_64 = [], []
    for _ in range(args.array_repeats):
        tcp_64.append(_timed(lambda: raw.round_trip(array)))
        ours_64.append(_timed(lambda: actor.echo(array)))
    figures["tcp_64mb_ms"] = statistics.median(tcp_64) * 1e3
    figures["ours_64mb_ms"] = statistics.median(ours_64) * 1e3
    figures["ours_64mb_gb_per_s_each_way"] = 2 * ARRAY_BYTES / 1e9 / statistics.median(ours_64)
    figures["tcp_64mb_gb_per_s_each_way"] = 2 * ARRAY_BYTES / 1e9 / statistics.median(tcp_64)
    actor.close()
    async_actor.close()

    creation = []
    summing = []
    for _ in range(NUM_SUMMING_ACTORS):
        start = time.perf_counter()
        summing.append(RemoteWorker())
        creation.append(time.perf_counter() - start)
    figures["create_actor_ms_mean"] = statistics.mean(creation) * 1e3
    nodes = [handle._channel.node.address for handle in summing]
    figures["example_nodes_used"] = len(set(nodes))
    per_node = [nodes.count(address) for address in sorted(set(nodes))]
    rounds = {"serial": [], "forked": [], "actors": []}
    cluster_cpu = 0.0
    for _ in range(args.example_rounds):  # interleaved, medians: one round is at the VM's mercy
        rounds["serial"].append(_timed(lambda: [count_to(SUM_TO) for _ in range(NUM_SUMMING_ACTORS)]))
        rounds["forked"].append(_timed(lambda: _forked_sums(per_node)))
        cpu_before = _cpu_seconds(cluster_pids)
        rounds["actors"].append(_timed(lambda: _run_threads([lambda a=a: a.run(SUM_TO) for a in summing])))
        cluster_cpu += _cpu_seconds(cluster_pids) - cpu_before
    for name, seconds in rounds.items():
        figures[f"parl_example_{name}_s"] = statistics.median(seconds)
    figures["parl_example_speedup_vs_serial"] = figures["parl_example_serial_s"] / figures["parl_example_actors_s"]
    figures["forked_speedup_vs_serial"] = figures["parl_example_serial_s"] / figures["parl_example_forked_s"]
    figures["parl_example_speed_vs_forked"] = figures["parl_example_forked_s"] / figures["parl_example_actors_s"]
    figures["master_and_nodes_cpu_s_per_round"] = cluster_cpu / args.example_rounds
    for handle in summing:
        handle.close()


if __name__ == "__main__":
    main()
