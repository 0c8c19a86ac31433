"""CMA-ES termination criteria (Hansen's tutorial, appendix B.3; pycma's defaults).

- ``tolfun``: the range of the current function values *and* of the best values of the last
  ``10 + ceil(30 n / lambda)`` generations are below ``tolfun``;
- ``tolx``: ``sigma * pc`` and ``sigma * sqrt(diag C)`` are below ``tolx`` in every coordinate;
- ``tolstagnation``: over the last ``tolstagnation`` generations, the medians of the newest 30% of
  the best and of the median values are no better than those of the oldest 30%;
- ``tolconditioncov``: the condition number of C exceeds ``tolconditioncov``.

Values are *minimised* here (the solver passes negated fitness).
"""
import math
from collections import deque

import numpy as np

__all__ = ["Termination", "CRITERIA", "default_tolstagnation"]

CRITERIA = ("tolfun", "tolx", "tolconditioncov", "tolstagnation")


def default_tolstagnation(n: int, lam: int) -> int:
    """pycma's default stagnation window: ``100 + 100 n^1.5 / lambda`` generations."""
    return int(100 + 100 * n ** 1.5 / lam)


class Termination:
    """Histories of one CMA-ES run and the criteria that read them.

    Args:
        n: dimension; lam: population size.
        tolfun, tolx, tolconditioncov: thresholds (0 disables one).
        tolstagnation: window in generations (0 disables; ``None``: :func:`default_tolstagnation`).
    """

    def __init__(self, n: int, lam: int, tolfun: float, tolx: float, tolconditioncov: float,
                 tolstagnation: int | None):
        self.tolfun, self.tolx, self.tolconditioncov = tolfun, tolx, tolconditioncov
        self.tolstagnation = default_tolstagnation(n, lam) if tolstagnation is None else tolstagnation
        self.best_history: deque = deque(maxlen=10 + math.ceil(30 * n / lam))
        self.stagnation_best: deque = deque(maxlen=max(self.tolstagnation, 1))
        self.stagnation_median: deque = deque(maxlen=max(self.tolstagnation, 1))

    def record(self, values: np.ndarray) -> None:
        """Take in one generation's function values."""
        best, median = float(np.min(values)), float(np.median(values))
        self.best_history.append(best)
        self.stagnation_best.append(best)
        self.stagnation_median.append(median)

    def reason(self, values: np.ndarray, sigma: float, pc: np.ndarray, diag_c: np.ndarray,
               eigenvalues: np.ndarray) -> str | None:
        """The name of the first criterion met by the generation just recorded, or ``None``."""
        if self.tolfun and len(self.best_history) == self.best_history.maxlen and \
                np.ptp(values) < self.tolfun and np.ptp(self.best_history) < self.tolfun:
            return "tolfun"
        if self.tolx and np.all(sigma * np.abs(pc) < self.tolx) and np.all(sigma * np.sqrt(diag_c) < self.tolx):
            return "tolx"
        if self.tolconditioncov and eigenvalues.max() > self.tolconditioncov * eigenvalues.min():
            return "tolconditioncov"
        if self.tolstagnation and len(self.stagnation_best) == self.tolstagnation >= 10:
            part = max(1, int(0.3 * self.tolstagnation))
            best, median = np.asarray(self.stagnation_best), np.asarray(self.stagnation_median)
            if np.median(best[-part:]) >= np.median(best[:part]) and \
                    np.median(median[-part:]) >= np.median(median[:part]):
                return "tolstagnation"
        return None

    def state_dict(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}best_history": np.asarray(self.best_history, dtype=np.float64),
                f"{prefix}stagnation_best": np.asarray(self.stagnation_best, dtype=np.float64),
                f"{prefix}stagnation_median": np.asarray(self.stagnation_median, dtype=np.float64)}

    def load_state_dict(self, state: dict[str, np.ndarray], prefix: str) -> None:
        for name in ("best_history", "stagnation_best", "stagnation_median"):
            history: deque = getattr(self, name)
            history.clear()
            history.extend(float(v) for v in np.asarray(state[f"{prefix}{name}"]).ravel())
