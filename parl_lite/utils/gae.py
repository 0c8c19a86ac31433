"""Generalised advantage estimation (Schulman et al., 2016), with correct episode truncation."""

import numpy as np

__all__ = ["gae"]


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    episode_end: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and value targets of a time-major rollout.

    ``delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)`` and
    ``A_t = delta_t + gamma * lam * (1 - episode_end_t) * A_{t+1}``.

    Termination (the MDP ended) stops bootstrapping; truncation (a time limit) still bootstraps
    from ``V(s_{t+1})`` -- pass the value of the *final* observation there -- but cuts the trace.

    Args:
        rewards: ``[T, ...]`` rewards.
        values: ``[T, ...]`` ``V(s_t)``.
        next_values: ``[T, ...]`` ``V(s_{t+1})`` of the true next state (before any reset).
        terminated: ``[T, ...]`` 1 where the episode terminated at step t.
        episode_end: ``[T, ...]`` 1 where the episode terminated or was truncated at step t.
        gamma: discount in [0, 1].
        lam: GAE lambda in [0, 1] (1 gives Monte-Carlo advantages, 0 one-step TD errors).

    Returns:
        ``(advantages, returns)``, float32, ``returns = advantages + values``.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    arrays = [np.asarray(a, dtype=np.float64) for a in (rewards, values, next_values, terminated, episode_end)]
    names = ("rewards", "values", "next_values", "terminated", "episode_end")
    shapes = {name: a.shape for name, a in zip(names, arrays, strict=True)}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"gae: shapes differ: {shapes}")
    rewards, values, next_values, terminated, episode_end = arrays
    deltas = rewards + gamma * (1.0 - terminated) * next_values - values
    advantages = np.zeros_like(deltas)
    running = np.zeros_like(deltas[0]) if len(deltas) else 0.0
    for t in range(len(deltas) - 1, -1, -1):
        running = deltas[t] + gamma * lam * (1.0 - episode_end[t]) * running
        advantages[t] = running
    return advantages.astype(np.float32), (advantages + values).astype(np.float32)
