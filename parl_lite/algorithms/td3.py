"""TD3 (Fujimoto et al., 2018): DDPG with three fixes against Q over-estimation.

1. Clipped double Q: two critics; the target takes the smaller of the two target Q values.
2. Target policy smoothing: the target action gets clipped Gaussian noise.
3. Delayed policy updates: the actor and the targets move once every ``policy_freq`` critic steps.

Update on a batch ``(obs, action, reward, next_obs, terminal)``::

    a'           = clip(pi_target(next_obs) + clip(N(0, policy_noise), -noise_clip, noise_clip), -1, 1)
    y            = reward + gamma * (1 - terminal) * min(Q1_target(next_obs, a'), Q2_target(next_obs, a'))
    critic loss  = mean((Q1(obs, action) - y)^2) + mean((Q2(obs, action) - y)^2)
    every policy_freq steps:
        actor loss = -mean(Q1(obs, pi(obs)));   target <- tau * model + (1 - tau) * target
"""

import paddle
import paddle.nn.functional as F

from parl_lite.algorithms.common import SoftTargetActorCritic, check_hyperparameter, column, frozen
from parl_lite.core.learn_inputs import (CONTINUOUS_ACTIONS, OBSERVATIONS, STEP_VALUES, TERMINALS, LearnInputs,
                                         check_action_width)
from parl_lite.core.model import Model

__all__ = ["TD3"]


class TD3(SoftTargetActorCritic):
    """Twin Delayed DDPG (PARL's ``TD3``).

    The model exposes ``policy(obs) -> action`` in [-1, 1], ``value(obs, action) -> (Q1, Q2)``
    (each ``[batch, 1]``), ``get_actor_params()`` and ``get_critic_params()``; and, optionally,
    ``Q1(obs, action)``, the first critic alone (PARL's TD3 models have it), which spares the actor
    step the second critic.

    Args:
        model: the actor-critic model; a deep copy becomes ``target_model``.
        gamma: discount factor in [0, 1].
        tau: soft target update rate in (0, 1].
        actor_lr: Adam learning rate of the actor.
        critic_lr: Adam learning rate of both critics.
        policy_noise: standard deviation of the target policy smoothing noise (in action units).
        noise_clip: the smoothing noise is clipped to [-noise_clip, noise_clip].
        policy_freq: critic steps per actor step (and per target update).
    """

    def __init__(self, model: Model, gamma: float = 0.99, tau: float = 0.005,
                 actor_lr: float = 1e-3, critic_lr: float = 1e-3, policy_noise: float = 0.2,
                 noise_clip: float = 0.5, policy_freq: int = 2) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr)
        self.policy_noise = check_hyperparameter("policy_noise", policy_noise, 0.0, float("inf"))
        self.noise_clip = check_hyperparameter("noise_clip", noise_clip, 0.0, float("inf"))
        if not isinstance(policy_freq, int) or policy_freq < 1:
            raise ValueError(f"policy_freq must be a positive int, got {policy_freq!r}")
        self.policy_freq = policy_freq
        self.total_it = 0  # learn calls so far (PARL's name)

    def predict(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The deterministic action ``pi(obs)`` in [-1, 1]."""
        return self.model.policy(obs)

    learn_inputs = LearnInputs(obs=OBSERVATIONS, action=CONTINUOUS_ACTIONS, reward=STEP_VALUES, next_obs=OBSERVATIONS,
                               terminal=TERMINALS)

    def learn(self, obs: paddle.Tensor, action: paddle.Tensor, reward: paddle.Tensor, next_obs: paddle.Tensor,
              terminal: paddle.Tensor) -> paddle.Tensor:
        """One critic step; every ``policy_freq``-th call also an actor step and a target update.

        Args:
            obs, next_obs: ``[batch, obs_dim]``.
            action: ``[batch, act_dim]`` in [-1, 1].
            reward, terminal: ``[batch]`` or ``[batch, 1]`` (terminal is 1 only on a true episode
                end).

        Returns:
            The critic loss, a 0-D tensor (as PARL's; the actor loss is not returned).

        Raises:
            TypeError, ValueError: the arrays do not fit (see :mod:`parl_lite.core.learn_inputs`),
                e.g. ``action`` is not ``[N, act_dim]``; no update is made.
        """
        critic_loss = self._learn_critic(obs, action, column(reward), next_obs, column(terminal))
        self.total_it += 1
        if self.total_it % self.policy_freq == 0:
            self._learn_actor(obs)
            self.sync_target()
        return critic_loss

    def _learn_critic(self, obs, action, reward, next_obs, terminal) -> paddle.Tensor:
        with paddle.no_grad():
            next_action = self.target_model.policy(next_obs)
            check_action_width(type(self).__name__, "action", action, next_action.shape[-1])
            noise = (paddle.randn(next_action.shape) * self.policy_noise).clip(-self.noise_clip, self.noise_clip)
            next_action = (next_action + noise).clip(-1.0, 1.0)
            next_q1, next_q2 = self.target_model.value(next_obs, next_action)
            target_q = reward + self.gamma * (1.0 - terminal) * paddle.minimum(next_q1, next_q2)
        q1, q2 = self.model.value(obs, action)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        self.critic_optimizer.clear_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        return critic_loss

    def _learn_actor(self, obs) -> None:
        with frozen(self.model.get_critic_params()):
            actor_loss = -self._first_critic(obs, self.model.policy(obs)).mean()
        self.actor_optimizer.clear_grad()
        actor_loss.backward()
        self.actor_optimizer.step()

    def _first_critic(self, obs: paddle.Tensor, action: paddle.Tensor) -> paddle.Tensor:
        first_alone = getattr(self.model, "Q1", None)
        return first_alone(obs, action) if callable(first_alone) else self.model.value(obs, action)[0]
