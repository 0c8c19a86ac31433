"""A genetic algorithm (Such et al. 2017, "Deep Neuroevolution"): truncation selection, elitism,
Gaussian mutation. No crossover.

Each generation: the ``elite_count`` best parents are re-evaluated unchanged; every other candidate
is a parent (uniformly among the top ``truncation`` fraction) plus ``std * eps``. The parents of
the next generation are the best ``ceil(truncation * population_size)`` candidates.
"""
import math

import numpy as np

from evokit_py.config import SolverConfig
from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.solvers.base import Basis, Solver

__all__ = ["GA"]


class GA(Solver):
    """Truncation-selection GA (``solver.type: GA``); mutation std = ``gaussian_sampling.std``.
    Stale samples are refused (asynchronous mode is for BASIC_ES)."""

    def __init__(self, config: SolverConfig, x0: np.ndarray, noise: NoiseSource):
        super().__init__(config, x0, noise)
        self.parents = np.array(x0, dtype=np.float64)[None]  # sorted best first
        self.parent_count = max(1, math.ceil(config.ga.truncation * self.population_size))

    def _ask(self, rng: np.random.Generator) -> list[SamplingInfo]:
        elites = min(self.config.ga.elite_count, len(self.parents))
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
