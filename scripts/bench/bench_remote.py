"""Benchmark of ``@remote_class`` on the local pool against plain-Python baselines, in one run.

    python scripts/bench/bench_remote.py [--calls 3000] [--ray]
    python scripts/bench/bench_remote.py --address ray://local

Prints one JSON line:
- sync trivial call (median µs) and its ratio to a raw ``multiprocessing.Pipe`` round trip, unpinned
  and with the caller, the pipe's echo process and the actor's worker pinned to one core
  (``same_core_*``) or the two servers on the other core (``cross_core_*``);
- async calls per second on one actor (``wait=False`` futures);
- a 64 MB float64 array as argument and return value (an echo), against pickling it through a pipe
  and, with ``--ray`` (Ray installed), against a Ray actor, in interleaved rounds: the *first* call
  (a fresh pool and actor, a fresh Ray actor) and the steady state (later calls) apart;
- PARL's example, 5 actors each summing to 1e7 from 5 threads, against serial and plain threads
  (median of interleaved rounds);
- creating 8 actors on a warm pool (ms per actor): once after the calls above, then in
  ``--creation-rounds`` rounds (each after the pool refilled its idle workers, so the first of a
  round takes an idle worker: ``create_actor_idle_worker_ms_median``; the pool keeps one per CPU,
  and one per actor created in the last 60 s up to 4 per CPU, so after the first round every actor
  of a round takes an idle worker, while the later ones of the first round wait for a fork from the
  zygote) beside two plain baselines
  measured in the same rounds: a process forked from the bench that answers over a pipe, and a warm
  ``ProcessPoolExecutor`` building the class and sending it back;
- creating an actor that waits for a fork (``create_actor_forked_ms_median``: a pool with
  ``num_workers=0``, so no idle worker is kept; each actor is closed before the next one).

With ``--address ray://...`` the actors run on Ray, and plain Ray actors of the same class are measured
alongside (interleaved where it matters): ``plain_ray_*`` figures and ``*_vs_plain_ray`` ratios; the
64 MB echo is then the steady state on that backend (``ours_64mb_ms`` beside ``plain_ray_64mb_ms``).
"""
import argparse
import concurrent.futures
import json
import multiprocessing
import os
import statistics
import threading
import time
from typing import Callable, Dict, List, Tuple

import numpy as np

import parl_lite

SUM_TO = 10**7
NUM_SUMMING_ACTORS = 5
ARRAY_BYTES = 64 * 2**20
ECHO_REPEATS = 5  # steady-state echoes per round


def count_to(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


class Worker:
    def noop(self) -> None:
        return None

    def echo(self, value):
        return value

    def run(self, n: int) -> int:
        return count_to(n)


RemoteWorker = parl_lite.remote_class(Worker)
AsyncWorker = parl_lite.remote_class(Worker, wait=False)


def _pipe_echo_server(connection) -> None:
    while True:
        message = connection.recv()
        if message is None:
            return
        connection.send(message)


def _samples(function: Callable[[], object], repeat: int) -> List[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return samples


def _median_seconds(function: Callable[[], object], repeat: int) -> float:
    return statistics.median(_samples(function, repeat))


def _timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _run_threads(targets: List[Callable[[], object]]) -> None:
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _sync_pinned(calls: int, pipe_round_trip: Callable[[], None], pipe_pid: int, actor,
                 figures: Dict[str, float]) -> None:
    """The sync call against the pipe with both servers where the caller is, then on the other core:
    on this VM a round trip that wakes a halted vCPU costs about 4x one that stays on a core, so
    unpinned figures swing with where the scheduler put the echo process and the worker."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return
    servers = [pipe_pid, actor._channel.pid]
    try:
        os.sched_setaffinity(0, {cores[0]})
        for placement, core in (("same_core", cores[0]), ("cross_core", cores[1])):
            for pid in servers:
                os.sched_setaffinity(pid, {core})
            for _ in range(100):
                actor.noop()
                pipe_round_trip()
            pipe_samples: List[float] = []
            ours_samples: List[float] = []
            for _ in range(10):
                pipe_samples += _samples(pipe_round_trip, calls // 20)
                ours_samples += _samples(actor.noop, calls // 20)
            figures[f"{placement}_pipe_us"] = statistics.median(pipe_samples) * 1e6
            figures[f"{placement}_sync_call_us"] = statistics.median(ours_samples) * 1e6
            figures[f"{placement}_vs_pipe"] = figures[f"{placement}_sync_call_us"] / figures[f"{placement}_pipe_us"]
    finally:
        for pid in (0, *servers):
            os.sched_setaffinity(pid, cores)


def _echo_round(make_echo: Callable[[], Callable[[np.ndarray], object]], array: np.ndarray,
                close: Callable[[], None]) -> Tuple[float, List[float]]:
    """Time the first echo of a fresh actor, then ECHO_REPEATS more; seconds."""
    echo = make_echo()
    first = _timed(lambda: echo(array))
    steady = _samples(lambda: echo(array), ECHO_REPEATS)
    close()
    return first, steady


def _large_array_rounds(rounds: int, with_ray: bool) -> Dict[str, float]:
    """64 MB float64 echoes: ours (a fresh pool each round) and Ray's, interleaved."""
    array = np.ones(ARRAY_BYTES // 8, dtype=np.float64)
    times: Dict[str, List[float]] = {"ours_first": [], "ours_steady": [], "ray_first": [], "ray_steady": []}
    if with_ray:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=1024 * 2**20)
        RayWorker = ray.remote(Worker)
    for _ in range(rounds):
        parl_lite.connect()  # a fresh pool: its first large call is measured
        first, steady = _echo_round(lambda: RemoteWorker().echo, array, parl_lite.shutdown)
        times["ours_first"].append(first)
        times["ours_steady"] += steady
        if with_ray:
            actor = RayWorker.remote()
            ray.get(actor.noop.remote())  # started
            first, steady = _echo_round(lambda: lambda value: ray.get(actor.echo.remote(value)), array,
                                        lambda: ray.kill(actor))
            times["ray_first"].append(first)
            times["ray_steady"] += steady
    if with_ray:
        ray.shutdown()
    return {f"{name}_64mb_ms": statistics.median(seconds) * 1e3 for name, seconds in times.items() if seconds} | {
        f"{name}_64mb_ms_max": max(seconds) * 1e3 for name, seconds in times.items() if name.endswith("first") and seconds}


def _answer(connection) -> None:
    connection.send(None)


def _plain_fork(context) -> None:
    """A process forked from this one that has answered over a pipe, then ended."""
    ours, theirs = context.Pipe()
    process = context.Process(target=_answer, args=(theirs,), daemon=True)
    process.start()
    ours.recv()
    process.join()


def _creation_rounds(rounds: int) -> Dict[str, float]:
    """Rounds of 8 actors created back to back on the warm pool (each round after the pool has
    refilled its idle workers: the first of a round takes an idle worker, the later ones may wait
    for a fork), beside 8 processes forked from this one and answering over a pipe, and 8
    ``Worker()`` built by a warm ``ProcessPoolExecutor`` of 2 and sent back."""
    context = multiprocessing.get_context("fork")
    times: Dict[str, List[float]] = {"ours": [], "fork": [], "executor": []}
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as executor:
        executor.submit(Worker).result()
        for _ in range(rounds):
            time.sleep(0.5)  # the pool refills its idle workers
            created = []
            for _ in range(8):
                start = time.perf_counter()
                created.append(RemoteWorker())
                times["ours"].append(time.perf_counter() - start)
            for handle in created:
                handle.close()
            for _ in range(8):
                times["fork"].append(_timed(lambda: _plain_fork(context)))
            for _ in range(8):
                times["executor"].append(_timed(lambda: executor.submit(Worker).result()))
    return {"create_actor_idle_worker_ms_median": statistics.median(times["ours"][::8]) * 1e3,
            "create_actor_rounds_ms_mean": statistics.mean(times["ours"]) * 1e3,
            "create_actor_rounds_ms_median": statistics.median(times["ours"]) * 1e3,
            "plain_fork_process_ms_mean": statistics.mean(times["fork"]) * 1e3,
            "executor_create_ms_mean": statistics.mean(times["executor"]) * 1e3}


def _forked_creations(count: int) -> Dict[str, float]:
    """Actors created one at a time on a pool that keeps no idle worker: each waits for a fork."""
    parl_lite.connect(num_workers=0)
    times = []
    for _ in range(count):
        time.sleep(0.05)  # the previous actor's worker has stopped
        start = time.perf_counter()
        actor = RemoteWorker()
        times.append(time.perf_counter() - start)
        actor.close()
    parl_lite.shutdown()
    return {"create_actor_forked_ms_median": statistics.median(times) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000, help="trivial calls timed for the latency figures")
    parser.add_argument("--array-repeats", type=int, default=5, help="64 MB round trips through the pipe timed (median)")
    parser.add_argument("--example-rounds", type=int, default=3, help="rounds of PARL's example (median)")
    parser.add_argument("--address", default=None,
                        help="parl_lite.connect address (default: the local pool); ray://... adds plain Ray figures")
    parser.add_argument("--echo-rounds", type=int, default=5, help="rounds of 64 MB echoes, each with a fresh pool")
    parser.add_argument("--ray", action="store_true", help="also measure a Ray actor's 64 MB echo (Ray installed)")
    parser.add_argument("--creation-rounds", type=int, default=10,
                        help="rounds of 8 actor creations beside the baselines")
    args = parser.parse_args()
    if args.ray and args.address:
        parser.error("--ray compares the local pool with Ray; with --address the plain Ray figures come anyway")
    figures = {}

    # raw pipe floor and its 64 MB baseline, with a forked echo process
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_pipe_echo_server, args=(theirs,), daemon=True)
    server.start()
    small = ("call", 1, "noop", (), {})

    def pipe_round_trip() -> None:
        ours.send(small)
        ours.recv()

    for _ in range(200):
        pipe_round_trip()
    array = np.ones(ARRAY_BYTES // 8, dtype=np.float64)

    def pipe_array() -> None:
        ours.send(array)
        ours.recv()

    pipe_array()
    figures["pipe_64mb_ms"] = _median_seconds(pipe_array, args.array_repeats) * 1e3

    parl_lite.connect(args.address)
    plain = None
    if args.address and args.address.startswith("ray://"):
        from plain_ray_baseline import PlainRayWorker

        plain = PlainRayWorker(Worker)
    actor = RemoteWorker()
    for _ in range(200):
        actor.noop()
    # interleaved rounds, one median over all of each: wake-up latency of idle virtual cores drifts
    pipe_samples, ours_samples, plain_samples = [], [], []
    for _ in range(10):
        pipe_samples += _samples(pipe_round_trip, args.calls // 10)
        ours_samples += _samples(actor.noop, args.calls // 10)
        if plain:
            plain_samples += _samples(plain.noop, args.calls // 10)
    figures["pipe_round_trip_us"] = statistics.median(pipe_samples) * 1e6
    figures["sync_call_us"] = statistics.median(ours_samples) * 1e6
    figures["sync_call_vs_pipe"] = figures["sync_call_us"] / figures["pipe_round_trip_us"]
    if args.address is None:
        _sync_pinned(args.calls, pipe_round_trip, server.pid, actor, figures)
    if plain:
        figures["plain_ray_sync_call_us"] = statistics.median(plain_samples) * 1e6
        figures["sync_call_vs_plain_ray"] = figures["sync_call_us"] / figures["plain_ray_sync_call_us"]

    async_actor = AsyncWorker()
    parl_lite.get([async_actor.noop() for _ in range(500)])
    seconds = _timed(lambda: parl_lite.get([async_actor.noop() for _ in range(5000)]))
    figures["async_calls_per_s"] = 5000 / seconds
    if plain:
        plain.async_noops(500)
        figures["plain_ray_async_calls_per_s"] = 5000 / _timed(lambda: plain.async_noops(5000))
        figures["plain_ray_future_calls_per_s"] = 5000 / _timed(lambda: plain.future_noops(5000))

    if plain:
        actor.echo(array)
        figures["ours_64mb_ms"] = _median_seconds(lambda: actor.echo(array), args.array_repeats) * 1e3
        plain.echo(array)
        figures["plain_ray_64mb_ms"] = _median_seconds(lambda: plain.echo(array), args.array_repeats) * 1e3
    ours.send(None)
    server.join()

    summing = [RemoteWorker() for _ in range(NUM_SUMMING_ACTORS)]
    rounds = {"serial": [], "threads": [], "actors": []}
    for _ in range(args.example_rounds):  # interleaved, medians: one round is at the VM's mercy
        rounds["serial"].append(_timed(lambda: [count_to(SUM_TO) for _ in range(NUM_SUMMING_ACTORS)]))
        rounds["threads"].append(_timed(
            lambda: _run_threads([lambda: count_to(SUM_TO)] * NUM_SUMMING_ACTORS)))
        rounds["actors"].append(_timed(lambda: _run_threads([lambda a=a: a.run(SUM_TO) for a in summing])))
    for name, seconds in rounds.items():
        figures[f"parl_example_{name}_s"] = statistics.median(seconds)
    figures["parl_example_speedup_vs_serial"] = (figures["parl_example_serial_s"]
                                                 / figures["parl_example_actors_s"])
    for handle in [actor, async_actor, *summing]:
        handle.close()

    creation, plain_creation = [], []
    created = []
    for _ in range(8):
        start = time.perf_counter()
        created.append(RemoteWorker())
        creation.append(time.perf_counter() - start)
        if plain:
            start = time.perf_counter()
            created.append(plain.create())
            plain_creation.append(time.perf_counter() - start)
    figures["create_actor_ms_mean"] = statistics.mean(creation) * 1e3
    figures["create_actor_ms_max"] = max(creation) * 1e3
    if plain:
        figures["plain_ray_create_actor_ms_mean"] = statistics.mean(plain_creation) * 1e3
        plain.close()
    else:
        for handle in created:
            handle.close()
        figures.update(_creation_rounds(args.creation_rounds))
    parl_lite.shutdown()

    if args.address is None:
        figures.update(_forked_creations(args.creation_rounds * 2))
        figures.update(_large_array_rounds(args.echo_rounds, args.ray))
        for phase in ("first", "steady"):
            figures[f"64mb_{phase}_speedup_vs_pipe"] = figures["pipe_64mb_ms"] / figures[f"ours_{phase}_64mb_ms"]
            if args.ray:
                figures[f"64mb_{phase}_vs_ray"] = figures[f"ours_{phase}_64mb_ms"] / figures[f"ray_{phase}_64mb_ms"]
    print(json.dumps({name: round(value, 3) for name, value in figures.items()}))


if __name__ == "__main__":
    main()
