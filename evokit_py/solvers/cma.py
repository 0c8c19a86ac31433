"""CMA-ES as in Hansen's tutorial ("The CMA Evolution Strategy: A Tutorial", 2016, Table 1 and
appendix B): weighted recombination, cumulative step-size adaptation, rank-one and rank-mu updates,
active CMA (negative weights for the worst candidates), the eigendecomposition done lazily (every
``ceil(1 / (10 n (c1 + cmu)))`` generations), termination criteria (:mod:`cma_stop`) and IPOP
restarts (the population doubles at each restart). The step-size control is the one pycma 4.5 runs
by default, which differs from the tutorial's Table 1: ``cs = (mueff + 2) / (n + mueff + 3)`` (at most
1/2), damping ``1 + 2 max(0, d sqrt((mueff - 1) / (n + 1)) - 1) + cs`` with ``d = max(1, 3 (1 -
0.5^(n / 9)))``, and the stall of the rank-one update when ``|ps|^2 / n`` exceeds ``2 + 4 / (n + 1)``;
the other constants are the tutorial's, which are pycma's too. Like pycma, ``chi_n`` is the exact
E|N(0, I)| (the tutorial gives an approximation) and C starts at ``diag(exp(1e-4 i / n))``, a spread
too small to matter that keeps the eigenvalues distinct. Given pycma's normal draws
(:class:`~evokit_py.noise.StreamNoise`), a run's iterates are pycma's to rounding (the means 1e-11 σ
apart after 50 generations) until two candidates' ranks swap on a last bit.

Candidates are ``mean + sigma * B D z`` with ``z`` the noise of a sampling info, so evaluators only
need the basis (mean, sigma, B·D) and the infos. The separable variant (``diagonal``, Ros & Hansen
2008) keeps only diag(C): O(n) memory and time per candidate, learning rates ``(n + 2) / 3`` times
larger, positive weights only.
"""
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from evokit_py.basis import Basis
from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.schema import NON_NEGATIVE, POSITIVE
from evokit_py.solvers.base import Solver
from evokit_py.solvers.cma_stop import CRITERIA, Termination, default_tolstagnation
from evokit_py.solvers.settings import SolverKeys, StateLayout
from parl_lite.common.datasets import check_integer_range

__all__ = ["CMAES", "SepCMAES", "CMAParameters", "CMAESConfig"]


@dataclass
class CMAESConfig:
    """CMA-ES (``solver.cma_es``): the initial step size is ``solver.sampling.gaussian_sampling.std``;
    termination thresholds are pycma's defaults (0 disables one)."""
    config_key: ClassVar[str] = "cma_es"
    mu: int | None = field(default=None, metadata=POSITIVE)  # None: population_size // 2
    active: bool = True  # negative weights for the worst candidates (active CMA)
    diagonal: bool = False  # separable CMA-ES: diagonal covariance (as solver.type SEP_CMA_ES)
    restarts: int = field(default=0, metadata=NON_NEGATIVE)  # IPOP: each restart doubles the population
    tolfun: float = field(default=1e-11, metadata=NON_NEGATIVE)
    tolx: float = field(default=1e-11, metadata=NON_NEGATIVE)
    tolconditioncov: float = field(default=1e14, metadata=NON_NEGATIVE)
    tolstagnation: int | None = field(default=None, metadata=NON_NEGATIVE)  # None: 100 + 100 n^1.5 / lambda


@dataclass
class CMAParameters:
    """The strategy constants for dimension ``n`` and ``lam`` candidates (Hansen's tutorial, Table 1,
    with pycma's step-size control: see the module docstring).

    ``weights`` has one entry per rank (best first): positive for the best ``mu``, negative (active
    CMA) or zero for the others.
    """
    weights: np.ndarray
    mu: int
    mueff: float
    cc: float
    cs: float
    c1: float
    cmu: float
    damps: float
    chi_n: float

    @classmethod
    def create(cls, n: int, lam: int, mu: int, active: bool = True, diagonal: bool = False) -> "CMAParameters":
        prime = math.log((lam + 1) / 2) - np.log(np.arange(1, lam + 1))
        positive, negative = prime[:mu], prime[mu:]
        mueff = positive.sum() ** 2 / np.sum(positive ** 2)
        alpha_cov = 2.0
        c1 = alpha_cov / ((n + 1.3) ** 2 + mueff)
        cmu = min(1 - c1, alpha_cov * (0.25 + mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + alpha_cov * mueff / 2))
        if diagonal:
            c1, cmu = c1 * (n + 2) / 3, cmu * (n + 2) / 3
            c1, cmu = min(c1, 0.5), min(cmu, 1 - min(c1, 0.5))
        weights = np.zeros(lam)
        weights[:mu] = positive / positive.sum()
        negative = np.minimum(negative, 0.0)
        if active and not diagonal and mu < lam and negative.sum() < 0:
            mueff_minus = negative.sum() ** 2 / np.sum(negative ** 2)
            alpha_mu = 1 + c1 / cmu
            alpha_mueff = 1 + 2 * mueff_minus / (mueff + 2)
            alpha_posdef = (1 - c1 - cmu) / (n * cmu)
            weights[mu:] = min(alpha_mu, alpha_mueff, alpha_posdef) * negative / np.abs(negative).sum()
        # pycma's step-size control (module docstring): with the tutorial's n + mueff + 5 and no
        # inner factor, 10-D ellipsoid runs needed 2% more evaluations over 51 seeds
        cs = min(0.5, (mueff + 2) / (n + mueff + 3))
        damp_inner = max(1.0, 3 * (1 - 0.5 ** (n / 9)))
        damps = 1 + 2 * max(0.0, damp_inner * math.sqrt((mueff - 1) / (n + 1)) - 1) + cs
        chi_n = math.sqrt(2) * math.exp(math.lgamma((n + 1) / 2) - math.lgamma(n / 2))  # E|N(0, I)|
        return cls(weights=weights, mu=mu, mueff=float(mueff), cc=(4 + mueff / n) / (n + 4 + 2 * mueff / n), cs=cs,
                   c1=c1, cmu=cmu, damps=damps, chi_n=chi_n)


class CMAES(Solver):
    """CMA-ES (``solver.type: CMA_ES``; ``SEP_CMA_ES`` or ``diagonal=True`` for the separable
    variant); initial step size = ``sigma``. Stale samples are refused (asynchronous mode is for
    BASIC_ES).

    After a termination criterion fires, :meth:`stop_reason` names it; with ``restarts`` left the
    next generation starts again from ``x0`` with twice the population and the initial step size
    (IPOP). :meth:`solution` is the current mean; :attr:`best_x` the best candidate evaluated over
    all restarts.

    Args:
        x0, noise, population_size, sigma, max_staleness: as :class:`Solver`'s.
        mu: parents per generation, 1 to ``population_size // 2``, the ranks whose recombination
            weight ``log((lambda + 1) / 2) - log(rank)`` is positive (``None``: ``population_size //
            2``; scaled with the population at a restart).
        active: negative weights for the worst candidates (active CMA).
        diagonal: separable CMA-ES (diagonal covariance).
        restarts: IPOP restarts after a termination criterion.
        tolfun, tolx, tolconditioncov, tolstagnation: termination thresholds
            (:class:`~evokit_py.solvers.cma_stop.Termination`; 0 disables one).
    """

    diagonal = False
    settings = CMAESConfig

    @classmethod
    def from_config(cls, config: SolverKeys, x0: np.ndarray, noise: NoiseSource) -> Solver:
        own = config.settings(CMAESConfig)
        return cls(x0, noise, mu=own.mu, active=own.active, diagonal=own.diagonal, restarts=own.restarts,
                   tolfun=own.tolfun, tolx=own.tolx, tolconditioncov=own.tolconditioncov,
                   tolstagnation=own.tolstagnation, **config.common_arguments())

    @classmethod
    def state_layout(cls, config: SolverKeys, parameter_count: int) -> StateLayout:
        own, n, population = config.settings(CMAESConfig), parameter_count, config.population_size
        covariance = {"C": "n"} if cls.diagonal or own.diagonal else {"C": "n,n", "B": "n,n"}
        stagnation = default_tolstagnation(n, population) if own.tolstagnation is None else own.tolstagnation
        scalars = ("population_size", "restarts_done", "run_generation", "eigen_generation", "best_f", "stop_reason")
        return super().state_layout(config, parameter_count).extended(
            {**dict.fromkeys(scalars, ""), "mean": "n", "D": "n", "pc": "n", "ps": "n", "best_x": "n", **covariance,
             "termination/best_history": "b", "termination/stagnation_best": "s",
             "termination/stagnation_median": "s"},
            {"b": (10 + math.ceil(30 * n / population), "CMA-ES's tolfun history"),
             "s": (max(1, stagnation), "CMA-ES's tolstagnation window")}, ("mean", "best_x"))

    @classmethod
    def check_state(cls, state: Mapping[str, np.ndarray], generation: int, config: SolverKeys) -> None:
        super().check_state(state, generation, config)
        restarts = config.settings(CMAESConfig).restarts
        bounds = {"restarts_done": (0, restarts), "run_generation": (0, generation),
                  "population_size": (2, config.population_size * 2**restarts), "stop_reason": (0, len(CRITERIA))}
        for key, bound in bounds.items():
            if key in state:
                check_integer_range(f"solver/{key}", state[key], bound)
        if "eigen_generation" in state:
            check_integer_range("solver/eigen_generation", state["eigen_generation"],
                                (0, int(state.get("run_generation", generation))))

    def __init__(self, x0: np.ndarray, noise: NoiseSource, population_size: int, sigma: float, mu: int | None = None,
                 active: bool = True, diagonal: bool = False, restarts: int = 0, tolfun: float = 1e-11,
                 tolx: float = 1e-11, tolconditioncov: float = 1e14, tolstagnation: int | None = None,
                 max_staleness: int = 0):
        super().__init__(x0, noise, population_size, sigma, max_staleness)
        if mu is not None and not 1 <= mu <= population_size // 2:  # the weights of the rest are not positive
            raise ValueError(f"solver.cma_es.mu: must be in [1, solver.population_size // 2 ({population_size // 2})]"
                             f", got {mu}")
        self.diagonal = self.diagonal or diagonal
        self.mu, self.active, self.restarts = mu, active, restarts
        self.tolerances = (tolfun, tolx, tolconditioncov, tolstagnation)
        self.initial_population_size = population_size
        self.x0 = np.array(x0, dtype=np.float64)
        self.sigma0 = self.sigma
        self.restarts_done = 0
        self._stop_reason: str | None = None
        self.best_x, self.best_f = self.x0.copy(), math.inf
        self._start_run(population_size)

    def _start_run(self, lam: int) -> None:
        """(Re)initialise the distribution around ``x0`` for ``lam`` candidates per generation."""
        n = self.dim
        mu = lam // 2 if self.mu is None else self.mu * lam // self.initial_population_size
        self.population_size = lam
        self.params = CMAParameters.create(n, lam, mu, self.active, self.diagonal)
        self.mean = self.x0.copy()
        self.sigma = self.sigma0
        variances = np.exp(1e-4 / n * np.arange(n))  # pycma's start (module docstring)
        self.C = variances if self.diagonal else np.diag(variances)
        self.B: np.ndarray | None = None if self.diagonal else np.eye(n)
        self.D = np.sqrt(variances)
        self.pc = np.zeros(n)
        self.ps = np.zeros(n)
        self.run_generation = 0
        self.eigen_generation = 0
        self.termination = Termination(n, lam, *self.tolerances)
        self._transform: np.ndarray | None = None

    @property
    def eigen_gap(self) -> int:
        """Generations between two eigendecompositions of C (1 for the diagonal variant)."""
        if self.diagonal:
            return 1
        return max(1, math.ceil(1 / (10 * self.dim * (self.params.c1 + self.params.cmu)) - 1e-9))

    def _eigenvectors(self) -> np.ndarray:
        """B, the eigenvectors of C (the full variant only: the diagonal one keeps none)."""
        if self.B is None:
            raise RuntimeError("the diagonal CMA-ES keeps no eigenvectors")
        return self.B

    def _ask(self, rng: np.random.Generator) -> list[SamplingInfo]:
        return self.noise.draw(rng, self.population_size)

    def basis(self) -> Basis:
        if self._transform is None:
            transform = self.D.copy() if self.diagonal else self._eigenvectors() * self.D
            transform.flags.writeable = False
            self._transform = transform
        return Basis(self.mean[None].copy(), self.sigma, self._transform)

    def _tell(self, infos: list[SamplingInfo], fitness: np.ndarray) -> None:
        if len(infos) != self.population_size:
            raise ValueError(f"CMA-ES takes the whole generation: {self.population_size} candidates, got {len(infos)}")
        p, n = self.params, self.dim
        values = -fitness
        order = np.argsort(values, kind="stable")
        z = np.stack([self.noise.get(infos[i]) for i in order]).astype(np.float64)  # (lam, n), best first
        y = z * self.D if self.diagonal else z @ (self._eigenvectors() * self.D).T
        self._track_best(values[order[0]], infos[order[0]])
        mu = p.mu
        z_w, y_w = p.weights[:mu] @ z[:mu], p.weights[:mu] @ y[:mu]
        self.mean = self.mean + self.sigma * y_w
        c_inv_sqrt_y_w = z_w if self.diagonal else self._eigenvectors() @ z_w
        self.ps *= 1 - p.cs
        self.ps += math.sqrt(p.cs * (2 - p.cs) * p.mueff) * c_inv_sqrt_y_w
        ps_norm = float(np.linalg.norm(self.ps))
        self.run_generation += 1
        # pycma's stall test: |ps|^2 / n, corrected for the path's start at zero, below 2 + 4 / (n + 1)
        h_sigma = ps_norm ** 2 / (1 - (1 - p.cs) ** (2 * self.run_generation)) / n < 2 + 4 / (n + 1)
        self.pc *= 1 - p.cc
        if h_sigma:
            self.pc += math.sqrt(p.cc * (2 - p.cc) * p.mueff) * y_w
        weights = p.weights.copy()
        negative = weights < 0
        if negative.any():  # active CMA: |C^-1/2 y| = |B z| = |z|; pycma's 1e-9 guards a zero z
            weights[negative] *= n / (np.linalg.norm(z[negative], axis=1) + 1e-9) ** 2
        delta_h = (1 - h_sigma) * p.cc * (2 - p.cc)
        decay = 1 + p.c1 * delta_h - p.c1 - p.cmu * p.weights.sum()
        used = weights != 0
        yw = y[used] * weights[used, None]
        if self.diagonal:
            self.C = decay * self.C + p.c1 * self.pc ** 2 + p.cmu * np.sum(yw * y[used], axis=0)
        else:
            self.C *= decay
            self.C += np.outer(p.c1 * self.pc, self.pc)
            self.C += (p.cmu * yw.T) @ y[used]
        self.sigma *= math.exp(min(1.0, (p.cs / p.damps) * (ps_norm / p.chi_n - 1)))
        if self.diagonal or self.run_generation - self.eigen_generation >= self.eigen_gap:
            self._decompose()
        self._check_termination(values)

    def _decompose(self) -> None:
        """B and D from C (D: the square roots of the eigenvalues)."""
        if self.diagonal:
            self.D = np.sqrt(np.maximum(self.C, 1e-300))
        else:
            self.C += self.C.T
            self.C *= 0.5
            eigenvalues, self.B = np.linalg.eigh(self.C)
            self.D = np.sqrt(np.maximum(eigenvalues, 1e-300))
        self.eigen_generation = self.run_generation
        self._transform = None

    def _track_best(self, value: float, info: SamplingInfo) -> None:
        if value < self.best_f:
            self.best_f = float(value)
            self.best_x = self.basis().candidate(info, self.noise)

    def _check_termination(self, values: np.ndarray) -> None:
        self.termination.record(values)
        diag_c = self.C if self.diagonal else np.diagonal(self.C)
        reason = self.termination.reason(values, self.sigma, self.pc, diag_c, self.D ** 2)
        if reason is None:
            return
        if self.restarts_done < self.restarts:
            self.restarts_done += 1
            self._start_run(2 * self.population_size)
        else:
            self._stop_reason = reason

    def stop_reason(self) -> str | None:
        return self._stop_reason

    def solution(self) -> np.ndarray:
        return self.mean.copy()

    def state_dict(self):
        scalars = {"population_size": self.population_size, "restarts_done": self.restarts_done,
                   "run_generation": self.run_generation, "eigen_generation": self.eigen_generation,
                   "best_f": self.best_f,
                   "stop_reason": CRITERIA.index(self._stop_reason) + 1 if self._stop_reason else 0}
        arrays = {"mean": self.mean, "C": self.C, "D": self.D, "pc": self.pc, "ps": self.ps, "best_x": self.best_x}
        if not self.diagonal:
            arrays["B"] = self.B
        return {**super().state_dict(), **{k: np.asarray(v) for k, v in scalars.items()},
                **{k: v.copy() for k, v in arrays.items()}, **self.termination.state_dict("termination/")}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        sigma = self.sigma
        self.restarts_done = int(state["restarts_done"])
        self._start_run(int(state["population_size"]))
        self.sigma = sigma
        self.run_generation, self.eigen_generation = int(state["run_generation"]), int(state["eigen_generation"])
        self.best_f = float(state["best_f"])
        reason = int(state["stop_reason"])
        self._stop_reason = CRITERIA[reason - 1] if reason else None
        for key in ("mean", "C", "D", "pc", "ps", "best_x") + (() if self.diagonal else ("B",)):
            setattr(self, key, np.array(state[key], dtype=np.float64))
        self.termination.load_state_dict(state, "termination/")
        self._transform = None


class SepCMAES(CMAES):
    """Separable CMA-ES (``solver.type: SEP_CMA_ES``): diagonal covariance, O(n) per candidate."""

    diagonal = True
