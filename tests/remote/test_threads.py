"""Daemon threads that reuse idle ones (parl_lite.remote.threads)."""
import os
import signal
import threading
import traceback
from collections.abc import Callable

import pytest

from parl_lite.remote import threads
from parl_lite.remote.threads import start_daemon

pytestmark = pytest.mark.timeout(60)


def _run_and_wait(target=None, name: str = "parl_lite-test") -> threading.Thread:
    """Run ``target`` with start_daemon and return the thread it ran in, once it has finished."""
    finished = threading.Event()
    ran_in: list[threading.Thread] = []

    def work() -> None:
        ran_in.append(threading.current_thread())
        if target is not None:
            target()
        finished.set()

    start_daemon(work, name=name)
    assert finished.wait(10)
    return ran_in[0]


def _idle_threads_at_least(count: int) -> bool:
    """Whether, within 10 s, at least ``count`` threads have finished their work and wait for more."""
    for _ in range(1000):
        with threads._lock:
            if threads._idle >= count:
                return True
        threading.Event().wait(0.01)
    return False


def _in_a_forked_child(body: Callable[[], None]) -> None:
    """Run ``body`` in a forked child, whose pool starts with no thread; fail here with its traceback.

    Threads left idle by earlier tests are shared, and any of them may take a work: a test about
    which thread runs a work needs a process where only its own threads exist.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        signal.alarm(30)  # the default action ends a child that hangs
        code = 1
        try:
            body()
            code = 0
        except BaseException:
            os.write(write_end, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        report = reader.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report


def test_a_finished_thread_runs_the_next_work_under_the_new_name():
    def body() -> None:
        first = _run_and_wait(name="parl_lite-first")
        assert _idle_threads_at_least(1)
        second = _run_and_wait(name="parl_lite-second")
        assert second is first
        assert second.name == "parl_lite-second" and second.daemon

    _in_a_forked_child(body)


def test_work_goes_to_an_idle_thread_when_several_are_idle():
    release = threading.Event()
    both_started = threading.Barrier(3)

    def blocking() -> None:
        both_started.wait(10)
        release.wait(10)

    def body() -> None:
        start_daemon(blocking)
        start_daemon(blocking)
        both_started.wait(10)
        release.set()
        assert _idle_threads_at_least(2)
        idle = set(threading.enumerate()) - {threading.current_thread()}
        assert len(idle) == 2
        assert _run_and_wait(name="parl_lite-reused") in idle

    _in_a_forked_child(body)


def test_work_started_while_every_thread_is_busy_gets_a_new_thread():
    release = threading.Event()
    started = threading.Event()
    seen: list[threading.Thread] = []

    def blocking() -> None:
        seen.append(threading.current_thread())
        started.set()
        release.wait(10)

    start_daemon(blocking)
    assert started.wait(10)
    try:
        other = _run_and_wait()
        assert other is not seen[0]
    finally:
        release.set()


def test_many_starters_at_once_run_every_work_exactly_once():
    counts = [0] * 400
    lock = threading.Lock()
    all_done = threading.Semaphore(0)

    def work(index: int) -> None:
        with lock:
            counts[index] += 1
        all_done.release()

    def starter(first: int) -> None:
        for index in range(first, len(counts), 8):
            start_daemon(work, (index,))

    starters = [threading.Thread(target=starter, args=(first,)) for first in range(8)]
    for thread in starters:
        thread.start()
    for thread in starters:
        thread.join(10)
    for _ in counts:
        assert all_done.acquire(timeout=10)
    assert counts == [1] * len(counts)


def test_an_exception_goes_to_threading_excepthook_and_the_thread_serves_on(monkeypatch):
    reported: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", reported.append)

    def failing() -> None:
        raise ValueError("from the work")

    def body() -> None:
        start_daemon(failing, name="parl_lite-failing")
        assert _idle_threads_at_least(1)
        after = _run_and_wait()
        assert len(reported) == 1
        assert reported[0].exc_type is ValueError and str(reported[0].exc_value) == "from the work"
        assert reported[0].thread is after  # the same thread went on to the next work

    _in_a_forked_child(body)


def test_a_thread_idle_for_longer_than_the_limit_exits(monkeypatch):
    monkeypatch.setattr(threads, "IDLE_SECONDS", 0.05)
    thread = _run_and_wait()
    thread.join(10)
    assert not thread.is_alive()


def test_a_forked_child_starts_threads_of_its_own():
    # the parent has an idle thread; the child has only the thread that forked, and work it starts
    # must not wait for the parent's idle thread (which does not exist in the child)
    _run_and_wait()
    assert _idle_threads_at_least(1)

    def body() -> None:
        ran = threading.Event()
        start_daemon(ran.set)
        assert ran.wait(5)

    _in_a_forked_child(body)
