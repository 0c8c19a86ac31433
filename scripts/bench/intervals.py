"""The 95% interval of a mean over a few paired runs (seeds, rounds), as the benches report it."""
import math

__all__ = ["mean_and_interval"]

T_975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}  # Student's t, 95%


def mean_and_interval(values: list[float]) -> tuple[float, float | None]:
    """The mean and the half-width of its 95% t-interval (None with one value)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
    return mean, T_975.get(len(values) - 1, 2.0) * spread
