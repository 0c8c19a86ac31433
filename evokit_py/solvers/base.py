"""The ask/tell interface every solver implements, and what it hands to evaluators.

A generation is ``infos = solver.ask()``; every candidate ``solver.basis().candidate(info, noise)``
is evaluated somewhere (any process holding the same noise); ``solver.tell(infos, fitness)``.
Only the basis (once per generation), the infos and the fitness values cross process boundaries.
The draws of generation ``g`` come from ``default_rng([sampling seed, g])``: a solver restored from a
checkpoint asks exactly what the uninterrupted one would have asked.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from evokit_py.config import SolverConfig
from evokit_py.noise import NoiseSource, SamplingInfo

__all__ = ["Basis", "Solver", "centered_rank"]


@dataclass
class Basis:
    """What candidates of one generation are built from: ``centers[parent] + sigma * sign * T @ eps``.

    Attributes:
        centers: (k, dim) float64; k = 1 except for GA (its parents).
        sigma: the noise scale.
        transform: (dim, dim) matrix T (CMA-ES's B·D), or ``None`` for the identity.
    """
    centers: np.ndarray
    sigma: float
    transform: Optional[np.ndarray] = None

    def candidate(self, info: SamplingInfo, noise: NoiseSource) -> np.ndarray:
        """The parameters of the candidate ``info`` describes (float64, a new array)."""
        x = np.array(self.centers[info.parent], dtype=np.float64)
        if info.sign:
            eps = noise.get(info).astype(np.float64)
            if self.transform is not None:
                eps = self.transform @ eps
            x += (self.sigma * info.sign) * eps
        return x

    def to_dict(self) -> dict:
        return {"centers": self.centers, "sigma": self.sigma, "transform": self.transform}

    @classmethod
    def from_dict(cls, data: dict) -> "Basis":
        return cls(np.asarray(data["centers"]), float(data["sigma"]), data["transform"])


def centered_rank(fitness: np.ndarray) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5] (OpenAI ES fitness shaping); ties broken by position."""
    fitness = np.asarray(fitness, dtype=np.float64)
    ranks = np.empty(len(fitness))
    ranks[np.argsort(fitness, kind="stable")] = np.arange(len(fitness))
    return ranks / max(len(fitness) - 1, 1) - 0.5


class Solver:
    """Base of the ask/tell state machines; fitness is *maximised*.

    Args:
        config: the ``solver`` block of the config.
        x0: the initial parameters (flat).
        noise: where sampling infos get their noise.
    """

    def __init__(self, config: SolverConfig, x0: np.ndarray, noise: NoiseSource):
        x0 = np.asarray(x0, dtype=np.float64)
        if x0.shape != (noise.dim,):
            raise ValueError(f"x0 has shape {x0.shape}, the noise source has dim {noise.dim}")
        self.config = config
        self.noise = noise
        self.dim = noise.dim
        self.population_size = config.population_size
        self.sigma = config.sampling.gaussian_sampling.std
        self.generation = 0

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng([self.noise.seed, self.generation])

    def ask(self) -> List[SamplingInfo]:
        """The sampling infos of this generation's candidates (same call, same answer)."""
        raise NotImplementedError

    def basis(self) -> Basis:
        """What this generation's candidates are built from."""
        raise NotImplementedError

    def tell(self, infos: Sequence[SamplingInfo], fitness: Sequence[float]) -> None:
        """Update from the evaluated candidates and move to the next generation."""
        fitness = np.asarray(fitness, dtype=np.float64)
        if fitness.shape != (len(infos),):
            raise ValueError(f"tell: {len(infos)} sampling infos but fitness of shape {fitness.shape}")
        if not np.all(np.isfinite(fitness)):
            raise ValueError("tell: fitness values must be finite")
        self._tell(list(infos), fitness)
        self.generation += 1

    def _tell(self, infos: List[SamplingInfo], fitness: np.ndarray) -> None:
        raise NotImplementedError

    def solution(self) -> np.ndarray:
        """The current best guess of the parameters (a copy)."""
        raise NotImplementedError

    def state_dict(self) -> Dict[str, np.ndarray]:
        """Everything needed to continue exactly, as arrays (for HDF5)."""
        return {"generation": np.asarray(self.generation), "sigma": np.asarray(self.sigma)}

    def load_state_dict(self, state: Dict[str, np.ndarray]) -> None:
        self.generation = int(state["generation"])
        self.sigma = float(state["sigma"])
