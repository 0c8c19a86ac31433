"""IMPALA's learner update (Espeholt et al., 2018): actor-critic with V-trace off-policy correction.

Actors play with slightly old weights (the behaviour policy ``mu``) and send time-major
trajectories with ``log mu(a_t|x_t)``; the learner re-evaluates them under its current policy
``pi`` and value function, computes V-trace targets (:func:`parl_lite.algorithms.vtrace.vtrace`)
and takes one gradient step on

    -rho_pg * A_vtrace * log pi(a|x) + value_coef * (v_s - V(x))^2 / 2 - entropy_coef * H(pi(.|x)).

A time-limit truncation is handled exactly: the step bootstraps from ``V(final observation)``
(added to its reward) and the trace stops there, as at a termination.
"""

from collections.abc import Mapping
import numpy as np
import paddle

from parl_lite.algorithms.actor_critic import ActorCriticAlgorithm
from parl_lite.algorithms.common import GlobalNormClip
from parl_lite.algorithms.vtrace import vtrace
from parl_lite.core.model import Model

__all__ = ["IMPALA"]


class IMPALA(ActorCriticAlgorithm):
    """The IMPALA learner (see :class:`ActorCriticAlgorithm` for the models).

    Args:
        model: the policy, with ``value(obs)`` when ``critic`` is None.
        critic: a separate value model.
        gamma: discount factor in [0, 1].
        lr: Adam learning rate.
        value_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.
        max_grad_norm: global gradient-norm clip; None: no clipping.
        clip_rho_threshold: V-trace ``rho_bar``.
        clip_pg_rho_threshold: clip of the policy-gradient importance weights.
        clip_c_threshold: V-trace ``c_bar``.
    """

    def __init__(
        self,
        model: Model,
        critic: Model | None = None,
        gamma: float = 0.99,
        lr: float = 5e-4,
        value_coef: float = 0.5,
        entropy_coef: float = 0.0,
        max_grad_norm: float | None = 0.5,
        clip_rho_threshold: float = 1.0,
        clip_pg_rho_threshold: float = 1.0,
        clip_c_threshold: float = 1.0,
    ) -> None:
        super().__init__(model, critic)
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.gamma, self.value_coef, self.entropy_coef = gamma, value_coef, entropy_coef
        self.clip_rho_threshold = clip_rho_threshold
        self.clip_pg_rho_threshold = clip_pg_rho_threshold
        self.clip_c_threshold = clip_c_threshold
        clip = GlobalNormClip(max_grad_norm) if max_grad_norm else None
        self.optimizer = paddle.optimizer.Adam(learning_rate=lr, parameters=self.parameters(), grad_clip=clip)

    def learn(self, batch: Mapping[str, paddle.Tensor]) -> dict[str, paddle.Tensor]:
        """One gradient step on a batch of time-major trajectories.

        Args:
            batch: ``obs`` ``[T, B, ...]``; ``actions`` ``[T, B]`` or ``[T, B, act_dim]``;
                ``log_probs`` ``[T, B]``, their log-probabilities under the actor's (behaviour)
                policy; ``rewards`` ``[T, B]``; ``terminated`` ``[T, B]``, 1 where the episode
                terminated; ``ends`` ``[T, B]``, 1 where it terminated or was truncated;
                ``next_obs`` ``[T, B, ...]``, the true next observations (the final one at an end).
                These are the keys :meth:`parl_lite.utils.rollout.VectorRollout.collect` returns.

        Returns:
            ``policy_loss``, ``value_loss``, ``entropy``, ``mean_rho`` (mean importance ratio).
        """
        T, B = batch["rewards"].shape

        def flat(x: paddle.Tensor) -> paddle.Tensor:
            return x.reshape([T * B, *x.shape[2:]])

        obs = flat(batch["obs"])
        dist = self.distribution(obs)
        log_probs = dist.log_prob(flat(batch["actions"]))
        values = self.value(obs)
        with paddle.no_grad():
            next_values = self.value(flat(batch["next_obs"])).numpy().reshape(T, B).astype(np.float64)

        behaviour_log_probs = batch["log_probs"].numpy()
        ends = batch["ends"].numpy().astype(np.float64)
        terminated = batch["terminated"].numpy().astype(np.float64)
        truncated = ends * (1.0 - terminated)
        target_log_probs = log_probs.numpy().reshape(T, B)
        targets = vtrace(
            behaviour_log_probs=behaviour_log_probs,
            target_log_probs=target_log_probs,
            rewards=batch["rewards"].numpy().astype(np.float64) + self.gamma * truncated * next_values,
            discounts=self.gamma * (1.0 - ends),
            values=values.numpy().reshape(T, B),
            bootstrap_value=next_values[-1],
            clip_rho_threshold=self.clip_rho_threshold,
            clip_pg_rho_threshold=self.clip_pg_rho_threshold,
            clip_c_threshold=self.clip_c_threshold,
        )
        pg_advantages = paddle.to_tensor(targets.pg_advantages.reshape(-1))
        vs = paddle.to_tensor(targets.vs.reshape(-1))
        policy_loss = -(log_probs * pg_advantages).mean()
        value_loss = 0.5 * ((vs - values) ** 2).mean()
        entropy = dist.entropy().mean()
        loss = policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy
        loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        mean_rho = float(np.exp(target_log_probs - behaviour_log_probs).mean())
        return {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy, "mean_rho": mean_rho}
