"""Gaussian ES (Salimans et al. 2017, OpenAI ES): mirrored sampling, centered ranks, an optimizer.

    eps_i ~ N(0, I),  candidates theta + std * (+-eps_i)
    g = sum_i shaped_i * sign_i * eps_i / (n * std)      (ascent direction of the smoothed return)
    theta <- optimizer.step(theta, -g + weight_decay * theta)

Asynchronous updates (EvoKit's AsyncESAgent): an info drawn around an older version ``v`` (at most
``max_staleness`` updates back; the solver keeps those parameters) was evaluated at
``theta_v + std * sign * eps``, i.e. at the perturbation ``sign * eps + (theta_v - theta) / std`` (in
units of std) of the current parameters; that corrected perturbation replaces ``sign * eps``.
A candidate drawn around a preview (the parameters an update was heading to, before it was made)
is corrected the same way, by the difference between the preview and the current parameters.
"""
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from evokit_py.basis import Basis
from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.optimizers import SGD, Adam, Momentum, Optimizer
from evokit_py.schema import NON_NEGATIVE, POSITIVE, UNIT_OPEN, ConfigError
from evokit_py.solvers.base import Solver, centered_rank
from evokit_py.solvers.settings import SolverKeys, SolverSettings, StateLayout
from parl_lite.common.datasets import DatasetError, check_integer_range

__all__ = ["BasicES", "BasicESConfig", "OptimizerConfig", "make_optimizer"]


@dataclass
class MomentumConfig:
    mu: float = field(default=0.9, metadata=UNIT_OPEN)


@dataclass
class AdamConfig:
    beta1: float = field(default=0.9, metadata=UNIT_OPEN)
    beta2: float = field(default=0.999, metadata=UNIT_OPEN)
    epsilon: float = field(default=1e-8, metadata=POSITIVE)


@dataclass
class OptimizerConfig:
    """EvoKit's optimizer block (``solver.optimizer``): BASIC_ES's, and ARS's step size."""
    type: Literal["SGD", "MOMENTUM", "ADAM"] = "SGD"
    base_lr: float = field(default=0.05, metadata=POSITIVE)
    momentum: MomentumConfig = field(default_factory=MomentumConfig)
    adam: AdamConfig = field(default_factory=AdamConfig)


@dataclass
class BasicESConfig:
    """BASIC_ES's keys, in the ``solver`` block itself as EvoKit has them (``solver.mirrored_sampling``)."""
    config_key: ClassVar[str] = ""
    mirrored_sampling: bool = True
    fitness_shaping: Literal["centered_rank", "none"] = "centered_rank"
    weight_decay: float = field(default=0.0, metadata=NON_NEGATIVE)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)


def make_optimizer(config: OptimizerConfig, dim: int) -> Optimizer:
    """The optimizer ``solver.optimizer`` describes, for ``dim`` parameters."""
    if config.type == "SGD":
        return SGD(dim, config.base_lr)
    if config.type == "MOMENTUM":
        return Momentum(dim, config.base_lr, config.momentum.mu)
    return Adam(dim, config.base_lr, config.adam.beta1, config.adam.beta2, config.adam.epsilon)


class BasicES(Solver):
    """OpenAI-style Gaussian ES (``solver.type: BASIC_ES``); corrects stale samples (see above).

    Args:
        x0, noise, population_size, sigma, max_staleness: as :class:`Solver`'s.
        optimizer: what steps the parameters (for ``len(x0)`` parameters).
        mirrored: candidates in pairs ``+eps``, ``-eps`` (``population_size`` must be even).
        fitness_shaping: ``"centered_rank"`` or ``"none"`` (the returns as they are).
        weight_decay: added to the descent direction times the parameters.
    """

    accepts_stale = True
    can_preview = True
    settings: ClassVar[type[SolverSettings] | None] = BasicESConfig
    resume_fixed = ("mirrored_sampling", "optimizer.type")

    @classmethod
    def check_config(cls, config: SolverKeys) -> None:
        if config.settings(BasicESConfig).mirrored_sampling and config.population_size % 2:
            raise ConfigError(f"population_size: must be even with mirrored_sampling, got {config.population_size}")

    @classmethod
    def from_config(cls, config: SolverKeys, x0: np.ndarray, noise: NoiseSource) -> Solver:
        own = config.settings(BasicESConfig)
        return cls(x0, noise, optimizer=make_optimizer(own.optimizer, noise.dim), mirrored=own.mirrored_sampling,
                   fitness_shaping=own.fitness_shaping, weight_decay=own.weight_decay, **config.common_arguments())

    @classmethod
    def state_layout(cls, config: SolverKeys, parameter_count: int) -> StateLayout:
        optimizer = {"optimizer/t": "", "optimizer/velocity": "n", "optimizer/m": "n", "optimizer/v": "n"}
        return super().state_layout(config, parameter_count).extended(
            {**optimizer, "theta": "n", "history/versions": "h", "history/thetas": "h,n"},
            {"h": (config.max_staleness, "solver.max_staleness")}, ("theta", "history/thetas"))

    @classmethod
    def check_state(cls, state: Mapping[str, np.ndarray], generation: int, config: SolverKeys) -> None:
        super().check_state(state, generation, config)
        if "optimizer/t" in state:
            check_integer_range("solver/optimizer/t", state["optimizer/t"], (0, generation))
        if "history/versions" in state:
            _check_versions(state["history/versions"], generation, config.max_staleness)

    def __init__(self, x0: np.ndarray, noise: NoiseSource, population_size: int, sigma: float, optimizer: Optimizer,
                 mirrored: bool = True, fitness_shaping: Literal["centered_rank", "none"] = "centered_rank",
                 weight_decay: float = 0.0, max_staleness: int = 0):
        super().__init__(x0, noise, population_size, sigma, max_staleness)
        if mirrored and population_size % 2:
            raise ValueError(f"population_size: must be even with mirrored sampling, got {population_size}")
        self.theta = np.array(x0, dtype=np.float64)
        self.optimizer = optimizer
        self.mirrored = mirrored
        self.group_size = 2 if mirrored else 1
        self.fitness_shaping = fitness_shaping
        self.weight_decay = weight_decay
        self.history: dict[int, np.ndarray] = {}  # version -> theta, the max_staleness versions before this one

    def _ask(self, rng: np.random.Generator) -> list[SamplingInfo]:
        if not self.mirrored:
            return self.noise.draw(rng, self.population_size)
        infos = []
        for info in self.noise.draw(rng, self.population_size // 2):
            infos += [info, SamplingInfo(info.seed, info.offset, -1)]
        return infos

    def basis(self) -> Basis:
        return Basis(self.theta[None].copy(), self.sigma)

    def preview_basis(self, preview: int) -> Basis:
        return Basis(self.previews[preview][1][None].copy(), self.sigma)

    def _centre(self, version: int, preview: int) -> np.ndarray:
        """The parameters a candidate of ``version`` (and ``preview``, unless 0) was drawn around."""
        if preview:
            return self.previews[preview][1]
        return self.theta if version == self.generation else self.history[version]

    def _ascent(self, infos: list[SamplingInfo], fitness: np.ndarray) -> np.ndarray:
        shaped = centered_rank(fitness) if self.fitness_shaping == "centered_rank" else fitness
        coefficients = shaped * np.array([info.sign for info in infos], dtype=np.float64)
        eps = np.stack([self.noise.get(info) for info in infos]).astype(np.float64)
        ascent = coefficients @ eps
        weights: dict[tuple[int, int], float] = {}  # (version, preview) -> summed shaped fitness of its infos
        for f, info in zip(shaped, infos, strict=True):
            if info.preview or info.version != self.generation:
                weights[info.version, info.preview] = weights.get((info.version, info.preview), 0.0) + f
        for (version, preview), weight in weights.items():
            ascent += weight * (self._centre(version, preview) - self.theta) / self.sigma
        return ascent / (len(infos) * self.sigma)

    def _step(self, infos: list[SamplingInfo], fitness: np.ndarray, optimizer: Optimizer) -> np.ndarray:
        """The parameters after one step of ``optimizer`` (changed) on these results."""
        ascent = self._ascent(infos, fitness)
        return optimizer.step(self.theta, -ascent + self.weight_decay * self.theta)

    def _preview(self, infos: list[SamplingInfo], fitness: np.ndarray) -> np.ndarray:
        return self._step(infos, fitness, copy.deepcopy(self.optimizer))

    def _tell(self, infos: list[SamplingInfo], fitness: np.ndarray) -> None:
        theta = self._step(infos, fitness, self.optimizer)
        if self.max_staleness:
            self.history[self.generation] = self.theta
            self.history.pop(self.generation - self.max_staleness, None)
        self.theta = theta

    def solution(self) -> np.ndarray:
        return self.theta.copy()

    def state_dict(self):
        optimizer = {f"optimizer/{k}": v for k, v in self.optimizer.state_dict().items()}
        versions = sorted(self.history)
        history = np.stack([self.history[v] for v in versions]) if versions else np.zeros((0, self.dim))
        return {**super().state_dict(), "theta": self.theta.copy(), **optimizer,
                "history/versions": np.asarray(versions, dtype=np.int64), "history/thetas": history}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.theta = np.array(state["theta"], dtype=np.float64)
        versions, thetas = state.get("history/versions", []), state.get("history/thetas", [])
        self.history = {int(v): np.array(t, dtype=np.float64) for v, t in zip(versions, thetas, strict=True)}
        self.optimizer.load_state_dict({k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("optimizer/")})


def _check_versions(versions: np.ndarray, generation: int, max_staleness: int) -> None:
    """The versions BASIC_ES keeps for stale samples: distinct, among the ``max_staleness`` before
    ``generation``."""
    oldest = max(0, generation - max_staleness)
    for version in versions:
        check_integer_range("solver/history/versions", version, (oldest, generation - 1))
    if len(set(versions.tolist())) != len(versions):
        raise DatasetError(f"solver/history/versions: {versions.tolist()} holds a version twice")
