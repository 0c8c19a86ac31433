"""One queue of remote work: pieces of work handed to whichever actor is free, their results as
they finish, and the work of an actor that died queued again for the others (Ray's
``ActorPool.submit`` / ``get_next_unordered``, with the actors' losses handled).

::

    queue = WorkQueue(group.start(), lambda actor, chunk: actor.evaluate(chunk), group=group)
    for chunk in chunks:
        queue.submit(chunk)                   # starts now on a free actor, or when one is free
    while queue.busy:
        for done in queue.next_finished(timeout=0.5):
            if done.lost is None:
                results[done.work] = done.result()
            # else: the actor died; its chunk is queued again (retry=True) for the actors left

The queue's actors are those it was given and, with an :class:`parl_lite.remote.group.ActorGroup`,
the ones the group makes afterwards (replacements, and growth while the backend has room): each is
taken on the next :meth:`WorkQueue.next_finished` and gets work from then on. An actor that died
is told to the group, which makes another. Work submitted with ``retry=False`` (a rollout with
weights that will be stale, a candidate drawn around parameters that moved on) is not queued again:
its loss is only reported. With a ``source`` (:meth:`WorkQueue.draw_from`), an actor free while
nothing is queued gets the work ``source()`` draws when :meth:`WorkQueue.next_finished` is called
next, so every actor is kept busy (the asynchronous loops); drawn then, not the moment the actor
finished, the work follows what the caller did with the results just returned (an update of the
weights, of the solver). One call per actor at a time: a call queued in an actor behind another
would wait there when another actor is free.

Nothing here imports paddle: the RL trainers and evokit_py's schedules use the same queue.
"""
import concurrent.futures
import queue
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from parl_lite.remote.errors import ActorDiedError
from parl_lite.remote.group import ActorGroup, ActorGroupError

__all__ = ["Finished", "WorkQueue"]

W = TypeVar("W")


@dataclass
class Finished(Generic[W]):
    """A piece of work whose call ended.

    Attributes:
        work: what was submitted.
        actor: the actor that ran it.
        value: what the call returned.
        error: what the call raised, other than the actor's death (the actor is alive and free again).
        lost: how the actor died, if it did (``requeued`` says whether the work went back in the queue).
        requeued: whether the work is queued again for another actor.
    """
    work: W
    actor: Any
    value: Any = None
    error: BaseException | None = None
    lost: ActorDiedError | None = None
    requeued: bool = False

    def result(self) -> Any:
        """The call's value; raises what it raised, or the actor's death."""
        if self.error is not None:
            raise self.error
        if self.lost is not None:
            raise self.lost
        return self.value


@dataclass
class _Running(Generic[W]):
    work: W
    actor: Any
    retry: bool


class WorkQueue(Generic[W]):
    """Work handed to free actors (see the module docstring).

    Args:
        actors: the actors to start with.
        call: ``call(actor, work)`` starts ``work`` on ``actor`` and returns its future; it runs
            when the work starts (so what it reads, e.g. the latest weights, is read then).
        group: the group the actors come from, told of the actors that die and asked for the ones it
            made since; without one the actors are only those given, and when none is left
            :meth:`next_finished` raises :class:`ActorGroupError`.
        source: see :meth:`draw_from`.
    """

    def __init__(self, actors: Sequence[Any], call: Callable[[Any, W], concurrent.futures.Future],
                 group: ActorGroup | None = None, source: Callable[[], W] | None = None) -> None:
        self._call, self._group, self._source = call, group, source
        self._actors: list[Any] = list(actors)
        self._idle: list[Any] = list(actors)
        self._queued: deque[tuple[W, bool]] = deque()
        self._running: dict[concurrent.futures.Future, _Running[W]] = {}
        self._finished: queue.SimpleQueue = queue.SimpleQueue()  # futures, as their done-callbacks put them

    @property
    def actors(self) -> list[Any]:
        """The actors in use, idle or not."""
        return list(self._actors)

    @property
    def idle(self) -> int:
        """Actors with nothing to do: as many pieces of work submitted now start at once."""
        return len(self._idle)

    @property
    def running(self) -> list[W]:
        """The work started and not finished, oldest first."""
        return [running.work for running in self._running.values()]

    @property
    def busy(self) -> bool:
        """Whether work is queued or running."""
        return bool(self._queued or self._running)

    def draw_from(self, source: Callable[[], W] | None) -> None:
        """From the next :meth:`next_finished` on, an actor free while nothing is queued gets the work
        ``source()`` draws then (not queued again if the actor dies: the next one drawn replaces it);
        None: free actors wait for :meth:`submit`."""
        self._source = source

    def submit(self, work: W, *, retry: bool = True, first: bool = False) -> None:
        """Queue ``work``: it starts on the next free actor, now if one is.

        Args:
            retry: whether the work goes back in the queue (first out) when its actor dies; else
                its loss is only reported.
            first: put it before the work queued already.
        """
        if first:
            self._queued.appendleft((work, retry))
        else:
            self._queued.append((work, retry))
        self._start_queued(draw=False)

    def next_finished(self, timeout: float) -> list[Finished[W]]:
        """Wait up to ``timeout`` seconds for calls to end; those that did, in the order they ended
        (none if none did). The actors the group made meanwhile are taken, and every free actor is
        given work first (queued, else drawn from the source).

        Raises:
            ActorGroupError: the actors' group cannot go on (its backend is gone, or it has no actor
                and could make none in time); without a group: no actor is left.
        """
        self._take_new()
        if not self._running:
            if not self._actors:
                self._wait_for_actors(timeout)
            return []
        try:
            futures = [self._finished.get(timeout=timeout)]
        except queue.Empty:
            return []
        while not self._finished.empty():
            futures.append(self._finished.get())
        finished = [self._end(future) for future in futures]
        self._start_queued(draw=False)
        return finished

    def drop_queued(self) -> list[W]:
        """Take back the work not started yet."""
        dropped = [work for work, _ in self._queued]
        self._queued.clear()
        return dropped

    def wait_running(self, timeout: float, which: Callable[[W], bool] | None = None) -> list[Finished[W]]:
        """Wait up to ``timeout`` seconds for the work running that ``which`` selects (all by default) to
        end (an actor on a lost node never answers); the calls of it that ended, lost ones reported but
        not queued again. Nothing queued is started any more."""
        self._queued.clear()
        waited = [future for future, running in self._running.items() if which is None or which(running.work)]
        concurrent.futures.wait(waited, timeout=timeout)
        return [self._end(future, retry=False) for future in waited if future.done()]

    # --- inside ------------------------------------------------------------------------------------
    def _start_queued(self, draw: bool = True) -> None:
        """Start the queued work on free actors, then, if ``draw``, the source's."""
        while self._idle and (self._queued or (draw and self._source is not None)):
            actor = self._idle.pop(0)
            if self._queued:
                work, retry = self._queued.popleft()
            else:
                assert self._source is not None
                work, retry = self._source(), False
            try:
                future = self._call(actor, work)
            except ActorDiedError as error:  # found dead before the call went out
                future = concurrent.futures.Future()
                future.set_exception(error)
            self._running[future] = _Running(work, actor, retry)
            future.add_done_callback(self._finished.put)

    def _end(self, future: concurrent.futures.Future, retry: bool = True) -> Finished[W]:
        running = self._running.pop(future)
        error = future.exception()
        if isinstance(error, ActorDiedError):
            self._lose(running.actor, error)
            requeued = retry and running.retry
            if requeued:
                self._queued.appendleft((running.work, running.retry))
            return Finished(running.work, running.actor, lost=error, requeued=requeued)
        self._idle.append(running.actor)
        if error is not None:
            return Finished(running.work, running.actor, error=error)
        return Finished(running.work, running.actor, future.result())

    def _lose(self, actor: Any, error: ActorDiedError) -> None:
        self._actors = [kept for kept in self._actors if kept is not actor]
        if self._group is not None:
            self._group.lost(actor, error)

    def _take_new(self) -> None:
        if self._group is not None:
            new = self._group.take_new()
            self._actors += new
            self._idle += new
        self._start_queued()

    def _wait_for_actors(self, timeout: float) -> None:
        """No actor is left: wait for the group to make one."""
        if self._group is None:
            raise ActorGroupError("no actor is left to run the work")
        self._group.wait_for_change(timeout)
        self._take_new()
