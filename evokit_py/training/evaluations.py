"""The evaluations of the solution: every ``train.eval_every`` generations, its mean return over
``train.eval_episodes`` episodes (seeds of their own, no noise), with the observation statistics of
the moment it was requested.

In sync mode an evaluation runs at once, on the whole pool. In async mode it goes through an
:class:`EvaluationQueue`: the async schedule hands its episodes, one per call, to the next free
workers ahead of any candidate, and its mean return comes back during a later update. An
evaluation done in between would be a barrier: both workers would finish their candidates, play
the evaluation episodes and wait for each other after every update.

An evaluation that reaches ``train.target_return`` is confirmed (:meth:`Evaluations.confirm`) on
``train.confirm_episodes`` fresh episodes, played at once in both modes: it happens once or a few
times in a run.
"""
from collections import deque
from dataclasses import dataclass

import numpy as np

from evokit_py.basis import Basis
from evokit_py.noise import SamplingInfo
from evokit_py.obs_stats import ObsStats
from evokit_py.pool import EvaluationPool, SamplerCall
from evokit_py.seeds import confirmation_seeds, evaluation_seeds
from evokit_py.training.setup import Run

__all__ = ["EVALUATION_INFO", "EvaluationRequest", "EvaluationQueue", "Evaluations"]

EVALUATION_INFO = SamplingInfo(0, 0, 0).to_list()  # the solution itself (sign 0: no noise)

EvaluationRequest = tuple[dict, np.ndarray | None, np.ndarray | None, list[list[int]]]
"""An evaluation of a solution: the basis (its centre), the observation mean and std, the episode seeds."""


@dataclass
class _Evaluation:
    basis: dict
    obs_mean: np.ndarray | None
    obs_std: np.ndarray | None
    seeds: list[list[int]]  # the episode seeds, one episode each
    returns: dict[int, float]  # episode index -> its return, as they arrive


class EvaluationQueue:
    """Evaluations of the solution that ``async_batches`` runs between candidates, an episode per call,
    ahead of any candidate; the trainer requests them and collects the finished ones.
    """

    def __init__(self, target: float | None = None) -> None:
        self.target = target  # a finished evaluation at least this good ends a wait at once (``async_batches``)
        self._evaluations: dict[int, _Evaluation] = {}  # generation -> evaluation, finished ones removed
        self._waiting: deque[tuple[int, int]] = deque()  # (generation, episode index) not handed out yet
        self._finished: list[tuple[int, float]] = []

    def request(self, generation: int, basis: dict, obs_mean: np.ndarray | None, obs_std: np.ndarray | None,
                seeds: list[list[int]]) -> None:
        """Evaluate the centre of ``basis`` (the solution after ``generation``) on one episode per seed."""
        self._evaluations[generation] = _Evaluation(basis, obs_mean, obs_std, seeds, {})
        self._waiting.extend((generation, index) for index in range(len(seeds)))

    def next_call(self) -> SamplerCall | None:
        """The call of the next waiting episode (its ``purpose`` the episode, its ``candidates`` 0);
        ``None`` when none waits."""
        if not self._waiting:
            return None
        generation, index = self._waiting.popleft()
        evaluation = self._evaluations[generation]
        return SamplerCall((evaluation.basis, evaluation.obs_mean, evaluation.obs_std, [EVALUATION_INFO],
                            [evaluation.seeds[index]]), (generation, index), 0)

    def requeue(self, episode: tuple[int, int]) -> None:
        """Hand out again, first, an episode :meth:`next_call` made whose worker was lost."""
        self._waiting.appendleft(episode)

    def record(self, episode: tuple[int, int], result: dict) -> None:
        """Take the result of an episode :meth:`next_call` made."""
        generation, index = episode
        evaluation = self._evaluations[generation]
        evaluation.returns[index] = float(result["returns"][0])
        if len(evaluation.returns) == len(evaluation.seeds):
            self._finished.append((generation, float(np.mean(list(evaluation.returns.values())))))
            del self._evaluations[generation]

    def reached_target(self) -> bool:
        """Whether an evaluation not taken yet reached :attr:`target`."""
        return self.target is not None and any(value >= self.target for _, value in self._finished)

    def take_finished(self) -> list[tuple[int, float]]:
        """(generation, mean return) of the evaluations finished since the last call, oldest first."""
        finished, self._finished = sorted(self._finished), []
        return finished

    def outstanding(self) -> list[tuple[int, EvaluationRequest, list[float]]]:
        """(generation, (basis, obs mean, obs std, seeds of the episodes still to play), returns of
        those played) of the evaluations not finished, to finish once the workers are free; forgets them."""
        left = [(generation, (e.basis, e.obs_mean, e.obs_std,
                              [seeds for index, seeds in enumerate(e.seeds) if index not in e.returns]),
                 list(e.returns.values()))
                for generation, e in sorted(self._evaluations.items())]
        self._evaluations, self._waiting = {}, deque()
        return left


class Evaluations:
    """The trainer's evaluations of the solution: at once (sync mode), or through :attr:`queue`
    between the candidates (async mode), each reported with the solution and observation
    statistics it evaluated."""

    def __init__(self, run: Run, pool: EvaluationPool):
        self.run, self.pool = run, pool
        train = run.config.train
        self.queue = EvaluationQueue(train.target_return) if train.mode == "async" else None
        self._solutions: dict[int, tuple[np.ndarray, dict]] = {}  # generation -> (solution, obs stats)
        self._done: list[tuple[int, float]] = []

    def request(self, generation: int) -> None:
        """Evaluate the current solution, the one after ``generation``."""
        self._request(generation, self.run.solver.solution(), self.run.obs_stats.state_dict())

    def restore(self, pending: dict[int, tuple[np.ndarray, dict]]) -> None:
        """Request again the evaluations a checkpoint had pending (:meth:`pending_from_extra`)."""
        for generation, (solution, obs_stats) in sorted(pending.items()):
            self._request(generation, solution, obs_stats)

    def _request(self, generation: int, solution: np.ndarray, obs_stats: dict) -> None:
        self._solutions[generation] = (solution, obs_stats)
        request = _evaluation(self.run, generation, solution, obs_stats)
        if self.queue is None:
            self._done.append((generation, _evaluate(self.pool, *request)))
        else:
            self.queue.request(generation, *request)

    def confirm(self, generation: int, solution: np.ndarray, obs_stats: dict) -> float:
        """The mean return of ``solution`` (the one after ``generation``, with the statistics
        ``obs_stats`` it was evaluated with) on ``train.confirm_episodes`` fresh episodes, played now
        (in async mode, on each worker after the candidate it is running)."""
        basis, mean, std, _ = _evaluation(self.run, generation, solution, obs_stats)
        return _evaluate(self.pool, basis, mean, std, confirmation_seeds(self.run.config, generation))

    def to_extra(self) -> dict[str, np.ndarray]:
        """The evaluations requested and not finished, for a checkpoint: generation, solution and
        observation statistics of each."""
        pending = sorted(self._solutions.items())
        dim, obs_dim = self.run.solver.dim, len(self.run.obs_stats.total)
        extra = {"log/pending_generations": np.array([generation for generation, _ in pending], dtype=np.int64),
                 "log/pending_solutions": np.array([solution for _, (solution, _) in pending]).reshape(-1, dim)}
        for key, shape in (("count", ()), ("sum", (obs_dim,)), ("sumsq", (obs_dim,))):
            extra[f"log/pending_obs_{key}"] = np.array([stats[key] for _, (_, stats) in pending],
                                                       dtype=np.float64).reshape(-1, *shape)
        return extra

    @staticmethod
    def pending_from_extra(extra: dict[str, np.ndarray]) -> dict[int, tuple[np.ndarray, dict]]:
        """What :meth:`to_extra` saved: generation -> (solution, observation statistics)."""
        if "log/pending_generations" not in extra:
            return {}
        obs_keys = ("count", "sum", "sumsq")
        return {int(generation): (np.array(extra["log/pending_solutions"][i]),
                                  {key: np.array(extra[f"log/pending_obs_{key}"][i]) for key in obs_keys})
                for i, generation in enumerate(extra["log/pending_generations"])}

    def awaits(self, generation: int) -> bool:
        """Whether an evaluation of the solution after ``generation`` is still to come."""
        return generation in self._solutions

    def finished(self, wait: bool) -> list[tuple[int, float, np.ndarray, dict]]:
        """(generation, mean return, solution, obs stats) of the evaluations finished since the last
        call; ``wait``: also those still due, their remaining episodes played now (the caller has
        stopped the candidates)."""
        done, self._done = self._done, []
        if self.queue is not None:
            done += self.queue.take_finished()
            if wait:
                done += [(generation, _evaluate(self.pool, *request, played=played))
                         for generation, request, played in self.queue.outstanding()]
        return [(generation, value, *self._solutions.pop(generation)) for generation, value in done]


def _evaluation(run: Run, generation: int, solution: np.ndarray, obs_stats: dict) -> EvaluationRequest:
    """What evaluating ``solution`` (the one after ``generation``) takes: its basis (no noise), the
    normalisation of ``obs_stats`` (an :meth:`ObsStats.state_dict`), one episode seed per episode."""
    mean, std = run.normalisation(ObsStats.from_state_dict(obs_stats))
    return Basis(solution[None], 0.0).to_dict(), mean, std, evaluation_seeds(run.config, generation)


def _evaluate(pool: EvaluationPool, basis: dict, obs_mean: np.ndarray | None, obs_std: np.ndarray | None,
              seeds: list[list[int]], played: list[float] | None = None) -> float:
    """Mean return of the centre of ``basis`` over one episode per seed (one job each) and the
    returns of the episodes ``played`` already."""
    infos = [EVALUATION_INFO] * len(seeds)
    returns = pool.evaluate(basis, obs_mean, obs_std, infos, seeds)["returns"] if seeds else np.zeros(0)
    return float(np.mean([*(played or []), *returns]))
