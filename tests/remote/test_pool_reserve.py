"""The local pool's idle workers: the reserve that grows after a burst of creations and shrinks back,
and the reserve of shared memory a worker forked for a waiting actor maps too."""
import time
from collections.abc import Callable

import numpy as np
import pytest

import parl_lite
from parl_lite import remote_class
from parl_lite.remote.backend import ActorOptions
from parl_lite.remote.pool import LocalPool

from remote_actors import Counter
from remote_helpers import assert_nothing_left, wait_for_exit

pytestmark = pytest.mark.timeout(90)

RemoteCounter = remote_class(Counter)


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    """Poll ``condition`` (the pool's state, which changes in its housekeeping thread) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the pool did not reach the expected state in time"
        time.sleep(0.01)


def idle_pids(pool: LocalPool) -> set[int]:
    return {worker["pid"] for worker in pool.status()["workers"] if worker["state"] == "idle"}


@pytest.fixture
def connect():
    """``parl_lite.connect`` with the given options; shuts the pool down and checks nothing is left
    of every process it was seen to have."""
    parl_lite.shutdown()
    pools: list[LocalPool] = []
    seen: set[int] = set()

    def start(**options) -> LocalPool:
        pool = parl_lite.connect(**options)
        pools.append(pool)
        return pool

    def remember() -> None:
        for pool in pools:
            status = pool.status()
            seen.update(worker["pid"] for worker in status["workers"])
            seen.add(status["zygote_pid"])

    start.remember = remember
    yield start
    remember()
    parl_lite.shutdown()
    for pool in pools:
        assert_nothing_left(seen, pool.session_prefix)


def test_the_idle_reserve_grows_after_a_burst_up_to_its_bound_then_shrinks_back(connect):
    pool = connect(num_workers=1, max_idle_workers=3, reserve_window=600)
    wait_until(lambda: len(idle_pids(pool)) == 1)
    assert pool.status()["idle_target"] == 1
    actors = [RemoteCounter() for _ in range(5)]  # a burst beyond the bound
    assert pool.status()["idle_target"] == 3
    wait_until(lambda: len(idle_pids(pool)) == 3)
    connect.remember()
    for actor in actors:
        actor.close()
    grown = idle_pids(pool)
    assert len(grown) == 3

    pool.reserve_window = 0.0  # the burst is now older than the window
    wait_until(lambda: len(idle_pids(pool)) == 1)
    assert pool.status()["idle_target"] == 1
    kept = idle_pids(pool)
    assert kept < grown  # the oldest idle worker stays; the others were stopped
    for pid in grown - kept:
        assert wait_for_exit(pid, timeout=10), f"surplus idle worker {pid} still runs"
    assert RemoteCounter(5).add(1) == 6  # the kept worker serves


def test_a_fixed_reserve_does_not_grow(connect):
    pool = connect(num_workers=1, max_idle_workers=1)
    actors = [RemoteCounter() for _ in range(3)]
    assert pool.status()["idle_target"] == 1
    wait_until(lambda: len(idle_pids(pool)) == 1)
    connect.remember()
    assert [actor.add(1) for actor in actors] == [1, 1, 1]


def test_an_actor_that_fails_to_start_counts_and_leaves_the_reserve_working(connect):
    pool = connect(num_workers=1, max_idle_workers=2, reserve_window=600)
    for _ in range(2):
        with pytest.raises(TypeError):
            RemoteCounter(1, 2, 3)  # too many arguments for __init__
    assert pool.status()["idle_target"] == 2
    wait_until(lambda: len(idle_pids(pool)) == 2)
    connect.remember()
    assert [RemoteCounter(1).add(1) for _ in range(3)] == [2, 2, 2]


def test_a_worker_forked_for_a_waiting_actor_maps_the_shared_memory_reserve(connect):
    pool = connect(num_workers=0)  # every actor waits for a fork
    reserve = pool.segments.free_names()
    assert reserve
    actor = RemoteCounter()
    pid = actor.pid()
    connect.remember()

    def mapped() -> bool:
        with open(f"/proc/{pid}/maps") as maps:
            text = maps.read()
        return all(name in text for name in reserve)

    wait_until(mapped)


def test_a_pool_told_its_messages_are_small_still_carries_a_large_array_both_ways():
    # its workers do not warm up the shared-memory path (a cluster node's pool); the path still works
    pool = type("SmallMessagesPool", (LocalPool,), {"large_messages": False})(num_workers=1)
    try:
        worker = pool.create_actor(Counter, (), {}, ActorOptions())
        array = np.arange(4 * 2**20, dtype=np.float64)  # 32 MB, far over the inline limit
        echoed = worker.call_sync("echo", (array,), {})
        assert np.array_equal(echoed, array)
        seen = {worker.pid, pool.status()["zygote_pid"]}
    finally:
        pool.shutdown()
    assert_nothing_left(seen, pool.session_prefix)


@pytest.mark.parametrize("options, named", [
    ({"num_workers": 2, "max_idle_workers": 1}, "max_idle_workers"),
    ({"num_workers": 1, "max_idle_workers": 2.5}, "max_idle_workers"),
    ({"num_workers": 1, "reserve_window": -1}, "reserve_window"),
    ({"num_workers": 1, "reserve_window": "30"}, "reserve_window"),
])
def test_bad_reserve_settings_are_refused_by_name(options, named):
    with pytest.raises(ValueError, match=named):
        LocalPool(**options)
