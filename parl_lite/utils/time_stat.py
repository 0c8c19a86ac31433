"""PARL's ``TimeStat``: how long a block of code takes, over the last few runs.

    learn_time = TimeStat(window_size=100)
    with learn_time:
        agent.learn(...)
    print(learn_time.mean)      # seconds, mean of the last 100 runs
"""
import time
from typing import Any

from parl_lite.utils.window_stat import WindowStat

__all__ = ["TimeStat"]


class TimeStat:
    """A context manager that adds each run's wall-clock seconds to a :class:`WindowStat`.

    Args:
        window_size: how many of the latest runs ``mean``, ``min`` and ``max`` cover.
    """

    def __init__(self, window_size: int = 1) -> None:
        self.time_samples = WindowStat(window_size)
        self._start: float | None = None

    def __enter__(self) -> "TimeStat":
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._start is not None:
            self.time_samples.add(time.perf_counter() - self._start)
            self._start = None

    @property
    def mean(self) -> float | None:
        return self.time_samples.mean

    @property
    def min(self) -> float | None:
        return self.time_samples.min

    @property
    def max(self) -> float | None:
        return self.time_samples.max
