"""CMA-ES (Hansen's tutorial, "The CMA Evolution Strategy", 2016): weighted recombination,
cumulative step-size adaptation, rank-one and rank-mu covariance updates.

Candidates are ``mean + sigma * B D z`` with ``z`` the noise of a sampling info, so evaluators only
need the basis (mean, sigma, B·D) and the infos. The eigendecomposition runs every generation:
O(dim^3), fine for the policies ES is used on here (up to a few thousand parameters).
"""
import math
from typing import List

import numpy as np

from evokit_py.config import SolverConfig
from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.solvers.base import Basis, Solver

__all__ = ["CMAES"]


class CMAES(Solver):
    """CMA-ES (``solver.type: CMA_ES``); initial step size = ``gaussian_sampling.std``."""

    def __init__(self, config: SolverConfig, x0: np.ndarray, noise: NoiseSource):
        super().__init__(config, x0, noise)
        n, lam = self.dim, self.population_size
        self.mu = config.cma_es.mu or lam // 2
        if not 1 <= self.mu <= lam:
            raise ValueError(f"solver.cma_es.mu must be in [1, population_size], got {self.mu}")
        weights = math.log(self.mu + 0.5) - np.log(np.arange(1, self.mu + 1))
        self.weights = weights / weights.sum()
        self.mueff = 1.0 / np.sum(self.weights ** 2)
        self.cc = (4 + self.mueff / n) / (n + 4 + 2 * self.mueff / n)
        self.cs = (self.mueff + 2) / (n + self.mueff + 5)
        self.c1 = 2 / ((n + 1.3) ** 2 + self.mueff)
        self.cmu = min(1 - self.c1, 2 * (self.mueff - 2 + 1 / self.mueff) / ((n + 2) ** 2 + self.mueff))
        self.damps = 1 + 2 * max(0.0, math.sqrt((self.mueff - 1) / (n + 1)) - 1) + self.cs
        self.chi_n = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
        self.mean = np.array(x0, dtype=np.float64)
        self.C = np.eye(n)
        self.B = np.eye(n)
        self.D = np.ones(n)
        self.pc = np.zeros(n)
        self.ps = np.zeros(n)

    def ask(self) -> List[SamplingInfo]:
        return self.noise.draw(self._rng(), self.population_size)

    def basis(self) -> Basis:
        return Basis(self.mean[None].copy(), self.sigma, self.B * self.D)

    def _tell(self, infos: List[SamplingInfo], fitness: np.ndarray) -> None:
        n = self.dim
        best = np.argsort(-fitness, kind="stable")[:self.mu]
        z = np.stack([self.noise.get(infos[i]) for i in best]).astype(np.float64)  # (mu, n)
        y = z @ (self.B * self.D).T
        z_w, y_w = self.weights @ z, self.weights @ y
        self.mean = self.mean + self.sigma * y_w
        self.ps = (1 - self.cs) * self.ps + math.sqrt(self.cs * (2 - self.cs) * self.mueff) * (self.B @ z_w)
        ps_norm = np.linalg.norm(self.ps)
        h_sigma = ps_norm / math.sqrt(1 - (1 - self.cs) ** (2 * (self.generation + 1))) / self.chi_n < 1.4 + 2 / (n + 1)
        self.pc = (1 - self.cc) * self.pc + h_sigma * math.sqrt(self.cc * (2 - self.cc) * self.mueff) * y_w
        rank_one = np.outer(self.pc, self.pc) + (1 - h_sigma) * self.cc * (2 - self.cc) * self.C
        rank_mu = (y.T * self.weights) @ y
        self.C = (1 - self.c1 - self.cmu) * self.C + self.c1 * rank_one + self.cmu * rank_mu
        self.sigma *= math.exp((self.cs / self.damps) * (ps_norm / self.chi_n - 1))
        self.C = (self.C + self.C.T) / 2
        eigenvalues, self.B = np.linalg.eigh(self.C)
        self.D = np.sqrt(np.maximum(eigenvalues, 1e-20))

    def solution(self) -> np.ndarray:
        return self.mean.copy()

    def state_dict(self):
        return {**super().state_dict(), "mean": self.mean.copy(), "C": self.C.copy(), "B": self.B.copy(),
                "D": self.D.copy(), "pc": self.pc.copy(), "ps": self.ps.copy()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        for key in ("mean", "C", "B", "D", "pc", "ps"):
            setattr(self, key, np.array(state[key], dtype=np.float64))
