"""What a node costs and how the master treats nodes that fail, flap or do not fit (issue 26): real
masters and nodes started through ``parl-lite`` on 127.0.0.1."""
import glob
import os
import subprocess
import sys
import textwrap
import time

import pytest

import parl_lite
from parl_lite.remote.status import read_status

from backends import Cluster
from test_cluster import RemoteCounter, _connect, _wait_until, cluster  # noqa: F401 (cluster: a fixture)

pytestmark = pytest.mark.timeout(180)


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
    assert _wait_until(lambda: len(_actor_hosts(node["pid"])) == 2, 20)
    # arguments reach a node's actors over TCP: its pool keeps no shared memory for them (it kept
    # 64 MB per node, 6.4 GB for 100 nodes)
    assert glob.glob(f"/dev/shm/parl_lite_{node['pid']}_*") == []
    _connect(cluster)
    actors = [RemoteCounter(index) for index in range(4)]
    assert [actor.add(1) for actor in actors] == [1, 2, 3, 4]
    hosts = _actor_hosts(node["pid"])
    assert len(hosts) == 2  # taken by the two actors here, none spare: the node has 2 CPUs
    for actor in actors:
        actor.close()
    # the actors' workers end and spares take their place
    assert _wait_until(lambda: len(_actor_hosts(node["pid"])) == 2 and
                       not ({host["pid"] for host in _actor_hosts(node["pid"])} & {h["pid"] for h in hosts}), 20)


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
