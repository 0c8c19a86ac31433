"""The zygote: a small clean process that forks worker processes on request.

It is started once per pool (``python -m parl_lite.remote.zygote FD PREFIX STATUS``) and imports only numpy,
cloudpickle and the worker loop (and the modules ``$PARL_LITE_PRELOAD`` names, comma-separated: a
cluster node's actor host), with the thread counts of OpenMP/MKL/OpenBLAS set by the pool. A
fork of it costs a few milliseconds, against a few hundred for a new interpreter, and it has no
threads, so forking it is safe (forking the caller, which has threads and maybe paddle, is not).

Requests arrive on the control socket as one byte with the worker's socket attached (SCM_RIGHTS):
``W`` for a worker of the warm pool (it takes the large-message path once before it waits for its
actor), ``A`` for a worker an actor waits for now (it serves at once, and takes that path once it
is first idle); the reply is the new worker's pid. Each worker leads a process group of its own, so whatever an actor
starts ends with it. When the control socket closes (the pool shut down or its process died, even by
``kill -9`` of its whole process group: the zygote runs in a session of its own), the zygote kills
the process groups of its workers, sweeps the session's shared-memory segments and the pool's status
file, and exits.
"""
import ctypes
import gc
import importlib
import json
import os
import signal
import socket
import struct
import sys
from typing import Any

_PR_SET_PDEATHSIG = 1
PID_FORMAT = "!i"
PRELOAD_VARIABLE = "PARL_LITE_PRELOAD"
WARM_WORKER = b"W"
ACTOR_WORKER = b"A"
LARGE_MESSAGES, SMALL_MESSAGES = "large", "small"  # what the workers warm up: both paths, or the class path


def _reap(children: set[int]) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)


def _become_worker(control: socket.socket, fd: int, segment_prefix: str, prctl: Any, warm_up_first: bool,
                   large_messages: bool) -> None:
    control.close()
    os.setpgid(0, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # die with the zygote even if it is SIGKILLed (the zygote itself has only one thread)
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    from parl_lite.remote.worker import run_forked_worker

    run_forked_worker(fd, segment_prefix, warm_up_first, large_messages)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    segment_prefix = sys.argv[2]
    status_path = sys.argv[3]
    large_messages = sys.argv[4] == LARGE_MESSAGES
    owner = os.getppid()
    sys.path[:] = json.loads(os.environ.pop("PARL_LITE_SYS_PATH", "[]")) or sys.path
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the caller, who shuts us down
    children: set[int] = set()
    signal.signal(signal.SIGCHLD, lambda *_: _reap(children))
    prctl = _prepare_for_forks()
    control.sendall(struct.pack(PID_FORMAT, os.getpid()))  # ready
    try:
        _fork_on_request(control, children, segment_prefix, prctl, large_messages)
    finally:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _kill_children(children)
        _sweep(segment_prefix, status_path, owner)


def _prepare_for_forks() -> Any:
    """Import what every worker needs once, before forking; returns ``prctl``, looked up once (each
    worker calls it first thing)."""
    import numpy  # noqa: F401
    import cloudpickle  # noqa: F401
    import parl_lite.remote.worker  # noqa: F401

    for module in filter(None, os.environ.pop(PRELOAD_VARIABLE, "").split(",")):
        importlib.import_module(module)
    prctl = ctypes.CDLL(None).prctl
    parl_lite.remote.worker.rebuild_a_class()
    # what is here now lives as long as the workers: their collections need not visit it, and
    # visiting it would copy the pages it lies in into each worker
    gc.freeze()
    return prctl


def _fork_on_request(control: socket.socket, children: set[int], segment_prefix: str, prctl: Any,
                     large_messages: bool) -> None:
    """Fork a worker for each request on ``control`` (its socket comes with it) until it closes."""
    while True:
        try:
            request, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            return
        if request not in (WARM_WORKER, ACTOR_WORKER) or not fds:
            return
        pid = os.fork()
        if pid == 0:
            _become_worker(control, fds[0], segment_prefix, prctl, request == WARM_WORKER, large_messages)
        os.close(fds[0])
        try:
            os.setpgid(pid, pid)  # also done by the child: whichever runs first
        except OSError:
            pass  # the child already did it, or already exited
        children.add(pid)
        control.sendall(struct.pack(PID_FORMAT, pid))


def _kill_children(children: set[int]) -> None:
    for pid in list(children):
        for kill in (os.killpg, os.kill):  # the group, with what the actor started
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for pid in list(children):
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def _sweep(segment_prefix: str, status_path: str, owner: int) -> None:
    """Remove the session's shared memory and status file."""
    from parl_lite.remote.shm import PROCESS_SEGMENT, remove_session_segments
    from parl_lite.remote.status import process_start_time

    remove_session_segments(segment_prefix)
    # the pool's process died: sweep what else it owned (a noise table), unless its pid already names
    # another process, whose segments those names now are (they are swept once that pid is free)
    if os.getppid() != owner and process_start_time(owner) is None:
        remove_session_segments(PROCESS_SEGMENT.format(pid=owner))
    try:
        os.unlink(status_path)
    except OSError:
        pass


if __name__ == "__main__":
    main()
