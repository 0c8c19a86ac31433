"""The fixtures the tests of several packages use (the backends, clusters started through ``parl-lite``),
the session-wide checks that nothing of ours is left, the quick subset and the order of the tests.
The fixtures of one package's tests are in that folder's ``conftest.py``."""
import glob
import os
import signal

import pytest
from remote_helpers import processes_with

# A shell starts a background job (``pytest &``) with SIGINT ignored, and the processes the tests
# start inherit that: their Ctrl-C tests would see the signal ignored. A handler of ours is reset to
# the default in each child at exec, so the children see Ctrl-C as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The quick subset, ``python -m pytest -m quick`` (1-2 minutes, 60 CPU-seconds; the whole suite 8-9 minutes):
# these modules of the core (Model, Algorithm, Agent, checkpoints, PARL's API, the remote actors on the
# local pool, evokit_py's config, solvers, policies and noise, the command line and ONNX export), and
# the tests marked ``quick`` in their module (es-train end to end).
QUICK_MODULES = frozenset({
    "test_model", "test_agent", "test_parl_api", "test_checkpoint", "test_policy_gradient", "test_rl_utils",
    "test_replay_memory", "test_remote", "test_es_config", "test_es_solvers", "test_es_policy", "test_es_noise",
    "test_cli", "test_cli_export",
})


def pytest_collection_modifyitems(items: list) -> None:
    """Tests marked ``before_ray`` run first: the session's Ray, once started by a test that uses
    the ``ray`` backend, runs until the session ends, and a test that needs no Ray on the machine
    would otherwise be skipped in a whole run. The tests of :data:`QUICK_MODULES` are marked
    ``quick``, on the local pool only where a test runs on each backend."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend", "local") if callspec is not None else "local"
        if item.module.__name__ in QUICK_MODULES and backend == "local":
            item.add_marker(pytest.mark.quick)
    items.sort(key=lambda item: item.get_closest_marker("before_ray") is None)  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def nothing_of_ours_is_left_behind():
    """After the whole session: no pool of this process is running, no zygote or worker of it is
    alive, and no shared-memory segment of it remains in /dev/shm."""
    yield
    import parl_lite

    parl_lite.shutdown()
    prefix = f"parl_lite_{os.getpid()}_"
    leftovers = glob.glob(f"/dev/shm/{prefix}*") + glob.glob(f"/dev/shm/parl_lite_status_{os.getpid()}_*")
    assert leftovers == [], f"shared memory left behind: {leftovers}"
    from parl_lite.remote.actor_log import runtime_folder

    runtime = runtime_folder()
    assert runtime is None or not os.path.exists(os.path.join(runtime, f"pool-{os.getpid()}")), \
        "the pool's actor-log folder was left behind"
    stray = processes_with("parl_lite.remote.zygote", prefix)  # workers are forks: same line
    assert stray == [], f"zygote or worker processes left behind: {stray}"


@pytest.fixture(params=sorted(__import__("backends").BACKENDS))
def backend(request, tmp_path_factory):
    """Each backend of ``tests/backends.py`` in turn (a backend that cannot run here is skipped):
    connected, and checked for leftovers afterwards."""
    from backends import BACKENDS

    folder = tmp_path_factory.getbasetemp() / f"backend-{request.param}"
    with BACKENDS[request.param](folder) as connected:
        yield connected


@pytest.fixture
def cluster(tmp_path):
    """A master with a node of 2 CPUs (``parl-lite start``) and a second node of 2 CPUs
    (``parl-lite connect``, folder ``node-b``); afterwards ``parl-lite stop`` must leave nothing behind."""
    import parl_lite
    from backends import Cluster

    parl_lite.shutdown()
    started = Cluster(tmp_path)
    try:
        started.start(cpus=2)
        started.add_node("node-b", cpus=2)
        yield started
    finally:
        parl_lite.shutdown()
        started.stop()


@pytest.fixture
def small_cluster(tmp_path):
    """A master with one node of 1 CPU; the test adds more."""
    import parl_lite
    from backends import Cluster

    parl_lite.shutdown()
    started = Cluster(tmp_path)
    try:
        started.start(cpus=1)
        yield started
    finally:
        parl_lite.shutdown()
        started.stop()


@pytest.fixture(scope="session", autouse=True)
def clusters_are_stopped():
    """The clusters the ``backend`` fixture started are stopped (and checked) at the end."""
    yield
    from backends import stop_clusters

    stop_clusters()


@pytest.fixture(scope="session", autouse=True)
def ray_is_stopped():
    """The Ray the ``backend`` fixture started is stopped (and checked) at the end."""
    yield
    from backends import stop_ray

    stop_ray()
