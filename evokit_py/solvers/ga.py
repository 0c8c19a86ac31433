"""A genetic algorithm (Such et al. 2017, "Deep Neuroevolution"): truncation selection, elitism,
Gaussian mutation. No crossover.

Each generation: the ``elite_count`` best parents are re-evaluated unchanged; every other candidate
is a parent (uniformly among the top ``truncation`` fraction) plus ``std * eps``. The parents of
the next generation are the best ``ceil(truncation * population_size)`` candidates.
"""
import math

import numpy as np

from evokit_py.basis import Basis
from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.solvers.base import Solver

__all__ = ["GA"]


class GA(Solver):
    """Truncation-selection GA (``solver.type: GA``); mutation std = ``sigma``. Stale samples are
    refused (asynchronous mode is for BASIC_ES).

    Args:
        x0, noise, population_size, sigma, max_staleness: as :class:`Solver`'s.
        elite_count: the best parents re-evaluated unchanged each generation (fewer than ``population_size``).
        truncation: the fraction of the population that becomes parents, in (0, 1].
    """

    def __init__(self, x0: np.ndarray, noise: NoiseSource, population_size: int, sigma: float, elite_count: int = 1,
                 truncation: float = 0.2, max_staleness: int = 0):
        super().__init__(x0, noise, population_size, sigma, max_staleness)
        if not 0 <= elite_count < population_size:
            raise ValueError(f"elite_count: must be in [0, population_size), got {elite_count}")
        self.elite_count = elite_count
        self.parents = np.array(x0, dtype=np.float64)[None]  # sorted best first
        self.parent_count = max(1, math.ceil(truncation * self.population_size))

    def _ask(self, rng: np.random.Generator) -> list[SamplingInfo]:
        elites = min(self.elite_count, len(self.parents))
        infos = [SamplingInfo(self.noise.seed, 0, 0, parent=i) for i in range(elites)]
        mutations = self.noise.draw(rng, self.population_size - elites)
        parents = rng.integers(0, len(self.parents), size=len(mutations))
        return infos + [SamplingInfo(m.seed, m.offset, 1, int(p)) for m, p in zip(mutations, parents, strict=True)]

    def basis(self) -> Basis:
        return Basis(self.parents.copy(), self.sigma)

    def _tell(self, infos: list[SamplingInfo], fitness: np.ndarray) -> None:
        basis = self.basis()
        best = np.argsort(-fitness, kind="stable")[:self.parent_count]
        self.parents = np.stack([basis.candidate(infos[i], self.noise) for i in best])

    def solution(self) -> np.ndarray:
        return self.parents[0].copy()

    def state_dict(self):
        return {**super().state_dict(), "parents": self.parents.copy()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.parents = np.array(state["parents"], dtype=np.float64)
