"""PARL's ``parl.utils.rl_utils``: discounted sums and GAE of one trajectory, by PARL's names.

The formulas live in :mod:`parl_lite.utils.returns` and :mod:`parl_lite.utils.gae`; these are
PARL's signatures on them. The results are float32 (PARL's, from ``scipy.signal.lfilter``, float64).
"""
from collections.abc import Sequence

import numpy as np

from parl_lite.utils.gae import gae
from parl_lite.utils.returns import discounted_returns

__all__ = ["calc_discount_sum_rewards", "calc_gae"]


def calc_discount_sum_rewards(rewards: Sequence[float] | np.ndarray, gamma: float) -> np.ndarray:
    """``G_t = r_t + gamma * G_{t+1}`` for every step of ``rewards`` (the last step's ``G`` is its
    reward).

    Args:
        rewards: the rewards of ``s_t, ..., s_T``.
        gamma: the discount, in [0, 1].
    """
    return discounted_returns(rewards, gamma)


def calc_gae(rewards: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
             next_value: float | np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """Generalised advantage estimates (Schulman et al., 2016) of one trajectory that did not end
    before its last step: ``A_t = sum_k (gamma * lam)^k delta_{t+k}`` with ``delta_t = r_t + gamma *
    V(s_{t+1}) - V(s_t)``.

    Args:
        rewards: the rewards of ``s_t, ..., s_T``.
        values: ``V(s_t), ..., V(s_T)``.
        next_value: ``V(s_{T+1})`` (0 when the episode ended at ``s_T``); a scalar or a 1-element array.
        gamma: the discount, in [0, 1].
        lam: GAE's lambda, in [0, 1].

    Returns:
        The advantages of ``s_t, ..., s_T``.
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    next_values = np.append(values[1:], np.asarray(next_value, dtype=np.float64).reshape(-1))
    if next_values.shape != values.shape:
        raise ValueError(f"calc_gae: next_value must be one value, got shape {np.shape(next_value)}")
    no_ends = np.zeros_like(values)
    advantages, _ = gae(np.asarray(rewards).reshape(-1), values, next_values, no_ends, no_ends, gamma, lam)
    return advantages
