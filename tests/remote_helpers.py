"""Waiting for processes and files without sleeping a fixed time, and checking leftovers."""
import glob
import os
import select
import time
from collections.abc import Callable, Iterable
from typing import Any

from parl_lite.remote.shm import session_segments


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Block until process ``pid`` has exited (pidfd readiness: an event, not a poll); True if it did."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([pidfd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(pidfd)


def wait_for_file(path: str, timeout: float) -> bool:
    """Wait until ``path`` exists and is not empty (written by another process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return True
        time.sleep(0.005)
    return False


def true_within(predicate: Callable[[], Any], timeout: float) -> bool:
    """Whether ``predicate()`` becomes true within ``timeout`` seconds (asked every 20 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def processes_with(*texts: str) -> list[int]:
    """Pids whose command line contains every one of ``texts``."""
    pids = [int(path.split("/")[2]) for path in glob.glob("/proc/[0-9]*")]
    return [pid for pid in pids if all(text in _command_line(pid) for text in texts)]


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def assert_nothing_left(pids: Iterable[int], session_prefix: str) -> None:
    """No process of ``pids`` is alive and no shared-memory segment of the session remains."""
    alive = [pid for pid in pids if not wait_for_exit(pid, timeout=5)]
    assert not alive, f"processes still alive after shutdown: {alive}"
    assert session_segments(session_prefix) == []
