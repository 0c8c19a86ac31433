"""The backends the backend-agnostic remote tests run on (``backend`` fixture in conftest.py).

``BACKENDS`` maps a name to a factory ``(folder) -> context manager`` that starts the backend in
``folder`` (or reuses the one already running there), connects ``parl_lite`` to it, yields the
backend, and on exit shuts the connection down and checks that nothing of it is left.
"""
import contextlib
import glob
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, ContextManager, Dict, Iterator, List, Optional

import pytest

import parl_lite
from parl_lite.remote.backend import Backend

from remote_helpers import assert_nothing_left, wait_for_exit

ACTORS_MODULE = str(Path(__file__).with_name("remote_actors.py"))
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


class Cluster:
    """A master and nodes on this machine, each started through the ``parl-lite`` CLI in its own
    working folder, with its own ``PARL_LITE_HOME`` (token and state file) under ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.home = folder / "home"
        self.env = {key: value for key, value in os.environ.items() if key != "PARL_LITE_TOKEN"}
        self.env["PARL_LITE_HOME"] = str(self.home)
        self.env["PARL_LITE_EXIT_WITH"] = str(os.getpid())  # a killed test run leaves no cluster
        self.address = ""
        self.nofile: Optional[int] = None  # ulimit -n of what start/connect start (None: ours)

    @property
    def token_file(self) -> str:
        return str(self.home / "token")

    def cli(self, *arguments: str, cwd: Optional[Path] = None, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``parl-lite ARGUMENTS`` as a user would."""
        limit = self.nofile
        result = subprocess.run([sys.executable, "-m", "parl_lite.cli", *arguments], env=self.env,
                                cwd=cwd or self.folder, capture_output=True, text=True, timeout=90,
                                preexec_fn=None if limit is None else
                                lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
        if check and result.returncode != 0:
            raise AssertionError(f"parl-lite {' '.join(arguments)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def start(self, cpus: int, *extra: str) -> str:
        """``parl-lite start --port 0 EXTRA`` in folder ``master``; returns the master's address."""
        (self.folder / "master").mkdir(parents=True)
        self.cli("start", "--port", "0", "--cpus", str(cpus), *extra, cwd=self.folder / "master")
        self.address = next(entry["address"] for entry in self.processes() if entry["role"] == "master")
        return self.address

    def add_node(self, name: str, cpus: int, *extra: str) -> Dict:
        """``parl-lite connect`` in folder ``name``; returns the node's state-file entry."""
        (self.folder / name).mkdir(parents=True)
        self.cli("connect", "--address", self.address, "--cpus", str(cpus), *extra, cwd=self.folder / name)
        return self.processes()[-1]

    def processes(self) -> List[Dict]:
        state = self.home / "cluster.json"
        return json.loads(state.read_text())["processes"] if state.exists() else []

    def node_pids(self) -> List[int]:
        return [entry["pid"] for entry in self.processes() if entry["role"] == "node"]

    def status(self) -> Dict:
        """The master's status dict."""
        from parl_lite.ext.cluster.commands import cluster_status

        return cluster_status(self.address, self.token_file)

    def stop(self) -> None:
        """``parl-lite stop``, then check no process, segment or node folder of ours is left."""
        entries = self.processes()
        node_pids = self.node_pids()
        self.cli("stop")
        assert_cluster_gone(self.folder, entries, node_pids)


def connect_client(cluster: Cluster, **options) -> Backend:
    """``parl_lite.connect`` to ``cluster`` with its token, shipping the test actors' module."""
    return parl_lite.connect(cluster.address, token_file=cluster.token_file,
                             distributed_files=[ACTORS_MODULE], **options)


def assert_cluster_gone(folder: Path, entries: List[Dict], node_pids: List[int]) -> None:
    """No recorded process, no worker or zygote of a node, no segment and no node folder is left."""
    alive = [entry["pid"] for entry in entries if not wait_for_exit(entry["pid"], timeout=15)]
    assert alive == [], f"cluster processes still alive: {alive}"
    for pid in node_pids:
        assert glob.glob(f"/dev/shm/parl_lite_{pid}_*") == []
        assert glob.glob(f"/dev/shm/parl_lite_status_{pid}_*") == []
        stray = [path for path in glob.glob("/proc/[0-9]*/cmdline") if _reads(path, f"parl_lite_{pid}_")]
        assert stray == [], f"zygote or workers of node {pid} left: {stray}"
    assert glob.glob(str(folder / "*" / ".parl_lite_node_*")) == []


def _reads(path: str, text: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return text.encode() in handle.read()
    except OSError:
        return False


_clusters: Dict[Path, Cluster] = {}


@contextlib.contextmanager
def cluster_backend(folder: Path) -> Iterator[Backend]:
    """A master and two nodes (4 CPUs each) started once per folder; each use connects afresh and
    on exit checks that the client's actors were all closed and its work folders removed."""
    cluster = _clusters.get(folder)
    if cluster is None:
        cluster = Cluster(folder)
        cluster.start(cpus=4)
        cluster.add_node("node-b", cpus=4)
        _clusters[folder] = cluster
    parl_lite.shutdown()
    backend = parl_lite.connect(cluster.address, token_file=cluster.token_file, distributed_files=[ACTORS_MODULE])
    yield backend
    client_id = backend.client_id
    parl_lite.shutdown()
    deadline = time.monotonic() + 5
    while True:
        status = cluster.status()
        mine = [a for a in status["actors"] if a["client"] == client_id and a["state"] in ("starting", "alive")]
        work = glob.glob(str(folder / "*" / ".parl_lite_node_*" / f"client-{client_id}*"))
        if not mine and not work:
            break
        assert time.monotonic() < deadline, f"actors {mine} or work folders {work} left after shutdown"
        time.sleep(0.05)


def stop_clusters() -> None:
    """Stop every cluster the factory started (at the end of the test session)."""
    while _clusters:
        _, cluster = _clusters.popitem()
        cluster.stop()


_ray_processes: List[int] = []  # raylet, GCS server and the rest of the Ray this session started
_ray_folder: List[str] = []  # and its session folder


@contextlib.contextmanager
def ray_backend(folder: Path) -> Iterator[Backend]:
    """``ray://local`` on one Ray started once per session (Ray takes seconds to start); each use
    connects afresh and on exit checks that every actor it created has exited."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[ray]')")
    from parl_lite.ext.ray.backend import start_local_ray

    parl_lite.shutdown()
    if not ray.is_initialized():
        _ray_folder[:] = [start_local_ray(RAY_CPUS)]
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
    from parl_lite.ext.ray.backend import stop_local_ray

    stop_local_ray(_ray_folder.pop())
    alive = [pid for pid in _ray_processes if not wait_for_exit(pid, timeout=15)]
    _ray_processes.clear()
    assert alive == [], f"Ray processes left after ray.shutdown(): {alive}"


BACKENDS: Dict[str, Callable[[Path], ContextManager[Backend]]] = {
    "local": local_backend,
    "cluster": cluster_backend,
    "ray": ray_backend,
}
