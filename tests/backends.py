"""The backends the backend-agnostic remote tests run on (``backend`` fixture in conftest.py).

``BACKENDS`` maps a name to a factory ``(folder) -> context manager`` that starts the backend in
``folder`` (or reuses the one already running there), connects ``parl_lite`` to it, yields the
backend, and on exit shuts the connection down and checks that nothing of it is left.
"""
import contextlib
import glob
from pathlib import Path
from typing import Callable, ContextManager, Dict, Iterator, List

import pytest

import parl_lite
from parl_lite.remote.backend import Backend

from remote_helpers import assert_nothing_left, wait_for_exit

RAY_CPUS = 2


@contextlib.contextmanager
def local_backend(folder: Path) -> Iterator[Backend]:
    """A fresh local pool; afterwards no worker, zygote or segment of it may be left."""
    parl_lite.shutdown()  # a pool another test module left running (pools are reused, like Ray's)
    backend = parl_lite.connect(num_workers=2)
    yield backend
    status = backend.status()
    pids = [worker["pid"] for worker in status["workers"]] + [status["zygote_pid"]]
    parl_lite.shutdown()
    assert_nothing_left(pids, backend.session_prefix)


_ray_processes: List[int] = []  # raylet, GCS server and the rest of the Ray this session started


@contextlib.contextmanager
def ray_backend(folder: Path) -> Iterator[Backend]:
    """``ray://local`` on one Ray started once per session (Ray takes seconds to start); each use
    connects afresh and on exit checks that every actor it created has exited."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'parl_lite[ray]')")
    from parl_lite.ext.ray.backend import start_local_ray

    parl_lite.shutdown()
    if not ray.is_initialized():
        start_local_ray(RAY_CPUS)
        _ray_processes[:] = ray_session_processes()
    backend = parl_lite.connect("ray://local")
    yield backend
    pids = [actor["pid"] for actor in backend.status()["actors"]]
    parl_lite.shutdown()
    alive = [pid for pid in pids if not wait_for_exit(pid, timeout=10)]
    assert alive == [], f"Ray actor processes still alive after shutdown: {alive}"


def ray_session_processes() -> List[int]:
    """The processes of the Ray this process started: those naming its session folder, and their
    descendants (workers rename themselves ``ray::...``)."""
    import ray

    session = ray._private.worker._global_node.get_session_dir_path()
    parents = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            parents[int(stat.split("/")[2])] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    found = {pid for pid in parents if session.encode() in _command_line(pid)}
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return sorted(found)


def _command_line(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read()
    except OSError:
        return b""


def stop_ray() -> None:
    """Stop the Ray the ``ray`` factory started (at the end of the test session) and check that
    none of its processes is left."""
    if not _ray_processes:
        return
    import ray

    ray.shutdown()
    alive = [pid for pid in _ray_processes if not wait_for_exit(pid, timeout=15)]
    _ray_processes.clear()
    assert alive == [], f"Ray processes left after ray.shutdown(): {alive}"


BACKENDS: Dict[str, Callable[[Path], ContextManager[Backend]]] = {
    "local": local_backend,
    "ray": ray_backend,
}
