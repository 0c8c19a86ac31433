"""What the local pool's housekeeping costs a cluster node: how often it publishes its status, and
how it finds an ended worker's segments."""
import linecache
import os
import secrets
import sys
import time

import numpy as np
import pytest

from parl_lite.remote.backend import ActorOptions
from parl_lite.remote.errors import MemoryLimitError
from parl_lite.remote.pool import LocalPool
from parl_lite.remote.shm import SHM_DIR, remove_session_segments, session_segments
from parl_lite.remote.status import read_status

pytestmark = pytest.mark.timeout(60)


class Idle:
    def ping(self) -> int:
        return 1

    def allocate_and_hold(self, megabytes: int) -> None:
        """Allocate ``megabytes`` and keep them until the process is stopped."""
        import threading

        ballast = np.ones(megabytes * 2**20, dtype=np.uint8)
        threading.Event().wait()
        del ballast


class HourlyPool(LocalPool):
    """A pool that keeps no shared memory and publishes its status once an hour."""
    shm_reserve_bytes = 0
    status_period = 3600.0


class NotingPool(LocalPool):
    """A pool that keeps the notes of its workers (pid, value)."""
    shm_reserve_bytes = 0

    def __init__(self) -> None:
        self.notes: list = []
        super().__init__(num_workers=0)

    def on_note(self, worker, value):
        self.notes.append((worker.pid, value))


def test_a_pool_publishes_its_status_at_its_status_period_not_at_each_creation():
    pool = HourlyPool(num_workers=0)
    try:
        worker = pool.create_actor(Idle, (), {}, ActorOptions())
        assert worker.call_sync("ping", (), {}) == 1
        # the status of the pool's start, not yet the actor's: the next publication is an hour away
        assert read_status(os.getpid())["workers"] == []
    finally:
        pool.shutdown()


def test_session_segments_are_the_names_under_the_prefix_taken_literally():
    prefix = f"parl_lite_test_{secrets.token_hex(4)}_[w]*?_"
    ours = [prefix + "a", prefix + "b"]
    others = [prefix[:-3] + "x_c", prefix.replace("[w]*?_", "wxy_") + "e"]  # what the prefix would match as a pattern
    for name in ours + others:
        with open(os.path.join(SHM_DIR, name), "w"):
            pass
    try:
        assert sorted(session_segments(prefix)) == ours
        remove_session_segments(prefix)
        assert session_segments(prefix) == []
        assert all(os.path.exists(os.path.join(SHM_DIR, name)) for name in others)
    finally:
        for name in ours + others:
            try:
                os.unlink(os.path.join(SHM_DIR, name))
            except FileNotFoundError:
                pass


def _waiting_for_chores(pool: LocalPool) -> bool:
    """Whether the pool's housekeeping thread is blocked waiting for its next chore (or timeout), none queued."""
    frame = sys._current_frames().get(pool._housekeeper.ident)
    return (pool._chores.empty() and frame is not None and frame.f_code.co_name == "_housekeep"
            and "self._chores.get(" in linecache.getline(frame.f_code.co_filename, frame.f_lineno))


@pytest.mark.timeout(20)
def test_a_memory_limit_set_after_creation_is_checked_at_once_not_a_status_period_later():
    """A cluster node sets the limit on an actor host it built ahead (``limit_memory``); the housekeeper,
    asleep for its status period (an hour here), must start checking the memory at once. (It did not:
    on a node an actor was unchecked for up to 2 s, and a call over its limit could end unharmed.)"""
    pool = HourlyPool(num_workers=1, max_idle_workers=1)
    try:
        worker = pool.create_actor(Idle, (), {}, ActorOptions())
        # the creation woke the housekeeper to refill the idle worker it took; once that is back and the
        # housekeeper waits again, it sleeps for its status period, as on a node long after its spares were built
        deadline = time.monotonic() + 30
        while not ([entry for entry in pool.status()["workers"] if entry["pid"] != worker.pid]
                   and _waiting_for_chores(pool)):
            assert time.monotonic() < deadline, "the pool did not refill its idle worker"
            time.sleep(0.01)
        pool.limit_memory(worker, 100)
        with pytest.raises(MemoryLimitError, match="max_memory of 100"):
            worker.call_sync("allocate_and_hold", (300,), {})
    finally:
        pool.shutdown()


class Noter:
    def note(self, value: object) -> str:
        from parl_lite.remote.worker import send_note

        send_note(value)
        return "sent"


def test_a_workers_notes_reach_the_pools_on_note_before_the_reply_that_follows_them():
    """What a cluster node's actor hosts send their figures with; the base pool's ``on_note`` drops them."""
    pool = NotingPool()
    notes = pool.notes
    dropping = LocalPool(num_workers=0)
    try:
        worker = pool.create_actor(Noter, (), {}, ActorOptions())
        for count in (1, 2):
            assert worker.call_sync("note", ({"calls": count},), {}) == "sent"
            assert notes[-1] == (worker.pid, {"calls": count})  # handled before the reply was
        assert dropping.create_actor(Noter, (), {}, ActorOptions()).call_sync("note", ("x",), {}) == "sent"
    finally:
        pool.shutdown()
        dropping.shutdown()


def test_a_note_outside_a_pool_worker_is_a_runtime_error():
    from parl_lite.remote.worker import send_note

    with pytest.raises(RuntimeError, match="not a parl_lite pool worker"):
        send_note("x")
