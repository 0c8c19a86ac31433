"""The Ray backend's own parts: starting and stopping ``ray://local``, futures without a thread per
call, the message without Ray, and es-train on Ray giving the local pool's results. The calls,
futures, exceptions, memory limit and output tests run on Ray through the ``backend`` fixture
(tests/remote/test_remote.py)."""
import csv
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import parl_lite
from parl_lite.remote import api

from backends import ray_backend
from remote_actors import Counter
from remote_helpers import wait_for_exit
from locations import CHILD_ENV

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[ray]')")

pytestmark = pytest.mark.timeout(240)



@pytest.fixture
def on_ray(tmp_path):
    with ray_backend(tmp_path) as backend:
        yield backend


def test_ray_local_starts_ray_and_shutdown_leaves_no_ray_process(tmp_path):
    code = """
import parl_lite, ray
from remote_actors import Counter
backend = parl_lite.connect("ray://local", num_workers=2)
actor = parl_lite.remote_class(Counter)(1)
assert actor.add(1) == 2
print(ray._private.worker._global_node.get_session_dir_path(), actor.pid(), flush=True)
parl_lite.shutdown()
assert not ray.is_initialized()
"""
    out = subprocess.run([sys.executable, "-c", code], env=CHILD_ENV, cwd=tmp_path, capture_output=True, text=True,
                         timeout=200)
    assert out.returncode == 0, out.stderr
    session, actor_pid = out.stdout.split()
    assert wait_for_exit(int(actor_pid), timeout=10)
    left = [path for path in Path("/proc").glob("[0-9]*/cmdline") if _reads(path, session)]
    assert left == [], f"Ray processes of session {session} left: {left}"
    assert not os.path.lexists(session)  # nor its folder (Ray leaves /tmp/ray/session_* behind)
    assert not os.path.lexists(os.path.dirname(session))  # the folder Ray was told to use


def _reads(path: Path, text: str) -> bool:
    try:
        return text.encode() in path.read_bytes()
    except OSError:
        return False


@pytest.mark.before_ray
def test_ray_auto_without_a_cluster_names_the_address(tmp_path):
    # "auto" joins any Ray running on this machine (it looks for a GCS server process): the marker
    # runs this test before any test starts the session's Ray
    if any(_reads(path, "gcs_server") for path in Path("/proc").glob("[0-9]*/cmdline")):
        pytest.skip("a Ray cluster runs on this machine: ray://auto would join it")
    code = "import parl_lite\ntry:\n    parl_lite.connect('ray://auto')\nexcept ConnectionError as error:\n    print(error)\n"
    env = {key: value for key, value in CHILD_ENV.items() if key != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "parl_lite.connect('ray://auto'): no Ray cluster answers there" in out.stdout


def test_futures_are_completed_without_a_thread_per_call(on_ray, tmp_path):
    actor = parl_lite.remote_class(Counter, wait=False)()
    marker = tmp_path / "started"
    blocked = actor.rendezvous(str(marker), str(tmp_path / "release"), 30.0)  # holds the actor
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:  # the actor is inside the call
        time.sleep(0.01)
    threads_before = threading.active_count()
    pending = [actor.add(1) for _ in range(300)]
    assert threading.active_count() - threads_before < 5  # not one waiting thread per call
    assert not any(future.done() for future in pending)
    (tmp_path / "release").touch()
    assert blocked.result(timeout=30) is True
    assert parl_lite.get(pending, timeout=30) == list(range(1, 301))


def test_arrays_come_back_writable_and_owned_by_the_caller(on_ray):
    actor = parl_lite.remote_class(Counter)()
    big = np.arange(2**20, dtype=np.float64)  # 8 MB: through Ray's object store, read-only there
    echoed = actor.echo([big, {"again": big}])
    assert echoed[0].flags.writeable and echoed[1]["again"].flags.writeable
    echoed[0][0] = -1.0
    assert actor.echo(big)[0] == 0.0


def test_constructor_output_and_status(on_ray, capsys):
    actor = parl_lite.remote_class(Counter)()
    actor.shout("first")
    status = on_ray.status()
    assert status["kind"] == "ray" and status["address"] == "ray://local"
    assert [(entry["class"], entry["pid"], entry["state"]) for entry in status["actors"]] == \
        [("Counter", actor.pid(), "alive")]
    assert f"(Counter pid={actor.pid()}) first\n" in capsys.readouterr().out
    actor.close()
    assert on_ray.status()["actors"][0]["state"] == "closed"


class NamesLikeTheHost:
    """Methods named like the host's own (not forwarded by name) and one ``__getattr__`` makes."""

    def _run(self, value):
        return ("own _run", value)

    def parl_lite_ready(self):
        return "own parl_lite_ready"

    def __getattr__(self, name):
        if name == "made":
            return lambda: "made by __getattr__"
        raise AttributeError(name)


def test_methods_named_like_the_hosts_own_still_reach_the_actor(on_ray):
    actor = parl_lite.remote_class(NamesLikeTheHost)()
    assert actor._run(3) == ("own _run", 3)
    assert actor.parl_lite_ready() == "own parl_lite_ready"
    channel = actor._channel
    assert channel.call_sync("made", (), {}) == "made by __getattr__"  # the generic path


def test_without_ray_connect_says_what_to_install():
    # in a process of its own: blocking the import here would break the session's running Ray
    program = ("import sys; sys.modules['ray'] = None  # import ray fails as if it were not installed\n"
               "import parl_lite\n"
               "from parl_lite.remote import api\n"
               "try:\n"
               "    parl_lite.connect('ray://local')\n"
               "except ImportError as error:\n"
               "    print(error)\n"
               "assert api._backend is None\n")
    result = subprocess.run([sys.executable, "-c", program], env=CHILD_ENV, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pip install 'ray[client]>=2.45' (or pip install '.[ray]' in the parl_lite clone)" in result.stdout


def test_bad_ray_addresses_and_options_are_named():
    parl_lite.shutdown()
    with pytest.raises(ValueError, match=r"ray://local, ray://auto or ray://host:port"):
        parl_lite.connect("ray://nowhere")
    with pytest.raises(ValueError, match="num_workers"):
        parl_lite.connect("ray://local", num_workers=0)
    assert api._backend is None


def _es_train(tmp_path: Path, *extra: str) -> list:
    out = subprocess.run(
        [sys.executable, "-m", "parl_lite.cli", "es-train", *extra, "--set", "train.generations=3",
         "--set", "solver.population_size=8", "--set", "env.max_steps=60", "--set", "train.eval_episodes=2",
         "--set", f"train.log_dir={tmp_path}", "--set", f"train.checkpoint_dir={tmp_path}/ck"],
        env=CHILD_ENV, capture_output=True, text=True, timeout=200, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    timing = {"train_seconds", "episodes_per_second"}
    return [{key: value for key, value in row.items() if key not in timing}
            for row in csv.DictReader(open(tmp_path / "progress.csv"))]


def test_es_train_on_ray_gives_the_local_pools_results(tmp_path):
    (tmp_path / "pool").mkdir()
    (tmp_path / "ray").mkdir()
    on_pool = _es_train(tmp_path / "pool")
    on_ray = _es_train(tmp_path / "ray", "--address", "ray://local")
    assert len(on_pool) == 3 and on_ray == on_pool

