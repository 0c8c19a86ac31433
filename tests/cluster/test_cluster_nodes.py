"""What a node costs and how the master treats nodes that fail, flap or do not fit (issue 26): real
masters and nodes started through ``parl-lite`` on 127.0.0.1."""
import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import parl_lite
from parl_lite import remote_class
from parl_lite.ext.cluster import wire
from parl_lite.remote.status import read_status

from backends import Cluster, connect_client
from remote_actors import Counter
from remote_helpers import true_within
from locations import BENCH

pytestmark = pytest.mark.timeout(180)

RemoteCounter = remote_class(Counter)

SCALE_BENCH = str(BENCH / "bench_cluster_scale.py")


def _node_entry(cluster: Cluster, folder: str) -> dict:
    return next(e for e in cluster.processes() if e["role"] == "node" and e["cwd"].endswith(os.sep + folder))


def _actor_hosts(node_pid: int) -> list:
    """The workers of a node's pool that host an ActorHost, as its status file lists them."""
    try:
        workers = read_status(node_pid)["workers"]
    except FileNotFoundError:
        return []
    return [worker for worker in workers if worker["actor"] == "ActorHost" and worker["state"] == "alive"]


def test_a_node_builds_an_actor_host_per_free_cpu_and_keeps_no_shared_memory(cluster):
    node = _node_entry(cluster, "node-b")
    # a host for each of its 2 CPUs, before any client asks (actors then wait for no process, no import)
    assert true_within(lambda: len(_actor_hosts(node["pid"])) == 2, 20)
    # arguments reach a node's actors over TCP: its pool keeps no shared memory for them (it kept
    # 64 MB per node, 6.4 GB for 100 nodes)
    assert glob.glob(f"/dev/shm/parl_lite_{node['pid']}_*") == []
    connect_client(cluster)
    actors = [RemoteCounter(index) for index in range(4)]
    assert [actor.add(1) for actor in actors] == [1, 2, 3, 4]
    hosts = _actor_hosts(node["pid"])
    assert len(hosts) == 2  # taken by the two actors here, none spare: the node has 2 CPUs
    for actor in actors:
        actor.close()
    # the actors' workers end and spares take their place
    assert true_within(lambda: len(_actor_hosts(node["pid"])) == 2 and
                       not ({host["pid"] for host in _actor_hosts(node["pid"])} & {h["pid"] for h in hosts}), 20)


def _open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_spare_host_killed_before_an_actor_takes_it_is_replaced_and_its_link_closed(cluster):
    """Each spare host links to the node's hand-over socket as it is built; an actor's client socket
    goes down that link. A spare that died unused is passed over, and its link closed with it."""
    node = _node_entry(cluster, "node-b")
    assert true_within(lambda: len(_actor_hosts(node["pid"])) == 2, 20)
    descriptors = _open_descriptors(node["pid"])  # its spares' pool connections and links among them
    os.kill(_actor_hosts(node["pid"])[0]["pid"], signal.SIGKILL)
    connect_client(cluster)
    actors = [RemoteCounter(index) for index in range(4)]  # every CPU: node-b takes both its spares, one dead
    assert [actor.add(1) for actor in actors] == [1, 2, 3, 4]
    parl_lite.shutdown()
    assert true_within(lambda: len(_actor_hosts(node["pid"])) == 2 and
                       _open_descriptors(node["pid"]) == descriptors, 20), \
        (_open_descriptors(node["pid"]), descriptors, os.listdir(f"/proc/{node['pid']}/fd"))


PRELOADED = textwrap.dedent("""
    import os
    with open(os.environ["PRELOAD_RECORD"], "a") as record:
        record.write(f"{os.getpid()}\\n")
""")


def test_a_pools_zygote_imports_the_modules_named_to_preload(tmp_path):
    (tmp_path / "preloaded_module.py").write_text(PRELOADED)
    record = tmp_path / "imported-by"
    script = textwrap.dedent(f"""
        import os, sys, json
        sys.path.insert(0, {str(tmp_path)!r})
        os.environ["PRELOAD_RECORD"] = {str(record)!r}
        os.environ["PARL_LITE_PRELOAD"] = "preloaded_module"
        from parl_lite.remote.pool import LocalPool
        pool = LocalPool(num_workers=0)
        print(json.dumps(pool.status()["zygote_pid"]))
        pool.shutdown()
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert record.read_text().split() == [result.stdout.strip()]  # imported once, by the zygote, before forking


# --- the master's view of nodes: a master in this process, nodes played by hand over real sockets -----
TOKEN = b"a-token-for-these-tests"


@pytest.fixture
def master():
    from parl_lite.ext.cluster.master import Master

    started = Master("127.0.0.1", 0, TOKEN)
    yield started
    started.close()


class HandNode:
    """A node that the test drives: it joins and reports when told to (nothing runs behind it)."""

    def __init__(self, master, cpus: int) -> None:
        self.framed, reply = wire.open_connection(master.address, TOKEN, "node", cpus=cpus, host="by-hand", pid=1,
                                                  serve_address="127.0.0.1:9")
        self.id = reply["node_id"]

    def report(self, actors=(), released=(), **fields) -> None:
        self.framed.send_json({"type": "report", "mem_used_mb": 1.0, "mem_total_mb": 2.0, "load1": 0.0,
                               "actors": list(actors), "output": {}, "released": list(released), **fields})

    def keep_reporting(self, stop: threading.Event, period: float = 0.2) -> threading.Thread:
        thread = threading.Thread(target=lambda: [self.report() for _ in iter(lambda: stop.wait(period), True)],
                                  daemon=True)
        thread.start()
        return thread


def _actor(actor_id: str, state: str) -> dict:
    return {"id": actor_id, "class": "Counter", "pid": 2, "state": state, "calls_served": 1, "rss_mb": 1.0,
            "last_error": None, "client": "c0ffee00"}


def _ask(connection, request: dict) -> dict:
    connection.send_json(request)
    return connection.receive_json()


def test_the_master_forgets_the_actors_that_ended_first(master):
    node = HandNode(master, cpus=4)
    node.report([_actor("a0a0a0a0", "alive"), _actor("a1a1a1a1", "alive")])
    node.report([_actor("a1a1a1a1", "closed")])  # created second, ended first
    node.report([_actor("a0a0a0a0", "closed")])
    node.report([_actor(f"{index:08x}", "closed") for index in range(255)])  # 257 ended in all: one too many

    def known():
        return {actor["id"] for actor in master.status()["actors"]}

    assert true_within(lambda: "000000fe" in known(), 10)
    assert "a0a0a0a0" in known() and "a1a1a1a1" not in known() and len(known()) == 256


def test_a_node_late_with_its_reports_is_suspect_and_gets_no_new_actor(master):
    from parl_lite.ext.cluster.master import PROBATION, SUSPECT_AFTER

    steady, late = HandNode(master, cpus=1), HandNode(master, cpus=4)
    stop = threading.Event()
    steady.keep_reporting(stop)
    client, _ = wire.open_connection(master.address, TOKEN, "client")
    try:
        assert _ask(client, {"type": "capacity"})["capacity"] == {"cpus_free": 5, "nodes_alive": 2,
                                                                   "nodes_suspect": 0, "cpus_total": 5}
        time.sleep(SUSPECT_AFTER + 0.3)  # the late node says nothing meanwhile
        assert _ask(client, {"type": "capacity"})["capacity"]["cpus_free"] == 1
        late.report()  # it speaks again, late: on probation
        placed = _ask(client, {"type": "place", "timeout": 0})
        assert placed["node_id"] == steady.id  # not the node with the most free CPUs: it is suspect
        refused = _ask(client, {"type": "place", "timeout": 0.3})
        assert "1 of them suspect" in refused["error"] and f"{PROBATION:g} s" in refused["error"]
        nodes = {node["id"]: node for node in master.status()["nodes"]}
        assert nodes[late.id]["suspect"] and not nodes[steady.id]["suspect"] and nodes[late.id]["alive"]
    finally:
        stop.set()
        client.close()


def test_the_load_history_goes_on_when_the_wall_clock_is_set_back(master, monkeypatch):
    from parl_lite.ext.cluster import master as master_module

    monkeypatch.setattr(master_module, "_LOAD_EVERY", 0.05)  # a point every 50 ms, not every 5 s
    node = HandNode(master, cpus=1)
    stop = threading.Event()
    node.keep_reporting(stop, period=0.02)

    def points() -> list:
        return next(n for n in master.status()["nodes"] if n["id"] == node.id)["load"]

    try:
        assert true_within(lambda: len(points()) >= 2, 10)
        wall_clock = time.time
        monkeypatch.setattr(time, "time", lambda: wall_clock() - 3600)  # set back an hour (NTP, a user)
        set_back = len(points())
        assert true_within(lambda: len(points()) >= set_back + 3, 10)  # it froze for the hour before
        assert points()[-1][0] < points()[0][0]  # the points carry the wall clock, as it now reads
    finally:
        stop.set()


# --- real nodes -------------------------------------------------------------------------------------
class Flapper:
    """Stops and continues a process (SIGSTOP / SIGCONT) in a loop, as a machine that freezes now and
    then would, until :meth:`stop`."""

    def __init__(self, pid: int, stopped_for: float, running_for: float) -> None:
        self.pid = pid
        self.flaps = 0
        self._done = threading.Event()
        self._first_stop = threading.Event()
        self._thread = threading.Thread(target=self._flap, args=(stopped_for, running_for), daemon=True)
        self._thread.start()
        self._first_stop.wait(5)

    def _flap(self, stopped_for: float, running_for: float) -> None:
        while not self._done.is_set():
            os.kill(self.pid, signal.SIGSTOP)
            self.flaps += 1
            self._first_stop.set()
            self._done.wait(stopped_for)
            os.kill(self.pid, signal.SIGCONT)
            self._done.wait(running_for)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        os.kill(self.pid, signal.SIGCONT)


def test_a_node_that_flaps_gets_no_new_work_while_suspect(tmp_path):
    from parl_lite.ext.cluster.master import PROBATION, SUSPECT_AFTER

    parl_lite.shutdown()
    two_nodes = Cluster(tmp_path)
    try:
        two_nodes.start(1)  # a steady node of 1 CPU
        flapping = two_nodes.add_node("flapping", cpus=3)  # more free CPUs: placement would prefer it
        connect_client(two_nodes, placement_timeout=1.0)
        flapper = Flapper(flapping["pid"], stopped_for=1.2, running_for=1.0)
        try:
            time.sleep(SUSPECT_AFTER + 0.2)
            steady = RemoteCounter(10)  # placed on the steady node, not on the one that froze
            assert steady._channel.node.address != flapping["address"]
            started = time.monotonic()
            while time.monotonic() - started < 5:  # the run goes on while the other node flaps
                assert steady.add(1) >= 11
            with pytest.raises(wire.ClusterError, match=r"1 of them suspect.* 3 free CPU"):
                RemoteCounter()  # the steady node is full; the flapping one is not handed the actor
            nodes = {node["address"]: node for node in two_nodes.status()["nodes"]}
            assert nodes[flapping["address"]]["suspect"]
            assert flapper.flaps >= 3
        finally:
            flapper.stop()
        calm = time.monotonic()
        assert true_within(lambda: not any(node["suspect"] for node in two_nodes.status()["nodes"]), PROBATION + 5)
        assert time.monotonic() - calm > PROBATION - 3  # on probation after its last late report
        assert RemoteCounter(1).add(1) == 2  # steady again: it gets work
    finally:
        parl_lite.shutdown()
        two_nodes.stop()


def test_status_and_the_status_command_show_a_clients_actors_per_node(cluster):
    connect_client(cluster)
    actors = [RemoteCounter(index) for index in range(3)]
    status = cluster.status()
    ids = {node["address"]: node["id"] for node in status["nodes"]}
    expected: dict = {}
    for actor in actors:
        node_id = ids[actor._channel.node.address]
        expected[node_id] = expected.get(node_id, 0) + 1
    client, = status["clients"]
    assert client["nodes"] == expected and client["actors"] == 3 and sorted(expected.values()) == [1, 2]
    assert not any(node["suspect"] for node in status["nodes"])
    per_node = ", ".join(f"{count} on {node}" for node, count in sorted(expected.items()))
    assert f"(3 actor(s): {per_node})" in cluster.cli("status").stdout


def test_the_calls_an_actor_served_reach_the_status_after_each_burst_of_calls(cluster):
    # the host sends its figures to the node after calls (a note over its pool connection at most
    # every 0.5 s), no file
    connect_client(cluster)
    actor = RemoteCounter()

    def served() -> int | None:  # None until the node has reported the actor
        return next((a["calls_served"] for a in cluster.status()["actors"] if a["id"] == actor._channel.actor_id),
                    None)

    calls = 1  # __init__
    for burst in (1, 5, 2):
        for _ in range(burst):
            actor.add(1)
        calls += burst
        assert true_within(lambda expected=calls: served() == expected, 10), (served(), calls)
    shown = next(a for a in cluster.status()["actors"] if a["id"] == actor._channel.actor_id)
    assert shown["rss_mb"] > 0  # its worker's memory, read at the node's first report of it
    private = [folder for entry in cluster.processes() if entry["role"] == "node"
               for folder in Path(entry["cwd"]).glob(".parl_lite_node_*")]
    assert private and not [path.name for folder in private for path in folder.glob("*.json*")]


def test_an_actor_closed_right_after_its_calls_is_reported_with_all_of_them(cluster):
    # the host returns its final figures as its serving ends (closed before it sent any note)
    connect_client(cluster)
    actor = RemoteCounter()
    actor_id = actor._channel.actor_id
    for _ in range(3):
        actor.add(1)
    actor._channel.close()

    def entry() -> dict | None:
        return next((a for a in cluster.status()["actors"] if a["id"] == actor_id), None)

    assert true_within(lambda: (entry() or {}).get("state") == "closed", 10), entry()
    assert entry()["calls_served"] == 4  # __init__ and the three calls


def test_the_scale_bench_prints_one_json_line_and_leaves_nothing(tmp_path):
    root = tmp_path / "runs"  # --root: the run's folder (the nodes' working folders) goes here
    root.mkdir()
    result = subprocess.run([sys.executable, SCALE_BENCH, "--nodes", "2", "--cpus", "2", "--actors", "6", "--threads", "2",
                             "--quiet", "0.5", "--timeout", "150", "--root", str(root)], capture_output=True, text=True,
                            timeout=170, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    figures = json.loads(lines[0])
    assert figures["placements_per_s"] > 0 and figures["actors_alive_at_latency"] == 4  # waves of 2, then 4
    assert figures["pools_cpu_ms_per_spare_host"] > 0  # the first wave's 2 hosts, built again
    first, later = figures["cpu_ms_per_placement_first_wave"], figures["cpu_ms_per_placement_later_waves"]
    for part in ("client", "master", "nodes", "pools", "machine"):  # all waves: the mean weighted by size
        assert first[part] >= 0 and later[part] >= 0
        assert abs(figures[f"cpu_ms_per_placement_{part}"] - (2 * first[part] + 4 * later[part]) / 6) < 0.01
    assert 0 <= figures["killed_node_dead_s"] < figures["stopped_node_dead_s"] < 10
    assert figures["shm_mb_per_node"] == 0 and figures["leftover_processes"] == figures["leftover_segments"] == 0
    kind = figures["root_filesystem"].removesuffix(" (no journal)")
    assert kind in [line.split()[2] for line in Path("/proc/mounts").read_text().splitlines()]
    assert kind == "ext4" or kind == figures["root_filesystem"]  # only an ext4 may lack a journal
    assert figures["shipped_files_write_ms"] > 0  # the script's folder written under --root (then removed)
    assert not list(root.iterdir())


def test_the_scale_bench_names_a_root_that_is_not_a_folder(tmp_path):
    result = subprocess.run([sys.executable, SCALE_BENCH, "--root", str(tmp_path / "missing")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "--root" in result.stderr and "missing" in result.stderr


def test_a_session_is_answered_before_the_node_beats_on_it(master, tmp_path, monkeypatch):
    # a node and a master in this process, the node beating every 0.2 ms and threads switching every
    # microsecond: a beat sent between the session's registration and its "ok" was read by the
    # client as the node's answer ("refused our files: None"), seen once in a 100-node bench run
    from parl_lite.ext.cluster.client import NodeSession
    from parl_lite.ext.cluster.node import NodeAgent

    monkeypatch.setattr(wire, "HEARTBEAT_PERIOD", 0.0002)
    monkeypatch.chdir(tmp_path)  # the node's Unix socket is named relative to it (a path holds 107 bytes)
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    node = NodeAgent(master.address, TOKEN, 1, work_dir=".")
    refused = []
    try:
        for index in range(500):
            try:
                NodeSession(node.node_id, node.address, "127.0.0.1", TOKEN, f"{index:012x}",
                            {"shipped.py": b"x = 1\n"}).close()
            except wire.ClusterError as error:
                refused.append(str(error))
    finally:
        sys.setswitchinterval(switch_interval)
        node.close()
    assert refused == []


def test_a_node_beats_on_a_session_opened_after_it_had_none(master, tmp_path, monkeypatch):
    # with no session open the node's beat sleeps; a session opened later gets its beats
    from parl_lite.ext.cluster.node import NodeAgent

    monkeypatch.chdir(tmp_path)  # the node's Unix socket is named relative to it (a path holds 107 bytes)
    node = NodeAgent(master.address, TOKEN, 1, work_dir=".")
    try:
        for index in range(2):  # the first session, then one after the node had none again
            framed, _ = wire.open_connection(node.address, TOKEN, "session", identity=wire.node_identity(node.node_id),
                                             client_id=f"{index + 1:012x}", files=[])
            try:
                framed.send(b"files", [])
                assert framed.receive_json()["ok"]
                framed.sock.settimeout(5 * wire.HEARTBEAT_PERIOD)
                assert framed.receive_json() == {"type": "alive"}
            finally:
                framed.close()
            assert true_within(lambda: not node._sessions, 10)
    finally:
        node.close()


def test_a_node_frozen_while_the_client_opens_its_session_does_not_hold_up_actors_on_other_nodes(tmp_path):
    from parl_lite.ext.cluster.master import SUSPECT_AFTER

    parl_lite.shutdown()
    two_nodes = Cluster(tmp_path)
    frozen = None
    try:
        two_nodes.start(1)
        frozen = two_nodes.add_node("freezes", cpus=3)  # more free CPUs: the first placement goes there
        connect_client(two_nodes)
        os.kill(frozen["pid"], signal.SIGSTOP)  # as it is placed on, before the master knows
        outcome: list = []
        opening = threading.Thread(target=lambda: outcome.append(_created_or_error()), daemon=True)
        opening.start()  # hangs on its session with the frozen node (until the connect timeout)
        time.sleep(SUSPECT_AFTER + 0.3)  # the frozen node is suspect now: the next actor goes elsewhere
        started = time.monotonic()
        elsewhere = RemoteCounter(5)
        assert time.monotonic() - started < wire.CONNECT_TIMEOUT / 2  # not behind the other node's session
        assert elsewhere._channel.node.address != frozen["address"] and elsewhere.add(1) == 6
        assert opening.is_alive() and outcome == []  # still waiting for the frozen node
    finally:
        if frozen is not None:
            os.kill(frozen["pid"], signal.SIGCONT)
        parl_lite.shutdown()
        two_nodes.stop()


def _created_or_error():
    try:
        return RemoteCounter(1)
    except wire.ClusterError as error:
        return error
