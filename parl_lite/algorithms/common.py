"""Small pieces shared by the actor-critic algorithms."""
from contextlib import contextmanager
from typing import Iterator, Sequence

import paddle

__all__ = ["frozen", "check_hyperparameter"]


@contextmanager
def frozen(parameters: Sequence[paddle.Tensor]) -> Iterator[None]:
    """Within the block, ``parameters`` record no gradient.

    The actor loss of DDPG, TD3 and SAC runs through the critic; freezing the critic's parameters
    spares their weight-gradient matmuls (a third of the actor update's backward pass) while the
    gradient still flows through the critic to the action.
    """
    previous = [parameter.stop_gradient for parameter in parameters]
    for parameter in parameters:
        parameter.stop_gradient = True
    try:
        yield
    finally:
        for parameter, stop in zip(parameters, previous):
            parameter.stop_gradient = stop


def check_hyperparameter(name: str, value: float, low: float, high: float, low_open: bool = False) -> float:
    """Return ``value`` if it lies in [low, high] (``(low, high]`` with ``low_open``), else raise
    ValueError naming ``name``."""
    if not (low < value <= high if low_open else low <= value <= high):
        interval = f"{'(' if low_open else '['}{low}, {high}]"
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return float(value)
