"""A cluster's life through ``parl-lite``: a master restarted after a crash, nodes refused when they
rejoin, a client whose master is gone, and values refused before anything starts. Masters and
nodes are real processes started in their own folders; fake masters are real servers on 127.0.0.1."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import parl_lite
from parl_lite import remote_class
from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.limits import LimitError, Limits
from parl_lite.ext.cluster.server import Role, Server

from backends import Cluster, connect_client
from remote_actors import Counter
from remote_helpers import processes_with, true_within, wait_for_exit, wait_for_file

pytestmark = pytest.mark.timeout(180)

RemoteCounter = remote_class(Counter)


def _master(cluster: Cluster) -> dict:
    return next(entry for entry in cluster.processes() if entry["role"] == "master")


def _crash_master(cluster: Cluster) -> None:
    master = _master(cluster)
    os.kill(master["pid"], signal.SIGKILL)
    assert wait_for_exit(master["pid"], timeout=10)


def _restart(cluster: Cluster, *extra: str) -> subprocess.CompletedProcess:
    """``parl-lite start`` again on the crashed master's port, in its folder."""
    port = cluster.address.rsplit(":", 1)[1]
    return cluster.cli("start", "--port", port, "--cpus", "1", "--no-monitor", *extra, cwd=cluster.folder / "master")


def _nodes_alive(cluster: Cluster) -> dict[str, str]:
    """Address -> id of the nodes the master has alive."""
    return {node["address"]: node["id"] for node in cluster.status()["nodes"] if node["alive"]}


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if not wait_for_exit(pid, timeout=0)]


# --- a master restarted after a crash ---------------------------------------------------------------
def test_start_after_a_crash_reuses_the_token_and_the_nodes_rejoin_with_their_actors(tmp_path):
    parl_lite.shutdown()
    cluster = Cluster(tmp_path)
    try:
        cluster.start(1, "--no-monitor")
        token = Path(cluster.token_file).read_text()
        connect_client(cluster)
        actor = RemoteCounter(0)
        before = _nodes_alive(cluster)
        _crash_master(cluster)
        restarted = _restart(cluster)
        assert Path(cluster.token_file).read_text() == token
        assert "rejoins this one with its actors" in restarted.stdout, restarted.stdout
        assert true_within(lambda: _nodes_alive(cluster) == before, 15)  # under its id
        assert sum(node["cpus_used"] for node in cluster.status()["nodes"]) == 1  # with its actor's CPU
        assert len(_alive(cluster.node_pids())) == 1  # no second node for the same CPUs
        assert actor.add(1) == 1
    finally:
        parl_lite.shutdown()
        cluster.stop()


def test_start_with_a_new_token_names_the_nodes_it_orphans(tmp_path):
    cluster = Cluster(tmp_path)
    try:
        cluster.start(1, "--no-monitor", "--reconnect-grace", "60")
        token = Path(cluster.token_file).read_text()
        orphan = next(entry for entry in cluster.processes() if entry["role"] == "node")
        _crash_master(cluster)
        restarted = _restart(cluster, "--new-token")
        assert Path(cluster.token_file).read_text() != token
        assert "nodes that hold the previous one cannot join or rejoin" in restarted.stdout
        assert f"node at {orphan['address']} (pid {orphan['pid']}," in restarted.stdout, restarted.stdout
        alive = _nodes_alive(cluster)  # a node started with the new token, not the orphan
        assert len(alive) == 1 and orphan["address"] not in alive
    finally:
        cluster.stop()


# --- a node refused when it rejoins -------------------------------------------------------------------
REPLACEMENT_MASTER = textwrap.dedent("""
    import os, sys, time
    import parl_lite.version
    if sys.argv[1] == "version":
        parl_lite.version.__version__ = "0.0.1"    # what another release of parl_lite would say
    from parl_lite.ext.cluster import master
    open(sys.argv[2], "w").write("imported")     # the slow part is done
    while not os.path.exists(sys.argv[3]):       # serve once the master it replaces is gone
        time.sleep(0.01)
    master.main(sys.argv[4:])
""")


@pytest.mark.parametrize("misfit", ["token", "version"])
def test_a_node_refused_when_it_rejoins_says_why_and_exits_after_its_grace(tmp_path, misfit):
    cluster = Cluster(tmp_path)
    replacement = None
    try:
        cluster.start(1, "--no-monitor", "--reconnect-grace", "5")
        node = next(entry for entry in cluster.processes() if entry["role"] == "node")
        token_file = cluster.token_file
        if misfit == "token":
            token_file = str(tmp_path / "other-token")
            Path(token_file).write_text("another-token\n")
            os.chmod(token_file, 0o600)
        host, port = wire.split_address(cluster.address)
        imported, go, ready = (tmp_path / name for name in ("imported", "go", "replacement.ready"))
        replacement = subprocess.Popen([sys.executable, "-c", REPLACEMENT_MASTER, misfit, imported, go, "--host", host,
                                        "--port", str(port), "--token-file", token_file, "--ready-file", str(ready)],
                                       env=cluster.env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        assert wait_for_file(str(imported), timeout=60)
        _crash_master(cluster)
        go.touch()
        assert wait_for_file(str(ready), timeout=30)
        assert wait_for_exit(node["pid"], timeout=30)  # after its grace
        log = Path(node["log"]).read_text()
        reason = "refused our token" if misfit == "token" else "version mismatch: parl_lite"
        warnings = [line for line in log.splitlines() if "WARNING" in line and "refused this node" in line]
        assert warnings and all(reason in line for line in warnings), log
        assert "did not come back" not in log, log
    finally:
        if replacement is not None:
            replacement.terminate()
            replacement.wait(timeout=30)
        cluster.stop()


class _NoIdMaster:
    """A master that accepts nodes without giving them an id (the first one with an id, when
    ``first_with_id``, then it closes that connection): a real server on 127.0.0.1."""

    def __init__(self, token: bytes, first_with_id: bool) -> None:
        self.joins = 0
        self._first_with_id = first_with_id
        self._lock = threading.Lock()
        self.server = Server("127.0.0.1", 0, token, {"node": Role(self._answer)}, Limits(), identity=wire.MASTER)
        self.address = f"127.0.0.1:{self.server.port}"

    def _answer(self, framed: wire.FramedSocket, hello: dict) -> None:
        with self._lock:
            self.joins += 1
            first = self.joins == 1
        if first and self._first_with_id:
            framed.send_json({"ok": True, "node_id": "0123abcd"})
        else:
            framed.send_json({"ok": True})
            try:
                while True:
                    framed.receive()
            except (EOFError, OSError, ValueError):
                pass
        framed.close()


def _cluster_with_token(folder: Path) -> tuple[Cluster, bytes]:
    cluster = Cluster(folder)
    cluster.home.mkdir(mode=0o700)
    token = b"a-token-for-these-tests"
    Path(cluster.token_file).write_bytes(token + b"\n")
    os.chmod(cluster.token_file, 0o600)
    return cluster, token


def test_a_master_reply_without_a_node_id_is_named_when_a_node_joins(tmp_path):
    cluster, token = _cluster_with_token(tmp_path)
    fake = _NoIdMaster(token, first_with_id=False)
    try:
        cluster.address = fake.address
        (tmp_path / "node").mkdir()
        result = cluster.cli("connect", "--address", fake.address, "--cpus", "1", cwd=tmp_path / "node", check=False)
        assert result.returncode != 0
        assert "accepted this node without giving it a node id" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        assert cluster.processes() == []
    finally:
        fake.server.close()
        cluster.stop()


def test_a_master_reply_without_a_node_id_on_rejoin_stops_the_node_after_its_grace(tmp_path):
    cluster, token = _cluster_with_token(tmp_path)
    fake = _NoIdMaster(token, first_with_id=True)
    try:
        cluster.address = fake.address
        node = cluster.add_node("node", 1, "--reconnect-grace", "1")
        assert wait_for_exit(node["pid"], timeout=20)  # it ran on for ever, its master thread dead of a KeyError
        log = Path(node["log"]).read_text()
        assert "accepted this node without giving it a node id" in log and "KeyError" not in log, log
        assert fake.joins >= 2
    finally:
        fake.server.close()
        cluster.stop()


# --- a client whose master is gone --------------------------------------------------------------------
def test_a_client_whose_master_is_gone_is_told_its_actors_answer_and_reconnects_to_a_restarted_master(tmp_path):
    parl_lite.shutdown()
    cluster = Cluster(tmp_path)
    try:
        cluster.start(2, "--no-monitor")
        backend = connect_client(cluster)
        actor = RemoteCounter(0)
        before = _nodes_alive(cluster)
        _crash_master(cluster)
        with pytest.raises(wire.ClusterError, match="master .* is gone") as gone:
            RemoteCounter(1)
        assert "creating actors fails until a master answers on that address again" in str(gone.value)
        assert "the actors already created keep answering" in str(gone.value)
        assert "lost" not in str(gone.value)
        assert actor.add(1) == 1  # they do
        _restart(cluster)
        assert true_within(lambda: _nodes_alive(cluster) == before, 15)
        assert RemoteCounter(5).add(1) == 6  # the same connection: parl_lite.connect is not called again
        assert actor.add(1) == 2
        clients = cluster.status()["clients"]
        assert [(client["id"], client["actors"]) for client in clients] == [(backend.client_id, 2)]  # under its id
    finally:
        parl_lite.shutdown()
        cluster.stop()


# --- values refused before anything starts ------------------------------------------------------------
BAD_VALUES = {
    "grace nan": (["start", "--reconnect-grace", "nan"], {}, "--reconnect-grace must be a positive number, got 'nan'"),
    "grace inf": (["start", "--reconnect-grace", "inf"], {},
                  "--reconnect-grace must be a finite positive number, got 'inf'"),
    "grace tiny": (["connect", "--address", "127.0.0.1:1", "--reconnect-grace", "0.001"], {},
                   "--reconnect-grace must be at least 0.1 seconds"),
    "handshake 1e-6": (["start"], {"PARL_LITE_HANDSHAKE_TIMEOUT": "1e-6"},
                       "PARL_LITE_HANDSHAKE_TIMEOUT must be from 0.1 to 3600 seconds"),
    "port 70000": (["start", "--port", "70000"], {}, "70000 is not in the range 0<=x<=65535"),
    "address port 70000": (["connect", "--address", "127.0.0.1:70000"], {}, "with a port from 1 to 65535"),
    "cpu_num -1": (["start", "--cpu_num", "-1"], {}, "-1 is not in the range x>=0"),
    "cpus 1000000": (["connect", "--address", "127.0.0.1:1", "--cpus", "1000000"], {},
                     "--cpus 1000000: a node keeps a process per CPU, at least 32 MB each"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_a_bad_value_is_refused_naming_it_before_anything_starts(tmp_path, case):
    arguments, environment, message = BAD_VALUES[case]
    cluster = Cluster(tmp_path)
    cluster.env.update(environment)
    if arguments[0] == "start":
        arguments = [*arguments, "--no-monitor"] + ([] if "--cpu_num" in arguments else ["--cpus", "1"])
        if "--port" not in arguments:
            arguments += ["--port", "0"]
    result = cluster.cli(*arguments, check=False)
    try:
        assert result.returncode != 0, result.stdout
        assert message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        assert processes_with("parl_lite.ext.cluster.", str(tmp_path)) == []  # nothing was left running
    finally:
        cluster.stop()


def test_a_start_whose_node_fails_stops_the_master_it_started(tmp_path):
    cluster = Cluster(tmp_path)
    try:  # the node cannot make its private folder in /proc (the master needs none)
        result = cluster.cli("start", "--port", "0", "--cpus", "1", "--no-monitor", cwd=Path("/proc"), check=False)
        assert result.returncode != 0 and "the node did not start" in result.stderr, result.stderr
        assert "stopped the master this start had started" in result.stderr, result.stderr
        assert processes_with("parl_lite.ext.cluster.", str(tmp_path)) == []
        assert cluster.processes() == []
    finally:
        cluster.stop()


@pytest.mark.parametrize("variable, value, allowed", [
    ("PARL_LITE_HANDSHAKE_TIMEOUT", "0.05", False), ("PARL_LITE_HANDSHAKE_TIMEOUT", "0.1", True),
    ("PARL_LITE_HANDSHAKE_TIMEOUT", "3601", False), ("PARL_LITE_HANDSHAKE_TIMEOUT", "1e300", False),
    ("PARL_LITE_RECONNECT_GRACE", "0.05", False), ("PARL_LITE_RECONNECT_GRACE", "1e6", True),
    ("PARL_LITE_MONITOR_REQUEST_TIMEOUT", "0.01", False), ("PARL_LITE_MAX_FRAME_MB", "0.5", True),
])
def test_a_limit_out_of_its_range_is_refused_naming_the_range(variable, value, allowed):
    if allowed:
        Limits.from_environment({variable: value})
    else:
        with pytest.raises(LimitError, match=rf"{variable} must be (from|at least) .* seconds \(.*\), got '{value}'"):
            Limits.from_environment({variable: value})
