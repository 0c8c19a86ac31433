"""The cluster with real processes: a master and two nodes started through ``parl-lite`` in their own
working folders, clients in this process or in scripts, sockets on 127.0.0.1."""
import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import parl_lite
from parl_lite import remote_class
from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.shipping import write_files

from backends import ACTORS_MODULE, Cluster, connect_client
from remote_actors import Counter
from remote_helpers import true_within, wait_for_exit, wait_for_file

pytestmark = pytest.mark.timeout(120)

RemoteCounter = remote_class(Counter)
AsyncCounter = remote_class(Counter, wait=False)


DRIVER = textwrap.dedent("""
    import json, os, sys, threading
    import parl_lite
    from parl_lite import remote_class
    import helper                      # a module of the driver's folder: shipped

    @remote_class
    class Worker:                      # defined in __main__
        def where(self):
            return os.getcwd()
        def work(self, n):
            return helper.total(n)
        def config(self):
            return open("configs/run.yaml").read()   # relative read from the work folder

    parl_lite.connect(sys.argv[1], token_file=sys.argv[2], distributed_files=["configs/*.yaml"])
    workers = [Worker() for _ in range(4)]
    print(json.dumps({"where": [w.where() for w in workers], "work": [w.work(10) for w in workers],
                      "config": workers[0].config(), "pid": os.getpid()}), flush=True)
    if sys.argv[3] == "hang":
        sys.stdin.readline()
""")


def _write_driver(folder):
    folder.mkdir()
    (folder / "driver.py").write_text(DRIVER)
    (folder / "helper.py").write_text("def total(n):\n    return sum(range(n))\n")
    (folder / "configs").mkdir()
    (folder / "configs" / "run.yaml").write_text("lr: 0.1\n")
    return folder


def test_actors_spread_over_both_nodes_with_the_users_files(cluster, tmp_path):
    driver = _write_driver(tmp_path / "driver")
    result = subprocess.run([sys.executable, "driver.py", cluster.address, cluster.token_file, "exit"],
                            cwd=driver, capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["work"] == [45] * 4 and report["config"] == "lr: 0.1\n"
    nodes = {path.split(os.sep + ".parl_lite_node_")[0] for path in report["where"]}
    assert nodes == {str(tmp_path / "master"), str(tmp_path / "node-b")}  # both nodes, 2 actors each
    # the client left: its actors and work folders go within 3 s
    assert true_within(lambda: not list(tmp_path.glob("*/.parl_lite_node_*/client-*")), 3.0)
    assert true_within(lambda: all(n["cpus_used"] == 0 for n in cluster.status()["nodes"]), 3.0)


def test_a_killed_client_frees_its_actors_within_3_s(cluster, tmp_path):
    driver = _write_driver(tmp_path / "driver")
    process = subprocess.Popen([sys.executable, "driver.py", cluster.address, cluster.token_file, "hang"],
                               cwd=driver, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        json.loads(process.stdout.readline())
        status = cluster.status()
        assert sum(node["cpus_used"] for node in status["nodes"]) == 4
        assert [client["actors"] for client in status["clients"]] == [4]
    finally:
        process.kill()
        process.wait()
    killed = time.monotonic()
    assert true_within(lambda: all(n["cpus_used"] == 0 for n in cluster.status()["nodes"]), 3.0)
    assert true_within(lambda: not list(tmp_path.glob("*/.parl_lite_node_*/client-*")), 3.0)
    assert time.monotonic() - killed < 3.0
    assert cluster.status()["clients"] == []


def test_sigkill_of_a_node_fails_its_actors_within_3_s_and_the_rest_goes_on(cluster, tmp_path):
    connect_client(cluster)
    actors = [AsyncCounter(0) for _ in range(2)]
    by_node = {actor._channel.node.address: actor for actor in actors}
    assert len(by_node) == 2  # the second actor went to the node with more free CPUs
    node_b = next(e for e in cluster.processes() if e["role"] == "node" and e["cwd"] == str(tmp_path / "node-b"))
    doomed = by_node[next(a for a in by_node if a.endswith(node_b["address"].rsplit(":", 1)[1]))]
    survivor = next(actor for actor in actors if actor is not doomed)
    marker = tmp_path / "blocked"
    pending = doomed.block_after_signal(str(marker))
    assert wait_for_file(str(marker), timeout=20)
    os.kill(node_b["pid"], signal.SIGKILL)
    killed = time.monotonic()
    with pytest.raises(parl_lite.ActorDiedError, match="block_after_signal"):
        pending.result(timeout=10)
    assert time.monotonic() - killed < 3.0
    with pytest.raises(parl_lite.ActorDiedError):
        doomed.add(1).result(timeout=10)
    assert survivor.add(5).result(timeout=10) == 5  # the other node's actor goes on
    assert true_within(lambda: [n["alive"] for n in cluster.status()["nodes"]].count(False) == 1, 3.0)
    assert RemoteCounter(1).add(1) == 2  # the master places on the living node
    cluster.add_node("node-c", cpus=1)  # a node may (re)join
    assert sum(node["alive"] for node in cluster.status()["nodes"]) == 2


def test_a_silent_node_is_taken_for_dead_by_its_clients_and_the_master(cluster, tmp_path):
    connect_client(cluster)
    actors = [AsyncCounter(0) for _ in range(2)]
    node_b = next(e for e in cluster.processes() if e["role"] == "node" and e["cwd"] == str(tmp_path / "node-b"))
    port_b = node_b["address"].rsplit(":", 1)[1]
    doomed = next(a for a in actors if a._channel.node.address.endswith(port_b))
    marker = tmp_path / "blocked"
    pending = doomed.block_after_signal(str(marker))
    assert wait_for_file(str(marker), timeout=20)
    os.kill(node_b["pid"], signal.SIGSTOP)  # as if its machine fell off the network: no socket closes
    try:
        stopped = time.monotonic()
        with pytest.raises(parl_lite.ActorDiedError, match="is gone"):
            pending.result(timeout=10)
        # the silence limit, counted from the last beat before the stop
        assert wire.SILENCE_LIMIT - wire.HEARTBEAT_PERIOD < time.monotonic() - stopped < 5.0
        assert true_within(lambda: [n["alive"] for n in cluster.status()["nodes"]].count(False) == 1, 3.0)
    finally:
        os.kill(node_b["pid"], signal.SIGKILL)
        os.kill(node_b["pid"], signal.SIGCONT)


def test_placement_waits_then_names_the_capacity(cluster):
    connect_client(cluster, placement_timeout=0.5)
    actors = [RemoteCounter() for _ in range(4)]
    started = time.monotonic()
    with pytest.raises(wire.ClusterError, match=r"2 node\(s\) with 4 CPU\(s\), all in use"):
        RemoteCounter()
    assert time.monotonic() - started >= 0.5
    actors[0].close()  # a freed CPU is placed again
    assert true_within(lambda: sum(n["cpus_used"] for n in cluster.status()["nodes"]) == 3, 3.0)
    assert RemoteCounter(3).add(1) == 4


def test_a_class_placement_timeout_overrides_the_connections(cluster):
    connect_client(cluster, placement_timeout=30)
    actors = [RemoteCounter() for _ in range(4)]
    started = time.monotonic()
    with pytest.raises(wire.ClusterError, match=r"all in use"):
        remote_class(Counter, placement_timeout=0.3)()
    assert 0.3 <= time.monotonic() - started < 10  # not the connection's 30 s
    for actor in actors:
        actor.close()


def test_the_cluster_answers_its_capacity(cluster):
    capacity = connect_client(cluster).capacity()
    assert (capacity.cpus, capacity.on_this_machine, capacity.one_actor_per_cpu) == (4, False, True)
    assert cluster.address in capacity.description and f"--address {cluster.address}" in capacity.grow_hint


def test_status_command_lists_nodes_clients_and_actors(cluster):
    connect_client(cluster)
    actor = RemoteCounter()
    actor.shout("visible to the master")
    assert true_within(lambda: any(a["calls_served"] >= 2 for a in cluster.status()["actors"]), 3.0)
    text = cluster.cli("status").stdout
    assert f"cluster at {cluster.address}: 2 node(s) alive, 1/4 CPUs used, 1 client(s)" in text
    for entry in cluster.processes():
        if entry["role"] == "node":
            assert entry["address"] in text
    assert "Counter" in text and "alive" in text
    backend = parl_lite.connect()
    actor_id = actor._channel.actor_id
    lines = backend._ask_master({"type": "output", "actor_id": actor_id})["lines"]
    assert "visible to the master" in lines


def test_wrong_token_and_no_token_are_refused(cluster, tmp_path, monkeypatch):
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not the token\n")
    wrong.chmod(0o600)
    with pytest.raises(wire.AuthenticationError, match="refused our token"):
        parl_lite.connect(cluster.address, token_file=str(wrong))
    monkeypatch.delenv("PARL_LITE_TOKEN", raising=False)
    monkeypatch.setenv("PARL_LITE_HOME", str(tmp_path / "empty-home"))
    with pytest.raises(FileNotFoundError, match="no cluster token"):
        parl_lite.connect(cluster.address)
    monkeypatch.setenv("PARL_LITE_TOKEN", "guessed")
    with pytest.raises(wire.AuthenticationError):
        parl_lite.connect(cluster.address)
    refused = cluster.cli("connect", "--address", cluster.address, "--token-file", str(wrong), check=False)
    assert refused.returncode != 0 and "refused our token" in refused.stderr
    assert "Traceback" not in refused.stderr
    wrong.chmod(0o644)
    with pytest.raises(PermissionError, match="chmod 600"):
        parl_lite.connect(cluster.address, token_file=str(wrong))
    result = cluster.cli("status", "--token-file", str(wrong), "--address", cluster.address, check=False)
    assert result.returncode != 0 and "chmod 600" in result.stderr


class _CreatesAFile:
    """Unpickling this runs ``touch PATH``: a payload an attacker would send."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_pickle_sent_before_authentication_never_runs(cluster, tmp_path):
    marker = tmp_path / "payload-ran"
    payload = pickle.dumps(_CreatesAFile(marker))
    assert len(payload) > 64
    node = next(entry for entry in cluster.processes() if entry["role"] == "node")
    for address in (cluster.address, node["address"]):
        host, port = wire.split_address(address)
        # the bare pickle, and the pickle framed as an authenticated peer's message would be
        for sent in (payload, struct.pack("!IH", len(payload), 0) + payload):
            with socket.create_connection((host, port), timeout=10) as attacker:
                attacker.sendall(sent * 4)
                received = b""
                try:
                    while True:  # the server reads 64 bytes as a digest, refuses, and closes
                        chunk = attacker.recv(4096)
                        if not chunk:
                            break
                        received += chunk
                except ConnectionResetError:  # closed with our surplus bytes unread
                    pass
            assert received.startswith(wire.MAGIC) and b"OK" not in received[36:]
    assert not marker.exists()
    # and a local pickle.loads of the same payload would indeed have created it
    pickle.loads(payload)
    assert marker.exists()
    connect_client(cluster)
    assert RemoteCounter(1).add(1) == 2  # the cluster still serves


def test_a_peer_with_other_versions_is_refused_with_both_named(cluster):
    token = open(cluster.token_file, "rb").read().strip()
    theirs = {**wire.local_versions(), "parl_lite": "0.0.1", "cloudpickle": "1.0"}
    with pytest.raises(wire.VersionMismatchError) as refused:
        wire.open_connection(cluster.address, token, "client", versions=theirs)
    mine = wire.local_versions()
    message = str(refused.value)
    assert f"parl_lite {mine['parl_lite']} here, 0.0.1 at" in message
    assert f"cloudpickle {mine['cloudpickle']} here, 1.0 at" in message


def test_stop_while_actors_run_leaves_nothing(cluster):
    connect_client(cluster)
    actor = RemoteCounter()
    assert actor.add(1) == 1
    cluster.stop()  # checks: no recorded process, zygote, worker, segment or node folder left
    with pytest.raises(parl_lite.ActorDiedError):
        actor.add(1)
    with pytest.raises(wire.ClusterError, match="master .* is gone"):
        RemoteCounter()
    assert "no cluster process" in cluster.cli("stop").stdout  # nothing more to stop


def test_after_the_masters_death_actors_serve_until_the_nodes_reconnect_grace_ends(tmp_path):
    parl_lite.shutdown()
    cluster = Cluster(tmp_path)
    try:
        cluster.start(1, "--reconnect-grace", "2")
        connect_client(cluster)
        actor = RemoteCounter()
        master = next(entry for entry in cluster.processes() if entry["role"] == "master")
        os.kill(master["pid"], signal.SIGKILL)
        killed = time.monotonic()
        assert actor.add(1) == 1  # the node keeps serving while it tries to reach the master
        with pytest.raises(wire.ClusterError, match="master .* is gone"):
            RemoteCounter()
        for pid in cluster.node_pids():
            assert wait_for_exit(pid, timeout=10)  # then gives up and exits
        assert time.monotonic() - killed > 1.5
        with pytest.raises(parl_lite.ActorDiedError):
            actor.add(1)
    finally:
        parl_lite.shutdown()
        cluster.stop()


def test_a_cluster_started_for_a_process_ends_with_it(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    started = Cluster(tmp_path)
    started.env["PARL_LITE_EXIT_WITH"] = str(owner.pid)  # as tests/backends.py does with the test run
    try:
        started.start(cpus=1)
        started.add_node("node-b", cpus=1)
        entries = started.processes()
        owner.kill()
        owner.wait()
        assert all(wait_for_exit(entry["pid"], timeout=10) for entry in entries)
    finally:
        owner.kill()
        owner.wait()
        started.stop()


def test_the_shipped_files_have_a_size_limit(cluster, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * 2**20)
    with pytest.raises(wire.ClusterError, match=r"1\.0 MB, over the limit of 0\.5 MB .*big.bin"):
        parl_lite.connect(cluster.address, token_file=cluster.token_file, distributed_files=[str(big)],
                          max_ship_mb=0.5)
    with pytest.raises(FileNotFoundError, match="no_such_file"):
        parl_lite.connect(cluster.address, token_file=cluster.token_file, distributed_files=["no_such_file*"])


def test_a_distributed_folder_is_shipped_whole_with_its_empty_sub_folders(cluster, tmp_path, monkeypatch):
    data = tmp_path / "driver" / "data"
    (data / "sub").mkdir(parents=True)
    (data / "empty").mkdir()
    (data / "sub" / "notes.txt").write_text("shipped\n")
    monkeypatch.chdir(tmp_path / "driver")
    parl_lite.connect(cluster.address, token_file=cluster.token_file, distributed_files=[ACTORS_MODULE, "data"])
    counter = Counter()
    assert counter.read_text("data/sub/notes.txt") == "shipped\n"
    assert [counter.path_kind(path) for path in ("data", "data/sub", "data/empty")] == ["folder"] * 3


def test_a_distributed_files_entry_that_matches_nothing_is_also_a_value_error_as_in_parl(cluster):
    with pytest.raises(ValueError, match="no_such_file"):
        parl_lite.connect(cluster.address, token_file=cluster.token_file, distributed_files=["no_such_file*"])


def test_shipped_names_and_contents_that_differ_in_number_are_refused_before_writing(tmp_path):
    with pytest.raises(ValueError, match="2 shipped file names for 1 file contents"):
        write_files(tmp_path, ["a.py", "b.py"], [b"x = 1\n"], limit_mb=1.0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["../escaped.py", "/tmp/escaped.py", "data/../../escaped.py", "", ".", "./", ".."])
def test_a_shipped_name_outside_the_work_folder_is_refused_and_nothing_lands_outside_it(tmp_path, name):
    folder = tmp_path / "work"
    folder.mkdir()
    with pytest.raises(ValueError, match="outside the work folder"):
        write_files(folder, ["first.py", name], [b"x = 1\n", b"escaped"], limit_mb=1.0)
    assert [path.name for path in tmp_path.rglob("*")] == ["work", "first.py"]


def test_shipped_files_and_folders_land_where_their_names_say_each_folder_made_once(tmp_path):
    names = ["top.py", "data/", "data/empty/", "data//deep/./notes.txt", "data/deep/more.txt", "pkg/mod.py"]
    write_files(tmp_path, names, [b"a", b"", b"", b"b", b"c", b"d"], limit_mb=1.0)
    found = {path.relative_to(tmp_path).as_posix(): path.read_bytes() if path.is_file() else None
             for path in tmp_path.rglob("*")}
    assert found == {"top.py": b"a", "data": None, "data/empty": None, "data/deep": None,
                     "data/deep/notes.txt": b"b", "data/deep/more.txt": b"c", "pkg": None, "pkg/mod.py": b"d"}


def test_a_shipped_file_where_a_shipped_folder_must_go_is_an_os_error(tmp_path):
    with pytest.raises(FileExistsError):
        write_files(tmp_path, ["data", "data/notes.txt"], [b"a file", b"b"], limit_mb=1.0)


def test_a_sampler_where_the_noise_table_does_not_exist_rebuilds_it():
    from evokit_py.agent import ESAgent
    from evokit_py.config import resolve_config
    from evokit_py.noise import NoiseSpec
    from evokit_py.sampler import Sampler

    agent = ESAgent(resolve_config(None, ["env.max_steps=40"]))
    spec = agent.noise_spec()
    elsewhere = NoiseSpec(spec.seed, spec.dim, "parl_lite_no_such_noise_table", spec.table_size)
    infos = [info.to_list() for info in agent.solver.ask()]
    seeds = [[3]] * len(infos)
    basis = agent.solver.basis().to_dict()
    here, there = Sampler(agent.config, agent.policy_bytes(), spec), Sampler(agent.config, agent.policy_bytes(), elsewhere)
    try:
        assert there._table.name is None  # rebuilt in its own memory
        np.testing.assert_array_equal(there._table.values, here._table.values)
        np.testing.assert_array_equal(there.evaluate(basis, None, None, infos, seeds)["returns"],
                                      here.evaluate(basis, None, None, infos, seeds)["returns"])
    finally:
        here.release()
        there.release()
        agent.close()


def _es_train(cluster: Cluster, run: str, *extra: str) -> subprocess.CompletedProcess:
    return cluster.cli("es-train", "--set", f"train.log_dir={run}", "--set", f"train.checkpoint_dir={run}/ck",
                       "--set", "train.generations=3", "--set", "env.max_steps=60", "--set", "train.workers=2",
                       "--set", "train.target_return=null", *extra)


def test_es_train_on_the_cluster_matches_the_local_pool(cluster, tmp_path):
    from evokit_py.checkpoint import read_checkpoint

    on_cluster = _es_train(cluster, str(tmp_path / "cluster"), "--address", cluster.address)
    samplers = lambda: [a for a in cluster.status()["actors"] if a["class"] == "Sampler" and a["calls_served"] > 1]
    assert true_within(lambda: len(samplers()) == 2, 3.0)  # the samplers ran on the nodes
    assert {a["node"] for a in samplers()} == {n["id"] for n in cluster.status()["nodes"]}
    local = _es_train(cluster, str(tmp_path / "local"))
    summaries = [json.loads(run.stdout.splitlines()[-1]) for run in (on_cluster, local)]
    assert [summary["updates"] for summary in summaries] == [3, 3]
    progress = [[row.split(",")[:4] for row in (tmp_path / run / "progress.csv").read_text().splitlines()]
                for run in ("cluster", "local")]
    assert progress[0] == progress[1]
    _, state_cluster = read_checkpoint(tmp_path / "cluster" / "ck" / "solver.h5")
    _, state_local = read_checkpoint(tmp_path / "local" / "ck" / "solver.h5")
    np.testing.assert_array_equal(state_cluster["params"]["params"], state_local["params"]["params"])
