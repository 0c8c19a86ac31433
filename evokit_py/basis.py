"""What a generation's candidates are built from, and how a candidate is built from its sampling info.

A solver hands out its :class:`Basis` once per generation; a sampling worker builds every candidate
from it, the noise and the candidate's sampling info. Nothing here knows about solvers.
"""
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evokit_py.noise import NoiseSource, SamplingInfo

__all__ = ["Basis"]


@dataclass
class Basis:
    """What candidates of one generation are built from: ``centers[parent] + sigma * sign * T @ eps``.

    Attributes:
        centers: (k, dim) float64; k = 1 except for GA (its parents).
        sigma: the noise scale.
        transform: (dim, dim) matrix T (CMA-ES's B·D), a (dim,) vector (a diagonal T: separable
            CMA-ES), or ``None`` for the identity.
    """
    centers: np.ndarray
    sigma: float
    transform: np.ndarray | None = None

    def candidate(self, info: SamplingInfo, noise: NoiseSource) -> np.ndarray:
        """The parameters of the candidate ``info`` describes (float64, a new array)."""
        x = np.array(self.centers[info.parent], dtype=np.float64)
        if info.sign:
            eps = noise.get(info).astype(np.float64)
            if self.transform is not None:
                eps = self.transform @ eps if np.ndim(self.transform) == 2 else self.transform * eps
            x += (self.sigma * info.sign) * eps
        return x

    def candidates(self, infos: Sequence[SamplingInfo], noise: NoiseSource) -> np.ndarray:
        """The parameters of all ``infos`` as rows of one (len(infos), dim) float64 array (one matrix
        product instead of one per candidate)."""
        eps = np.stack([noise.get(info) if info.sign else np.zeros(noise.dim, np.float32) for info in infos])
        eps = eps.astype(np.float64) * (self.sigma * np.array([info.sign for info in infos], dtype=np.float64))[:, None]
        if self.transform is not None:
            eps = eps @ self.transform.T if np.ndim(self.transform) == 2 else eps * self.transform
        return self.centers[[info.parent for info in infos]] + eps

    def to_dict(self) -> dict:
        return {"centers": self.centers, "sigma": self.sigma, "transform": self.transform}

    @classmethod
    def from_dict(cls, data: dict) -> "Basis":
        return cls(np.asarray(data["centers"]), float(data["sigma"]), data["transform"])
