"""How es-train turns worker time into solver updates: one :class:`Batch` per update.

Each batch is handed to the run (:meth:`Run.update <evokit_py.training.setup.Run.update>`: the solver
told the returns, the statistics fed the observations) before it is yielded: while it runs, the
schedule is the only one to change the solver and the statistics, and the next candidates are drawn
around what its own update left. The trainer only reads them (the generation, the solution).

- ``sync`` (:func:`sync_batches`): the solver asks a whole generation, the pool evaluates it (chunks
  to whichever worker is free), the batch is that generation. Every draw depends only on (seed,
  generation, index): a resumed run ends exactly where an uninterrupted one does. If the pool loses
  its workers mid-generation, the candidates evaluated by then go into the checkpoint
  (:mod:`evokit_py.training.unfinished`) and the resumed run evaluates only the others.
- ``async`` (:func:`async_batches`): every worker gets the next candidate around the *current*
  parameters as soon as it is free (a mirrored pair goes to one worker in one call, so that both
  halves land in the same batch; past the generation's ``population_size`` candidates, further
  ones: ``solver.ask(extra_round)``); a batch is closed whenever ``population_size`` results have
  arrived, whatever version they were drawn around, and the run is updated while the workers go
  on. Candidates still running then come back one or more versions stale and go into the next
  batch (BASIC_ES corrects them). Episode start states follow the batch a candidate is expected to
  land in (results counted so far plus those running), so that with common episode seeds a stale
  candidate starts from the same states as the rest of its batch. With ``train.lookahead`` (the
  default), a candidate handed out once the next batch is complete without it (results in plus
  candidates running) is drawn around a preview of that batch's update instead, made from the
  results in so far, and normalised with the statistics that update will leave: at the update it is
  corrected by the small difference between the preview and the parameters reached, where a
  candidate around the old parameters would be corrected by a whole step. No worker waits for a
  generation's slowest episode; the order in which results arrive depends on timing, so runs are not
  reproducible. The results arrived since the last update are held in an
  :class:`~evokit_py.training.unfinished.UnfinishedGeneration` (its list), so that the checkpoint of
  a run stopped for any reason keeps them, and a resumed run's first update takes them first.
  One call per worker at a time: a second one waiting in each worker's queue gave no more
  evaluations/s but twice the candidates in flight at each update, hence more stale samples and
  more updates to a target (benchmarks/2026-11-25-es-async-against-sync.md).
  The solution's evaluations go first: the episodes of an
  :class:`~evokit_py.training.evaluations.EvaluationQueue`, one per call, to the next free workers.
"""
import dataclasses
import time
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from evokit_py.noise import SamplingInfo
from evokit_py.pool import EvaluationPool, SamplerCall, WorkersLostError
from evokit_py.sampler import aggregate
from evokit_py.seeds import candidate_episode_seeds, candidate_seeds
from evokit_py.training.evaluations import EvaluationQueue
from evokit_py.training.setup import Run
from evokit_py.training.unfinished import UnfinishedGeneration
from parl_lite.remote.work import Finished

__all__ = ["Batch", "sync_batches", "async_batches"]

_CLOSE_WAIT = 30.0  # seconds closing the async schedule waits for the evaluation episodes running (a lost
# node's never end)


@dataclass
class Batch:
    """The evaluated candidates of one update, already applied to the run.

    Attributes:
        generation: the solver's generation the batch was told at (its update made ``generation + 1``).
        infos: their sampling infos (versions may differ in async mode).
        result: :func:`aggregate` totals (``returns`` per candidate, steps, observation sums).
        seconds: wall-clock spent producing the batch and the update (the trainer's own work
            excluded in async mode).
    """
    generation: int
    infos: list[SamplingInfo]
    result: dict
    seconds: float


def _around_preview(run: Run, arrived: list[tuple[SamplingInfo, dict]], infos: list[SamplingInfo],
                    around: tuple) -> tuple[list[SamplingInfo], tuple]:
    """``infos`` moved to a preview of the next update made from the results ``arrived`` so far, and
    what to evaluate them with instead of ``around`` (basis, observation mean, std): the preview's
    basis and the statistics with those results' observations in. Both unchanged if no arrived result
    is recent enough for a preview."""
    solver = run.solver
    preview = solver.preview([info for info, _ in arrived], [float(row["returns"][0]) for _, row in arrived])
    if not preview:
        return infos, around
    stats = run.obs_stats.copy()
    for _, row in arrived:
        stats.add(row["obs_sum"][0], row["obs_sumsq"][0], float(row["steps"][0]))
    moved = [dataclasses.replace(info, version=solver.generation + 1, preview=preview) for info in infos]
    return moved, (solver.preview_basis(preview).to_dict(), *run.normalisation(stats))


def sync_batches(run: Run, pool: EvaluationPool,
                 unfinished: UnfinishedGeneration | None = None) -> Generator[Batch, None, None]:
    """One batch per generation, evaluated whole, the run updated with it (see the module docstring).
    The candidates of ``unfinished`` (a resumed run's) are not evaluated again; if the pool loses its
    workers, those evaluated by then are kept there (:class:`WorkersLostError` goes on up)."""
    solver, config = run.solver, run.config
    unfinished = unfinished if unfinished is not None else UnfinishedGeneration()
    while True:
        tick = time.perf_counter()
        mean, std = run.normalisation()
        infos = solver.ask()
        seeds = candidate_seeds(config, solver.generation, len(infos))
        try:
            result = pool.evaluate(solver.basis().to_dict(), mean, std, [i.to_list() for i in infos], seeds,
                                   unfinished.take(solver.generation, len(infos)))
        except WorkersLostError as error:
            unfinished.keep(solver.generation, error.finished)
            raise
        yield _updated(run, infos, result, tick)


def _updated(run: Run, infos: list[SamplingInfo], result: dict, tick: float) -> Batch:
    """The batch of ``infos`` and their ``result`` once the run has taken it (samples older than
    the solver keeps are dropped and counted); its seconds counted from ``tick``."""
    generation = run.solver.generation
    run.update(infos, result, stale="drop")
    return Batch(generation, infos, result, time.perf_counter() - tick)


def async_batches(run: Run, pool: EvaluationPool, evaluations: EvaluationQueue | None = None,
                  unfinished: UnfinishedGeneration | None = None) -> Generator[Batch | None, None, None]:
    """A batch whenever ``population_size`` results arrived, the run updated with it, workers never
    idle between updates (see the module docstring); the episodes of ``evaluations`` go first, and
    ``None`` comes as soon as one of them reached its target (the trainer can stop without waiting
    for the next batch). The results arrived and not yet in an update are ``unfinished`` 's (those
    a resumed run's checkpoint held go first), whenever the generator is suspended or ended.
    Closing the generator waits for the evaluation episodes still running and records them; the
    candidates still running are left to finish on their own (no update would take their results)."""
    schedule = _AsyncSchedule(run, pool, evaluations if evaluations is not None else EvaluationQueue(),
                              unfinished if unfinished is not None else UnfinishedGeneration())
    pool.draw_from(schedule.next_call)
    try:
        tick = time.perf_counter()
        while True:
            finished = pool.next_finished()
            if schedule.take_evaluations(finished):
                yield None
            schedule.take_candidates(finished)
            while (batch := schedule.full_batch()) is not None:
                yield _updated(run, *batch, tick)
                tick = time.perf_counter()
    finally:
        for done in pool.wait_running(_CLOSE_WAIT, which=lambda call: call.candidates == 0):
            if done.lost is None and done.error is None:
                schedule.evaluations.record(done.work.purpose, done.value)


class _AsyncSchedule:
    """What :func:`async_batches` keeps between its steps: the candidates of the current version not
    handed out yet and the results arrived since the last update (the list ``unfinished`` holds: a
    checkpoint keeps them); the calls running are the pool's."""

    def __init__(self, run: Run, pool: EvaluationPool, evaluations: EvaluationQueue,
                 unfinished: UnfinishedGeneration):
        self.run, self.pool, self.evaluations = run, pool, evaluations
        self.lookahead = run.config.train.lookahead and run.solver.can_preview
        self.pending: deque = deque()  # (index, infos) of the current version not handed out yet, a call each
        self.version = -1  # the solver version ``basis`` is of (-1: none yet)
        self.basis: dict = {}
        self.extra_round = 0
        self.arrived = unfinished.hold(run.solver)  # (info, its row of the result), in the order they arrived
        self.normalised: tuple[int, float] | None = None  # (version, observations counted) mean and std are of
        self.mean: np.ndarray | None = None
        self.std: np.ndarray | None = None

    def next_call(self) -> SamplerCall:
        """The call of a worker free: the next evaluation episode if one waits, else the next
        candidates of the solver's current version (a new version starts its candidates anew)."""
        solver, stats = self.run.solver, self.run.obs_stats
        if self.version != solver.generation:  # the start, or an update moved the solver
            self.version, self.basis, self.extra_round, self.pending = (solver.generation, solver.basis().to_dict(),
                                                                        0, deque())
        if self.normalised != (self.version, stats.count):  # the start, or an update fed the statistics
            self.normalised = self.version, stats.count
            self.mean, self.std = self.run.normalisation()
        episode = self.evaluations.next_call()
        return episode if episode is not None else self._next_candidates()

    def _next_candidates(self) -> SamplerCall:
        """The next call's candidates (a mirrored pair whole): past the generation's, further ones
        (``solver.ask(extra_round)``); with the episode seeds of the batch they are expected to land
        in, and around a preview of the next update once that batch is complete without them
        (``train.lookahead``)."""
        solver, config = self.run.solver, self.run.config
        if not self.pending:
            infos = solver.ask(self.extra_round)
            size, group = len(infos), solver.group_size
            self.pending.extend((size * self.extra_round + i, infos[i:i + group]) for i in range(0, size, group))
            self.extra_round += 1
        index, infos = self.pending.popleft()
        ahead = len(self.arrived) + sum(call.candidates for call in self.pool.running())
        batch_generation = self.version + ahead // solver.population_size
        seeds = [candidate_episode_seeds(config, batch_generation, index + k) for k in range(len(infos))]
        around = self.basis, self.mean, self.std
        if self.lookahead and ahead >= solver.population_size and self.arrived:
            infos, around = _around_preview(self.run, self.arrived, infos, around)
        return SamplerCall((*around, [info.to_list() for info in infos], seeds), infos, len(infos))

    def take_evaluations(self, finished: list[Finished[SamplerCall]]) -> bool:
        """Record the evaluation episodes among ``finished`` (a lost worker's goes back in the queue);
        whether an evaluation not taken yet reached its target."""
        for done in finished:
            if done.work.candidates == 0:
                if done.lost is not None:
                    self.evaluations.requeue(done.work.purpose)
                else:
                    self.evaluations.record(done.work.purpose, done.result())
        return self.evaluations.reached_target()

    def take_candidates(self, finished: list[Finished[SamplerCall]]) -> None:
        """Take the results of the candidates among ``finished``, in the order they ended (a lost
        worker's candidates are not: further ones are drawn)."""
        for done in finished:
            if done.work.candidates > 0 and done.lost is None:
                result = done.result()
                self.arrived += [(info, {key: value[k:k + 1] for key, value in result.items()})
                                 for k, info in enumerate(done.work.purpose)]

    def full_batch(self) -> tuple[list[SamplingInfo], dict] | None:
        """The infos and :func:`aggregate` totals of the next ``population_size`` results arrived,
        taken out of them; None while fewer arrived."""
        size = self.run.solver.population_size
        if len(self.arrived) < size:
            return None
        batch = self.arrived[:size]
        del self.arrived[:size]
        return ([info for info, _ in batch],
                aggregate({key: np.concatenate([row[key] for _, row in batch]) for key in batch[0][1]}))
