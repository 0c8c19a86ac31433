"""WorkQueue (parl_lite.remote.work): work to free actors, results as they finish, a dead actor's work
queued again, on real actors of the local pool (issue 44)."""
import pytest

import parl_lite
from parl_lite import remote_class
from parl_lite.remote.group import ActorGroup, ActorGroupError
from parl_lite.remote.work import Finished, WorkQueue

from remote_actors import Squarer

pytestmark = pytest.mark.timeout(120)

RemoteSquarer = remote_class(Squarer, wait=False)


@pytest.fixture
def local_pool():
    parl_lite.shutdown()
    parl_lite.connect(num_workers=2)
    yield
    parl_lite.shutdown()


def _square(actor, value: int):
    return actor.square(value)


def _drain(queue: WorkQueue) -> list[Finished]:
    finished: list[Finished] = []
    while queue.busy:
        finished += queue.next_finished(10)
    return finished


def test_every_piece_of_work_is_done_once_and_a_dead_actors_is_done_by_another(local_pool):
    actors = [RemoteSquarer(calls=1), RemoteSquarer()]
    queue = WorkQueue(actors, _square)
    for value in range(8):
        queue.submit(value)
    assert queue.idle == 0 and len(queue.running) == 2  # one call per actor at a time
    finished = _drain(queue)
    results = {done.work: done.result() for done in finished if done.lost is None}
    assert results == {value: value * value for value in range(8)}
    lost, = [done for done in finished if done.lost is not None]
    assert lost.work >= 2 and lost.requeued and lost.actor is actors[0]
    assert isinstance(lost.lost, parl_lite.ActorDiedError)
    assert queue.actors == [actors[1]]
    for actor in actors:
        actor.close()


def test_work_not_retried_is_reported_lost_and_an_error_frees_the_actor(local_pool):
    actor = RemoteSquarer(calls=3)
    queue = WorkQueue([actor], _square)
    queue.submit(-1)
    queue.submit(2)
    queue.submit(5, retry=False)
    queue.submit(1, first=True)
    finished = _drain(queue)
    assert [done.work for done in finished] == [-1, 1, 2, 5]
    with pytest.raises(ValueError, match="no square for -1"):
        finished[0].result()
    assert finished[1].result() == 1 and finished[2].result() == 4
    assert finished[3].lost is not None and not finished[3].requeued
    with pytest.raises(parl_lite.ActorDiedError):
        finished[3].result()
    with pytest.raises(ActorGroupError, match="no actor is left"):
        queue.next_finished(1)


def test_a_groups_replacement_takes_the_work_of_the_actor_it_replaces(local_pool):
    group = ActorGroup(lambda index: RemoteSquarer(calls=1 if index == 0 else None), 1, name="squarer",
                       check_every=0.1)
    try:
        queue = WorkQueue(group.start(), _square, group)
        for value in (6, 7, 8):
            queue.submit(value)
        finished = _drain(queue)
        assert {done.work: done.result() for done in finished if done.lost is None} == {6: 36, 7: 49, 8: 64}
        assert [group.index(actor) for actor in queue.actors] == [1]
        events = group.drain_events()
        assert events[0].startswith("squarer 0 lost: ") and events[1].startswith("squarer 1 made (a replacement)")
    finally:
        group.close()


def test_with_a_source_each_free_actor_gets_work_drawn_when_the_caller_asks_next(local_pool):
    drawn = iter(range(100))
    actors = [RemoteSquarer(), RemoteSquarer()]
    queue = WorkQueue(actors, _square, source=lambda: next(drawn))
    works: list[int] = []
    while len(works) < 10:
        finished = queue.next_finished(10)
        assert all(done.result() == done.work ** 2 for done in finished)
        works += [done.work for done in finished]
        # the actors just finished wait for the next call: their work follows what the caller did with these
        assert queue.idle == len(finished) and len(queue.running) == 2 - len(finished)
    assert sorted(works + queue.running) == list(range(len(works) + len(queue.running)))  # each drawn once, in order
    left = len(queue.running)
    queue.submit(50)  # starts at once on a free actor, before the source's next draw
    assert queue.running[-1] == 50
    finished = queue.wait_running(10)
    assert len(finished) == left + 1 and not queue.busy
    for actor in actors:
        actor.close()
