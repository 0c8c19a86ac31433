"""PARL's remote API spellings: future mode (get/get_nowait/empty, FutureObjectEmpty), PARL's
exception names, destroy(), _original, remote_class's and connect's PARL arguments; on every backend
where the behaviour is the backend's, and through `parl-lite start/connect` with xparl's options."""
import concurrent.futures
import os
import subprocess
import sys
import time

import pytest

import parl_lite
from parl_lite import remote_class
from parl_lite.remote import exceptions
from parl_lite.remote.future_mode import FutureObject
from parl_lite.remote.future_mode.future_object import FutureObject as FutureObjectByModule

from remote_actors import Counter, FailingInit, WithClose
from backends import ACTORS_MODULE, Cluster, assert_cluster_gone

pytestmark = pytest.mark.timeout(90)

RemoteCounter = remote_class(Counter)
AsyncCounter = remote_class(wait=False)(Counter)


def test_future_mode_get_get_nowait_and_empty(backend, tmp_path):
    actor = AsyncCounter()
    mine, theirs = str(tmp_path / "actor-started"), str(tmp_path / "go")
    future = actor.rendezvous(mine, theirs, 30.0)
    assert isinstance(future, FutureObject) and FutureObject is FutureObjectByModule is parl_lite.Future
    deadline = time.monotonic() + 30
    while not os.path.exists(mine):  # the call is running in the actor (it creates the file empty)
        assert time.monotonic() < deadline, "the actor did not start the call"
        time.sleep(0.005)
    assert future.empty()
    for attempt in (lambda: future.get(block=False), future.get_nowait, lambda: future.get(timeout=0.05)):
        with pytest.raises(exceptions.FutureObjectEmpty, match="not available"):
            attempt()
    with pytest.raises(concurrent.futures.TimeoutError):  # also a TimeoutError, as result(timeout) raises
        future.get_nowait()
    open(theirs, "w").close()
    assert future.get() is True
    assert future.get() is True and future.get(block=False) is True  # again: same value (PARL raises)
    assert not future.empty()
    assert actor.add(2).get(timeout=30) == 2


def test_remote_exceptions_have_parl_s_names_and_the_actor_stays_alive(backend):
    actor = AsyncCounter()
    failing = actor.fail("bad input")
    with pytest.raises(exceptions.FutureFunctionError, match="bad input") as caught:
        failing.get()
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, exceptions.RemoteError)
    assert actor.add(5).get() == 5  # PARL's actor is broken after an exception; ours serves on
    waiting = RemoteCounter()
    with pytest.raises(exceptions.RemoteError, match="again"):
        waiting.fail("again")
    with pytest.raises(exceptions.RemoteError, match="constructor refused"):
        remote_class(FailingInit)("no")
    assert exceptions.RemoteSerializeError is exceptions.RemoteDeserializeError is parl_lite.SerializationError


def test_destroy_closes_the_actor_or_calls_the_class_s_own(backend, tmp_path):
    marker = tmp_path / "closed"
    actor = remote_class(wait=False)(WithClose)(str(marker))
    actor.destroy()  # PARL's name for close(): the class's close() runs, then the actor stops
    assert marker.read_text() == "closed"
    with pytest.raises(parl_lite.ActorDiedError):
        actor.path

    class OwnDestroy:
        def destroy(self) -> str:
            return "mine"

    own = remote_class(OwnDestroy)()
    assert own.destroy() == "mine"  # a method of the class is called like any other
    assert own.destroy() == "mine"


def test_original_is_the_decorated_class():
    assert RemoteCounter._original is Counter and AsyncCounter._original is Counter
    local = AsyncCounter._original(1)
    assert local.add(1) == 2  # a plain local instance: no actor, no future


def test_parl_arguments_parl_lite_cannot_honour_are_refused_by_name():
    with pytest.raises(ValueError, match=r"n_gpu=1\): parl_lite's actors run on CPUs only; drop n_gpu"):
        remote_class(n_gpu=1)
    assert remote_class(n_gpu=0)(Counter)._original is Counter
    with pytest.raises(TypeError, match="unexpected keyword argument 'xxx'"):
        remote_class(xxx=10)
    # before, any value was taken for its truth: wait="no" made calls wait
    for wait in ("no", 0, None, "False"):
        with pytest.raises(TypeError, match=f"remote_class\\(wait={wait!r}\\): wait must be True .* or False"):
            remote_class(wait=wait)
        with pytest.raises(TypeError, match="wait must be True"):
            remote_class(Counter, wait=wait)
    with pytest.raises(ValueError, match="max_memory must be a positive number of MB, got -1"):
        remote_class(max_memory=-1)  # named when given, before a class is decorated
    def func():
        pass

    with pytest.raises(TypeError, match="decorates a class, got function <function"):
        remote_class(func)
    with pytest.raises(TypeError, match="decorates a class, got int 10"):
        remote_class(10)
    future = parl_lite.Future()
    future.set_result(3)
    with pytest.raises(TypeError, match=r"Future.get\(block=5\).*timeout="):
        future.get(5)
    with pytest.raises(ValueError, match="timeout must be non-negative"):
        future.get(timeout=-1)


def test_connect_takes_parl_s_arguments():
    parl_lite.shutdown()
    with pytest.raises(ValueError, match=r"connect\(distributed_files=...\): .*give its master_address"):
        parl_lite.connect(None, ["config.json"])
    try:
        first = parl_lite.connect(None, [], num_workers=1)  # PARL's default distributed_files=[]
        assert parl_lite.connect(num_workers=1) is first  # a repeat with the same arguments
        assert parl_lite.connect() is first
        with pytest.raises(RuntimeError, match="already connected"):
            parl_lite.connect(num_workers=2)
    finally:
        parl_lite.shutdown()


def test_disconnect_at_parl_s_path_ends_the_connection():
    from parl_lite.remote.client import disconnect
    from parl_lite.utils import _IS_WINDOWS  # PARL's file-shipping tests import it

    assert _IS_WINDOWS is (sys.platform == "win32")
    first = parl_lite.connect(num_workers=1)
    disconnect()
    try:
        assert parl_lite.connect(num_workers=2) is not first  # no "already connected": the first one ended
    finally:
        parl_lite.shutdown()


@pytest.mark.timeout(180)
def test_xparl_spellings_start_a_cluster_that_parl_s_connect_call_uses(tmp_path, monkeypatch):
    cluster = Cluster(tmp_path)
    (tmp_path / "master").mkdir()
    cluster.cli("start", "--port", "0", "--cpu_num", "1", "--monitor_port", "0", cwd=tmp_path / "master")
    cluster.address = next(entry["address"] for entry in cluster.processes() if entry["role"] == "master")
    (tmp_path / "node-b").mkdir()
    cluster.cli("connect", "--address", cluster.address, "--cpu_num", "1", "--gpu", "",
                "--token-file", cluster.token_file, cwd=tmp_path / "node-b")
    status = cluster.status()
    assert [node["cpus_total"] for node in status["nodes"]] == [1, 1]
    work = tmp_path / "driver"
    (work / "configs").mkdir(parents=True)
    (work / "configs" / "config.json").write_text('{"test": 1000}')
    monkeypatch.chdir(work)
    parl_lite.shutdown()
    try:
        parl_lite.connect(cluster.address, [ACTORS_MODULE, "configs/*.json"], token_file=cluster.token_file)
        actors = [remote_class(wait=False)(Counter)() for _ in range(2)]
        assert [actor.read_text("configs/config.json").get() for actor in actors] == ['{"test": 1000}'] * 2
        assert len({actor.pid().get() for actor in actors}) == 2
        for actor in actors:
            actor.destroy()
    finally:
        parl_lite.shutdown()
        entries, node_pids = cluster.processes(), cluster.node_pids()
        cluster.cli("stop")
        assert_cluster_gone(tmp_path, entries, node_pids)


@pytest.mark.parametrize("command, message", [
    (["start", "--port", "0", "--gpu", "0"], "--gpu 0: parl_lite's cluster places actors on CPUs only"),
    (["start", "--port", "0", "--gpu_cluster"], "--gpu_cluster: parl_lite's cluster places actors on CPUs only"),
    (["start", "--port", "0", "--debug"], "--debug: the master and nodes always write their logs to"),
    (["connect", "--address", "127.0.0.1:9", "--log_server_port_range", "8000-9000"],
     "--log_server_port_range: parl_lite has no log server"),
    (["connect", "--address", "127.0.0.1:9", "--gpu", "1,2"], "--gpu 1,2: parl_lite's cluster places"),
])
def test_xparl_options_parl_lite_cannot_honour_are_refused_with_what_to_do(tmp_path, command, message):
    env = {**os.environ, "PARL_LITE_HOME": str(tmp_path / "home")}
    result = subprocess.run([sys.executable, "-m", "parl_lite.cli", *command], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "home" / "cluster.json").exists()  # nothing was started
