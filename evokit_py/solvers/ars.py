"""Augmented Random Search (Mania, Guy and Recht 2018, Algorithm 2): antithetic directions, the
best ``b`` of them, a step divided by the standard deviation of their returns.

    delta_k ~ N(0, I), k = 1..N;  r+_k, r-_k the returns of theta +- nu * delta_k
    keep the b directions with the largest max(r+_k, r-_k)
    sigma_R = std of the 2b returns kept
    theta <- theta + alpha / (b * sigma_R) * sum_k (r+_k - r-_k) * delta_k

``b = N`` is ARS V1/V2, ``b < N`` their ``-t`` variants; V2 differs from V1 by the observation
normalisation, which the run applies (``observation_normalization``), not the solver. The returns are
used as they come (no rank shaping): the division by ``sigma_R`` is ARS's normalisation. Unlike
OpenAI ES, the step is not divided by ``nu``: ``alpha`` is ARS's step size as the paper states it.
"""
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.optimizers import SGD
from evokit_py.schema import POSITIVE, ConfigError
from evokit_py.solvers.base import Solver
from evokit_py.solvers.basic_es import BasicES, BasicESConfig
from evokit_py.solvers.settings import SolverKeys

__all__ = ["ARS", "ARSConfig"]


@dataclass
class ARSConfig:
    """ARS (``solver.ars``): N = population_size / 2 directions, step size ``solver.optimizer.base_lr``
    (SGD), noise std ``solver.sampling.gaussian_sampling.std``."""
    config_key: ClassVar[str] = "ars"
    top_directions: int | None = field(default=None, metadata=POSITIVE)  # b; None: all N (V1/V2, not -t)


class ARS(BasicES):
    """ARS V1/V2 and their ``-t`` variants (``solver.type: ARS``); synchronous (whole generations).

    Args:
        x0: the initial parameters (flat; ARS starts from zeros).
        noise: where the directions come from.
        directions: N, the antithetic pairs per generation (2N candidates, ``+delta`` then ``-delta``).
        top_directions: b, the pairs that enter the update (``None``: all N).
        step_size: alpha.
        sigma: nu, the noise std of the perturbations.
    """

    accepts_stale = False  # a pair's difference estimates the gradient where it was drawn: no correction
    can_preview = False
    settings = ARSConfig  # beside BASIC_ES's keys (its optimizer's base_lr and type)

    @classmethod
    def check_config(cls, config: SolverKeys) -> None:
        if config.population_size % 2:
            raise ConfigError(f"population_size: ARS evaluates each of its directions at +delta and -delta, so "
                              f"it must be even (2 N), got {config.population_size}")
        top, directions = config.settings(ARSConfig).top_directions, config.population_size // 2
        if top is not None and top > directions:
            raise ConfigError(f"ars.top_directions: must be <= the {directions} directions (population_size / 2), "
                              f"got {top}")
        optimizer = config.settings(BasicESConfig).optimizer
        if optimizer.type != "SGD":
            raise ConfigError(f"optimizer.type: ARS steps by optimizer.base_lr (its alpha) with SGD, "
                              f"got {optimizer.type}")

    @classmethod
    def from_config(cls, config: SolverKeys, x0: np.ndarray, noise: NoiseSource) -> Solver:
        return cls(x0, noise, directions=config.population_size // 2,
                   top_directions=config.settings(ARSConfig).top_directions,
                   step_size=config.settings(BasicESConfig).optimizer.base_lr,
                   sigma=config.sampling.gaussian_sampling.std)

    def __init__(self, x0: np.ndarray, noise: NoiseSource, directions: int, top_directions: int | None,
                 step_size: float, sigma: float):
        if directions < 1:
            raise ValueError(f"directions: must be >= 1, got {directions}")
        top = directions if top_directions is None else top_directions
        if not 1 <= top <= directions:
            raise ValueError(f"top_directions: must be in [1, directions = {directions}], got {top_directions}")
        super().__init__(x0, noise, 2 * directions, sigma, SGD(noise.dim, step_size), mirrored=True,
                         fitness_shaping="none")
        self.directions, self.top_directions, self.step_size = directions, top, step_size

    def _ascent(self, infos: list[SamplingInfo], fitness: np.ndarray) -> np.ndarray:
        plus, minus = _pairs(infos, fitness)
        top = np.argsort(-np.maximum(plus, minus), kind="stable")[:self.top_directions]
        kept = np.concatenate([plus[top], minus[top]])
        reward_std = float(np.std(kept))
        if reward_std == 0.0:  # every kept return equal: every difference is 0, there is no step
            return np.zeros(self.dim)
        eps = np.stack([self.noise.get(infos[2 * k]) for k in top]).astype(np.float64)
        return ((plus[top] - minus[top]) @ eps) / (len(top) * reward_std)


def _pairs(infos: list[SamplingInfo], fitness: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The returns of the ``+delta`` and ``-delta`` halves of consecutive mirrored pairs (as
    :meth:`ARS.ask` gives them).

    Raises:
        ValueError: the infos are not whole pairs, one direction's ``+`` then its ``-``.
    """
    if len(infos) % 2:
        raise ValueError(f"tell: ARS takes mirrored pairs, got {len(infos)} sampling infos")
    for first, second in zip(infos[0::2], infos[1::2], strict=True):
        if (first.seed, first.offset, first.sign) != (second.seed, second.offset, -second.sign) or first.sign != 1:
            raise ValueError(f"tell: ARS takes mirrored pairs (+delta, then the same -delta) in the order asked; "
                             f"got {first} then {second}")
    return fitness[0::2], fitness[1::2]
