"""Short-lived daemon threads that reuse idle ones.

A connection's reader, a node's handler for one client connection: each runs in a daemon thread of
its own, and creating a thread costs about 0.1 ms of CPU (benchmarks/2026-11-26-cluster-placement-cost.md),
a noticeable part of placing an actor. :func:`start_daemon` hands the work to a thread that finished
its previous work within the last :data:`IDLE_SECONDS` seconds, and starts a new thread only when
none is idle. A thread idle for longer exits, so a quiet process keeps no spare threads.

The work runs with the thread renamed to the name it was given; an exception it raises goes to
:func:`threading.excepthook`, as it would in a thread of its own.
"""
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["IDLE_SECONDS", "start_daemon"]

IDLE_SECONDS = 10.0

_Work = tuple[Callable[..., Any], tuple[Any, ...], str]

_lock = threading.Lock()
_work: "queue.SimpleQueue[_Work]" = queue.SimpleQueue()
_idle = 0  # threads waiting on _work that no queued work has been promised to


def start_daemon(target: Callable[..., Any], args: tuple[Any, ...] = (), name: str = "parl_lite-thread") -> None:
    """Run ``target(*args)`` in a daemon thread (an idle one if there is one) named ``name``.

    Raises:
        RuntimeError: no thread is idle and none can be started (as :meth:`threading.Thread.start`).
    """
    global _idle
    with _lock:
        if _idle:
            _idle -= 1
            _work.put((target, args, name))
            return
    threading.Thread(target=_serve, args=((target, args, name),), name=name, daemon=True).start()


def _serve(work: _Work) -> None:
    global _idle
    while True:
        target, args, name = work
        threading.current_thread().name = name
        try:
            target(*args)
        except BaseException as error:  # reported as a thread's own uncaught exception would be
            threading.excepthook(threading.ExceptHookArgs((type(error), error, error.__traceback__,
                                                            threading.current_thread())))
        del target, args, work  # nothing of the finished work is kept alive while idle
        with _lock:
            _idle += 1
        try:
            work = _work.get(timeout=IDLE_SECONDS)
        except queue.Empty:
            with _lock:
                try:
                    work = _work.get_nowait()  # promised to an idle thread while this one timed out
                except queue.Empty:
                    _idle -= 1
                    return


def _forget_threads_after_fork() -> None:
    """A forked child has only the thread that forked: the parent's idle threads are not its own."""
    global _lock, _work, _idle
    _lock, _work, _idle = threading.Lock(), queue.SimpleQueue(), 0


os.register_at_fork(after_in_child=_forget_threads_after_fork)
