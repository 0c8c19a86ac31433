"""PARL's ``WindowStat``: mean, min and max of the last ``window_size`` values added."""
from collections import deque

import numpy as np

__all__ = ["WindowStat"]


class WindowStat:
    """Statistics of a sliding window of numbers (``None`` while it is empty).

    Args:
        window_size: how many of the latest values are kept (positive).
    """

    def __init__(self, window_size: int) -> None:
        if int(window_size) < 1:
            raise ValueError(f"WindowStat: window_size must be positive, got {window_size}")
        self.items: deque = deque(maxlen=int(window_size))
        self.count = 0  # values added since creation, including those that left the window

    def add(self, value: float) -> None:
        """Add a value; the oldest leaves once the window is full."""
        self.items.append(value)
        self.count += 1

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.items)) if self.items else None

    @property
    def min(self) -> float | None:
        return float(np.min(self.items)) if self.items else None

    @property
    def max(self) -> float | None:
        return float(np.max(self.items)) if self.items else None
