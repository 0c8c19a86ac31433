"""Where candidates are evaluated: :class:`Sampler` s in this process or as ``parl_lite`` actors.

The trainer only calls :meth:`EvaluationPool.evaluate`. Candidates go out in small chunks, the next
chunk to whichever worker finishes first, so that episodes of very different lengths (CartPole: 10
to 500 steps) keep every worker busy. Results are put back in candidate order and summed per
candidate, so the outcome does not depend on the number of workers or on who ran what. The
asynchronous mode hands out calls of its own (:meth:`EvaluationPool.draw_from`) and takes them as
they finish (:meth:`EvaluationPool.next_finished`).

The calls go through one :class:`parl_lite.remote.work.WorkQueue` over the workers, an
:class:`parl_lite.remote.group.ActorGroup` for the remote ones: a worker that dies (its node was lost)
is dropped, its chunk goes back in the queue for the workers left, and the group makes another on a
node that is alive; while a cluster has free CPUs (a node joined), workers are added, up to
``train.max_workers``. Since a candidate's episodes depend only on its sampling info and seeds, a
chunk evaluated again gives the same result: a lost worker changes nothing in a sync run's outcome.
What happened is kept as lines (:meth:`EvaluationPool.drain_events`) and counted
(:attr:`EvaluationPool.losses`). With no worker left and none made for ``train.capacity_wait``
seconds, or when the backend cannot be reached any more (a cluster's master is gone), the pool raises
:class:`WorkersLostError`.
"""
import concurrent.futures
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evokit_py.config import ESConfig
from evokit_py.limits import check_workers
from evokit_py.noise import NoiseSpec
from evokit_py.sampler import Sampler, aggregate
from parl_lite.remote.api import connect, remote_class
from parl_lite.remote.group import ActorGroup, ActorGroupError
from parl_lite.remote.work import Finished, WorkQueue

__all__ = ["EvaluationPool", "Losses", "SamplerCall", "WorkersLostError"]

CHUNKS_PER_WORKER = 4  # more chunks balance better; each costs one remote call (~0.1-0.2 ms)
LOOK_EVERY = 0.5  # seconds between two looks at the worker group while no result arrives


class WorkersLostError(RuntimeError):
    """The pool cannot go on: no worker is left and none could be made in time, or the backend is gone.

    Attributes:
        finished: of the :meth:`EvaluationPool.evaluate` call it ended, the results of the candidates
            evaluated by then (candidate index -> its row of the result).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.finished: dict[int, dict] = {}


@dataclass(eq=False)
class SamplerCall:
    """One call of :meth:`Sampler.evaluate`.

    Attributes:
        args: its arguments: basis, observation mean and std, sampling infos, episode seeds.
        purpose: the caller's note of what it is for (a chunk's index, the candidates' infos, an
            evaluation episode).
        candidates: the candidates it evaluates (0: an episode of the solution's evaluation).
    """
    args: tuple
    purpose: Any
    candidates: int


@dataclass
class Losses:
    """Workers lost since the last :meth:`EvaluationPool.drain_events`.

    Attributes:
        workers: workers lost.
        candidates: candidates whose evaluation was lost with them (re-queued in sync mode, re-drawn
            in async mode).
        where: what the errors said of each lost worker (its node, on a cluster).
        workers_left: the workers in use right after the last loss.
        workers_now: the workers in use when the losses were taken (replacements made meanwhile included).
    """
    workers: int = 0
    candidates: int = 0
    where: list[str] = field(default_factory=list)
    workers_left: int = 0
    workers_now: int = 0


class EvaluationPool:
    """``workers`` samplers behind one ``evaluate`` call.

    Args:
        config: the ES config (``train.max_workers`` and ``train.capacity_wait`` for the remote workers).
        policy_bytes: the serialized weights-as-inputs policy graph.
        noise: where workers find the noise.
        workers: number of worker processes (remote backend).
        backend: ``"remote"`` (one ``parl_lite`` actor per worker process) or ``"inprocess"``
            (one sampler in this process, whatever ``workers`` says; for tests and debugging).
        address: where the remote samplers run, as ``parl_lite.connect`` takes it (``host:port``
            of a parl_lite cluster, ``ray://local``, ...; default: the local pool).

    Raises:
        ConfigError: more workers than the machine or the cluster takes (:mod:`evokit_py.limits`).
    """

    def __init__(self, config: ESConfig, policy_bytes: bytes, noise: NoiseSpec, workers: int,
                 backend: str = "remote", address: str | None = None):
        if workers < 1:
            raise ValueError(f"train.workers must be >= 1, got {workers}")
        if backend not in ("remote", "inprocess"):
            raise ValueError(f"backend must be 'remote' or 'inprocess', got {backend!r}")
        self.backend = backend
        self.losses = Losses()
        self._events: list[str] = []
        self._group: Any = None
        if backend == "remote":
            hp = config.train
            connection = connect(address)
            check_workers(workers, connection.capacity(), hp.oversubscribe)
            # a cluster's placement of a sampler waits for a free CPU as long as the run waits for capacity
            remote_sampler: Any = remote_class(Sampler, wait=False, placement_timeout=hp.capacity_wait)
            self._group = ActorGroup(lambda index: remote_sampler(config.worker_config(), policy_bytes, noise), workers,
                                     hp.max_workers or workers, name="sampler", capacity_wait=hp.capacity_wait,
                                     backend=connection)
            samplers = self._group.start()
        else:
            # one is enough: they would run in turn
            samplers = [Sampler(config.worker_config(), policy_bytes, noise)]
        self._queue: WorkQueue[SamplerCall] = WorkQueue(samplers, self._start_call, self._group)

    def evaluate(self, basis: dict, obs_mean: np.ndarray | None, obs_std: np.ndarray | None,
                 infos: Sequence[list[int]], seeds: Sequence[list[int]],
                 finished: dict[int, dict] | None = None) -> dict:
        """Evaluate every candidate (see :meth:`Sampler.evaluate`); returns :func:`aggregate` totals.

        Args:
            finished: the results of some candidates, known already (candidate index -> its row of
                the result, as :attr:`WorkersLostError.finished` holds them): the others are evaluated.

        Raises:
            WorkersLostError: see the module docstring; its ``finished`` holds the results of the
                candidates evaluated by then (those of ``finished`` included).
        """
        known = finished or {}
        todo: Sequence[int] = [i for i in range(len(infos)) if i not in known] if known else range(len(infos))
        chunks: list[Sequence[int]] = []
        if self.backend == "inprocess":
            chunks, results = [todo], [self.workers[0].evaluate(basis, obs_mean, obs_std, [infos[i] for i in todo],
                                                                [seeds[i] for i in todo])]
        else:
            try:
                chunks = self._chunks(todo)
                results = self._evaluate_chunks(chunks, basis, obs_mean, obs_std, infos, seeds)
            except WorkersLostError as error:
                error.finished = {**known, **_rows(chunks, error.finished)}
                raise
        if not known:  # the chunks cover the candidates in order
            return aggregate({key: np.concatenate([result[key] for result in results]) for key in results[0]})
        rows = {**known, **_rows(chunks, dict(enumerate(results)))}
        return aggregate({key: np.concatenate([rows[i][key] for i in range(len(infos))]) for key in rows[0]})

    def _chunks(self, todo: Sequence[int]) -> list[Sequence[int]]:
        """``todo`` (candidate indices) cut into about :data:`CHUNKS_PER_WORKER` chunks per worker."""
        size = max(1, math.ceil(len(todo) / (CHUNKS_PER_WORKER * max(1, len(self.workers)))))
        return [todo[start:start + size] for start in range(0, len(todo), size)]

    def _evaluate_chunks(self, chunks: list[Sequence[int]], basis: dict, obs_mean: np.ndarray | None,
                         obs_std: np.ndarray | None, infos: Sequence[list[int]],
                         seeds: Sequence[list[int]]) -> list[dict]:
        """Each chunk's result, in order: the next chunk to whichever worker is free, a lost
        worker's chunk back to the front of the queue.

        Raises:
            WorkersLostError: its ``finished`` holds the results by chunk index (not candidate).
        """
        calls = [SamplerCall((basis, obs_mean, obs_std, [infos[i] for i in chunk], [seeds[i] for i in chunk]), index,
                             len(chunk)) for index, chunk in enumerate(chunks)]
        mine = {id(call) for call in calls}  # a call of an earlier evaluate still running is not one of these
        results: dict[int, dict] = {}  # chunk index -> its result
        for call in calls:
            self._queue.submit(call)
        try:
            while len(results) < len(calls):
                for done in self.next_finished():
                    if done.lost is None and id(done.work) in mine:
                        results[done.work.purpose] = done.result()
        except BaseException as error:
            self._queue.drop_queued()
            if isinstance(error, WorkersLostError):
                error.finished = results
            raise
        return [results[index] for index in range(len(chunks))]

    @property
    def workers(self) -> list[Any]:
        """The samplers in use."""
        return self._queue.actors

    @property
    def size(self) -> int:
        """How many calls can run at once now (1 for the in-process backend)."""
        return len(self.workers)

    def running(self) -> list[SamplerCall]:
        """The calls started and not finished, oldest first."""
        return self._queue.running

    def draw_from(self, source: Callable[[], SamplerCall] | None) -> None:
        """From the next :meth:`next_finished` on, a worker free while no chunk is queued gets the call
        ``source()`` draws then (never evaluated again if its worker is lost); None: no more."""
        self._queue.draw_from(source)

    def next_finished(self) -> list[Finished[SamplerCall]]:
        """The calls that ended within :data:`LOOK_EVERY` seconds, each worker free given a call first
        (the workers made meanwhile taken); a lost worker's counted (:meth:`drain_events`).

        Raises:
            WorkersLostError: see the module docstring.
        """
        try:
            finished = self._queue.next_finished(LOOK_EVERY)
        except ActorGroupError as error:
            raise WorkersLostError(str(error)) from error
        for done in finished:
            if done.lost is not None:
                self._count_loss(done.lost, done.work.candidates)
        return finished

    def wait_running(self, timeout: float, which: Callable[[SamplerCall], bool]) -> list[Finished[SamplerCall]]:
        """Wait up to ``timeout`` seconds for the calls running that ``which`` selects (a lost node's never
        end); those that ended. Nothing is queued or drawn any more."""
        self._queue.draw_from(None)
        return self._queue.wait_running(timeout, which)

    def _start_call(self, sampler: Any, call: SamplerCall) -> concurrent.futures.Future:
        if self.backend == "remote":
            return sampler.evaluate(*call.args)
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(sampler.evaluate(*call.args))
        return future

    def _count_loss(self, error: BaseException, candidates: int) -> None:
        """A worker died (``error`` says how) with the evaluation of ``candidates`` candidates (the
        queue dropped it and told the group, which makes another in the background)."""
        self.losses.workers += 1
        self.losses.candidates += candidates
        where = _where(error)
        self.losses.where.append(where)
        self.losses.workers_left = len(self.workers)
        self._events.append(f"{candidates} candidate(s) in flight on the sampler lost ({where}); "
                            f"{len(self.workers)} worker(s) left")

    def drain_events(self) -> tuple[list[str], Losses]:
        """What happened to the workers since the last call: lines for the log (oldest first), and
        the losses counted."""
        events, self._events = self._events, []
        if self._group is not None:
            events += self._group.drain_events()
        losses, self.losses = self.losses, Losses()
        losses.workers_now = len(self.workers)
        return events, losses

    def close(self) -> None:
        """Close every sampler at once: a remote actor ends after the calls already sent (their
        results are not waited for), an in-process sampler releases its environment."""
        if self._group is not None:
            self._group.close()
        else:
            for worker in self.workers:
                worker.release()
        self._queue = WorkQueue([], self._start_call)


def _where(error: BaseException) -> str:
    """Where a lost worker was, as its error says: ``node HOST:PORT`` (a cluster's node that is
    gone), else its process (``pid N ...``)."""
    node = re.search(r"its node (\S+) is gone", str(error))
    process = re.search(r"\((?:worker )?(pid [^)]*)\)", str(error))
    return f"node {node.group(1)}" if node else (process.group(1) if process else "unknown")


def _rows(chunks: list[Sequence[int]], results: dict[int, dict]) -> dict[int, dict]:
    """Candidate index -> its row, from the ``results`` of some ``chunks`` (by chunk index)."""
    return {candidate: {key: value[k:k + 1] for key, value in result.items()}
            for index, result in results.items() for k, candidate in enumerate(chunks[index])}
