"""ActorGroup (parl_lite.remote.group): actors replaced when they die and added when a cluster has room,
on the local pool and on a cluster of real nodes started through ``parl-lite`` (issue 26)."""
import os
import signal
import time

import pytest

import parl_lite
from parl_lite import remote_class
from parl_lite.remote.group import ActorGroup, ActorGroupError

from backends import Cluster, connect_client
from remote_actors import Counter
from remote_helpers import wait_for_exit

pytestmark = pytest.mark.timeout(150)

RemoteCounter = remote_class(Counter)


def _make(index: int):
    return RemoteCounter(100 * index)


def _wait_for_new(group: ActorGroup, count: int, timeout: float) -> list:
    """The next ``count`` actors the group makes (within ``timeout`` seconds)."""
    new, deadline = [], time.monotonic() + timeout
    while len(new) < count and time.monotonic() < deadline:
        group.wait_for_change(0.2)
        new += group.take_new()
    assert len(new) == count, f"{len(new)} new actor(s) of {count} within {timeout} s: {group.drain_events()}"
    return new


def _lose(group: ActorGroup, actor) -> None:
    """Call ``actor``, which died: it raises ActorDiedError, and the group is told."""
    with pytest.raises(parl_lite.ActorDiedError) as died:
        actor.add(1)
    group.lost(actor, died.value)


def test_a_dead_actor_of_the_local_pool_is_replaced_and_the_group_stays_its_size():
    parl_lite.shutdown()
    parl_lite.connect(num_workers=2)
    group = ActorGroup(_make, size=2, max_size=4, check_every=0.1, name="counter")
    try:
        first, second = group.start()
        assert (first.add(0), second.add(0)) == (0, 100)
        pid = first.pid()
        os.kill(pid, signal.SIGKILL)
        assert wait_for_exit(pid, 10)
        _lose(group, first)
        replacement, = _wait_for_new(group, 1, timeout=20)
        assert group.index(replacement) == 2 and replacement.add(1) == 201  # a new index: its own seed
        with pytest.raises(KeyError, match="not an actor of this counter group"):
            group.index(first)  # forgotten once lost (the group kept every lost actor's index)
        events = group.drain_events()
        assert events[0].startswith("counter 0 lost: ") and "1 left, making another" in events[0]
        assert events[1] == "counter 2 made (a replacement): 2 of at most 4"
        time.sleep(0.5)  # five looks at the backend: the local pool does not say it has room
        assert group.take_new() == [] and len(group.actors) == 2
    finally:
        group.close()
        parl_lite.shutdown()


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="max_size"):
        ActorGroup(_make, size=3, max_size=2, backend=object())
    with pytest.raises(ValueError, match="size must be at least 1"):
        ActorGroup(_make, size=0, backend=object())


def _node_of(cluster: Cluster, actor) -> dict:
    address = actor._channel.node.address
    return next(entry for entry in cluster.processes() if entry["role"] == "node" and entry["address"] == address)


def _kill_node_of(cluster: Cluster, *actors) -> None:
    """SIGKILL the node hosting ``actors`` and wait until it and their workers are gone."""
    pids = [actor.pid() for actor in actors]
    node = _node_of(cluster, actors[0])["pid"]
    os.kill(node, signal.SIGKILL)
    assert all(wait_for_exit(pid, 10) for pid in [node, *pids])


def test_the_group_grows_when_a_node_joins_and_replaces_an_actor_of_a_killed_node(small_cluster):
    connect_client(small_cluster)
    group = ActorGroup(_make, size=1, max_size=3, check_every=0.2, name="counter")
    try:
        first, = group.start()
        time.sleep(0.5)
        assert group.take_new() == []  # no room: the only node's CPU is taken
        small_cluster.add_node("joins", cpus=2)
        grown = _wait_for_new(group, 2, timeout=30)
        assert {_node_of(small_cluster, actor)["cwd"] for actor in grown} == {str(small_cluster.folder / "joins")}
        assert [actor.add(1) for actor in grown] == [101, 201]
        assert sum("room appeared" in event for event in group.drain_events()) == 2
        # their node dies: the group keeps its size, 1 (the first one is alive): none is made
        _kill_node_of(small_cluster, *grown)
        _lose(group, grown[0])
        _lose(group, grown[1])
        assert len(group.actors) == 1
        time.sleep(1.0)
        assert group.take_new() == []  # and no room for more: the first node has 1 CPU, taken
        assert first.add(1) == 1
        _kill_node_of(small_cluster, first)  # no node left: the group tries until one joins
        _lose(group, first)
        small_cluster.add_node("third", cpus=1)
        replacement, = _wait_for_new(group, 1, timeout=30)
        assert _node_of(small_cluster, replacement)["cwd"] == str(small_cluster.folder / "third")
        assert replacement.add(1) == 100 * group.index(replacement) + 1
    finally:
        group.close()


def test_with_no_actor_and_no_room_the_group_fails_after_its_capacity_wait(small_cluster):
    connect_client(small_cluster, placement_timeout=0.5)
    group = ActorGroup(_make, size=1, check_every=0.2, capacity_wait=2.0, name="counter")
    try:
        only, = group.start()
        _kill_node_of(small_cluster, only)
        _lose(group, only)
        lost = time.monotonic()
        with pytest.raises(ActorGroupError, match=r"no counter left, and none could be made for 2 s") as failed:
            while time.monotonic() - lost < 20:
                group.wait_for_change(0.2)
                group.take_new()
        assert time.monotonic() - lost >= 2.0
        assert "has no node" in str(failed.value.__cause__)  # why the last try failed
    finally:
        group.close()


def test_the_group_fails_soon_after_the_cluster_master_is_killed(small_cluster):
    connect_client(small_cluster)
    group = ActorGroup(_make, size=1, check_every=0.2, name="counter")
    try:
        only, = group.start()
        master = next(entry for entry in small_cluster.processes() if entry["role"] == "master")
        os.kill(master["pid"], signal.SIGKILL)
        killed = time.monotonic()
        with pytest.raises(ActorGroupError, match=r"the counters' backend cannot be reached: .*master .* is gone"):
            while time.monotonic() - killed < 20:
                group.wait_for_change(0.2)
                group.take_new()
        assert time.monotonic() - killed < 2.0
        assert only.add(1) == 1  # its actors still serve (their node waits for the master): the caller decides
    finally:
        group.close()
