"""A genetic algorithm (Such et al. 2017, "Deep Neuroevolution"): truncation selection, elitism,
Gaussian mutation. No crossover.

Each generation: the ``elite_count`` best parents are re-evaluated unchanged; every other candidate
is a parent (uniformly among the top ``truncation`` fraction) plus ``std * eps``. The parents of
the next generation are the best ``ceil(truncation * population_size)`` candidates.
"""
import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from evokit_py.basis import Basis
from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.schema import NON_NEGATIVE, ConfigError, check
from evokit_py.solvers.base import Solver
from evokit_py.solvers.settings import SolverKeys, StateLayout

__all__ = ["GA", "GAConfig"]


@dataclass
class GAConfig:
    """GA (``solver.ga``): mutation std is ``solver.sampling.gaussian_sampling.std``."""
    config_key: ClassVar[str] = "ga"
    elite_count: int = field(default=1, metadata=NON_NEGATIVE)
    truncation: float = field(default=0.2, metadata=check(lambda v: 0 < v <= 1, "must be in (0, 1]"))


class GA(Solver):
    """Truncation-selection GA (``solver.type: GA``); mutation std = ``sigma``. Stale samples are
    refused (asynchronous mode is for BASIC_ES).

    Args:
        x0, noise, population_size, sigma, max_staleness: as :class:`Solver`'s.
        elite_count: the best parents re-evaluated unchanged each generation (fewer than ``population_size``).
        truncation: the fraction of the population that becomes parents, in (0, 1].
    """

    settings = GAConfig

    @classmethod
    def check_config(cls, config: SolverKeys) -> None:
        elite_count = config.settings(GAConfig).elite_count
        if elite_count >= config.population_size:
            raise ConfigError(f"ga.elite_count: must be < population_size ({config.population_size}), "
                              f"got {elite_count}")

    @classmethod
    def from_config(cls, config: SolverKeys, x0: np.ndarray, noise: NoiseSource) -> Solver:
        own = config.settings(GAConfig)
        return cls(x0, noise, elite_count=own.elite_count, truncation=own.truncation, **config.common_arguments())

    @classmethod
    def state_layout(cls, config: SolverKeys, parameter_count: int) -> StateLayout:
        return super().state_layout(config, parameter_count).extended(
            {"parents": "q,n"}, {"q": (config.population_size, "solver.population_size")}, ("parents",))

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
