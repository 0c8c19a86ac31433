"""Return computations shared by the policy-gradient family."""
from collections.abc import Sequence

import numpy as np

__all__ = ["discounted_returns"]


def discounted_returns(rewards: np.ndarray | Sequence[float], gamma: float, normalize: bool = False) -> np.ndarray:
    """Reward-to-go of one episode: ``G_t = r_t + gamma * G_{t+1}``.

    Args:
        rewards: the episode's rewards, in order.
        gamma: discount factor in [0, 1].
        normalize: subtract the mean and divide by the standard deviation (REINFORCE's baseline).

    Returns:
        float32 array of the same length as ``rewards``.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    values = np.asarray(rewards, dtype=np.float64)
    returns = np.empty_like(values)
    running = 0.0
    for t in range(len(values) - 1, -1, -1):
        running = values[t] + gamma * running
        returns[t] = running
    if normalize and len(returns) > 0:
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    return returns.astype(np.float32)
