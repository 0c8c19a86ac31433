"""V-trace off-policy value targets (Espeholt et al., 2018, "IMPALA", section 4.1).

For a trajectory ``x_s .. x_{s+n}`` collected by a behaviour policy ``mu``, with target policy
``pi``, truncated importance weights ``rho_t = min(rho_bar, pi/mu)`` and ``c_i = min(c_bar, pi/mu)``:

    v_s = V(x_s) + sum_{t=s}^{s+n-1} gamma^{t-s} (prod_{i=s}^{t-1} c_i) delta_t
    delta_t = rho_t (r_t + gamma V(x_{t+1}) - V(x_t))

computed backwards as ``v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1}))``, where a
per-step ``discounts[t]`` (``gamma`` times 0 at a terminal step) stands for ``gamma``. The policy
gradient uses ``rho_pg_t (r_t + gamma v_{t+1} - V(x_t))`` with its own clip ``rho_pg_bar``.

:func:`vtrace` computes on numpy arrays; :func:`from_importance_weights` is PARL's entry point
(``parl.algorithms.paddle.impala.vtrace``) on paddle tensors, with ``c_bar`` fixed at 1.
"""
from typing import Any, NamedTuple

import numpy as np

__all__ = ["VTraceReturns", "vtrace", "from_importance_weights"]


class VTraceReturns(NamedTuple):
    """V-trace's results, ``[T, B]`` each."""

    vs: Any             # value targets v_s
    pg_advantages: Any  # advantages for the policy gradient


def vtrace(
    behaviour_log_probs: np.ndarray,
    target_log_probs: np.ndarray,
    rewards: np.ndarray,
    discounts: np.ndarray,
    values: np.ndarray,
    bootstrap_value: np.ndarray,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
    clip_c_threshold: float | None = 1.0,
) -> VTraceReturns:
    """V-trace targets and policy-gradient advantages of a time-major batch.

    Args:
        behaviour_log_probs: ``[T, B]`` ``log mu(a_t | x_t)`` of the actions taken.
        target_log_probs: ``[T, B]`` ``log pi(a_t | x_t)`` under the learner's policy.
        rewards: ``[T, B]`` rewards ``r_t``.
        discounts: ``[T, B]`` ``gamma`` at non-terminal steps, 0 where the episode terminated.
        values: ``[T, B]`` ``V(x_t)`` under the learner's value function.
        bootstrap_value: ``[B]`` ``V(x_T)``, the value after the last step.
        clip_rho_threshold: ``rho_bar`` (None: no clipping).
        clip_pg_rho_threshold: clip of the policy-gradient weights (None: no clipping).
        clip_c_threshold: ``c_bar`` (None: no clipping).

    Returns:
        :class:`VTraceReturns` ``(vs, pg_advantages)``, float32 arrays ``[T, B]``.
    """
    arrays = [np.asarray(a, dtype=np.float64)
              for a in (behaviour_log_probs, target_log_probs, rewards, discounts, values)]
    names = ("behaviour_log_probs", "target_log_probs", "rewards", "discounts", "values")
    shapes = {name: a.shape for name, a in zip(names, arrays, strict=True)}
    if len(set(shapes.values())) != 1 or arrays[0].ndim != 2:
        raise ValueError(f"vtrace: inputs must all be [T, B], got {shapes}")
    behaviour_log_probs, target_log_probs, rewards, discounts, values = arrays
    bootstrap_value = np.asarray(bootstrap_value, dtype=np.float64)
    if bootstrap_value.shape != values.shape[1:]:
        raise ValueError(f"vtrace: bootstrap_value must have shape {values.shape[1:]}, got {bootstrap_value.shape}")

    ratios = np.exp(target_log_probs - behaviour_log_probs)
    rhos = ratios if clip_rho_threshold is None else np.minimum(clip_rho_threshold, ratios)
    cs = ratios if clip_c_threshold is None else np.minimum(clip_c_threshold, ratios)
    next_values = np.concatenate([values[1:], bootstrap_value[None]], axis=0)
    deltas = rhos * (rewards + discounts * next_values - values)

    vs_minus_v = np.zeros_like(values)
    running = np.zeros_like(bootstrap_value)
    for t in range(len(values) - 1, -1, -1):
        running = deltas[t] + discounts[t] * cs[t] * running
        vs_minus_v[t] = running
    vs = vs_minus_v + values

    next_vs = np.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    pg_rhos = ratios if clip_pg_rho_threshold is None else np.minimum(clip_pg_rho_threshold, ratios)
    pg_advantages = pg_rhos * (rewards + discounts * next_vs - values)
    return VTraceReturns(vs.astype(np.float32), pg_advantages.astype(np.float32))


def from_importance_weights(behaviour_actions_log_probs: Any, target_actions_log_probs: Any, discounts: Any,
                            rewards: Any, values: Any, bootstrap_value: Any, clip_rho_threshold: float | None = 1.0,
                            clip_pg_rho_threshold: float | None = 1.0,
                            name: str = "vtrace_from_logits") -> VTraceReturns:
    """PARL's V-trace: :func:`vtrace` on paddle tensors (or numpy arrays) with ``c_bar`` = 1,
    computed without gradients.

    Args:
        behaviour_actions_log_probs: ``[T, B]`` ``log mu(a_t | x_t)``.
        target_actions_log_probs: ``[T, B]`` ``log pi(a_t | x_t)``.
        discounts: ``[T, B]`` the discount at each step, 0 where the episode ended.
        rewards: ``[T, B]``.
        values: ``[T, B]`` ``V(x_t)``.
        bootstrap_value: ``[B]`` ``V(x_T)``.
        clip_rho_threshold: ``rho_bar`` (None: no clipping).
        clip_pg_rho_threshold: clip of the policy-gradient weights (None: no clipping).
        name: accepted for PARL's signature (a TensorFlow name scope in the original); unused.

    Returns:
        :class:`VTraceReturns` of float32 paddle tensors ``[T, B]``.
    """
    import paddle

    def array(value: Any) -> np.ndarray:
        return value.numpy() if isinstance(value, paddle.Tensor) else np.asarray(value)

    returns = vtrace(array(behaviour_actions_log_probs), array(target_actions_log_probs), array(rewards),
                     array(discounts), array(values), array(bootstrap_value), clip_rho_threshold=clip_rho_threshold,
                     clip_pg_rho_threshold=clip_pg_rho_threshold, clip_c_threshold=1.0)
    return VTraceReturns(paddle.to_tensor(returns.vs), paddle.to_tensor(returns.pg_advantages))
