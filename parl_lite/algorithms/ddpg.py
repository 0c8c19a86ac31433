"""DDPG (Lillicrap et al., 2016): a deterministic actor trained through a learned Q critic.

Update on a batch ``(obs, action, reward, next_obs, terminal)``::

    y            = reward + gamma * (1 - terminal) * Q_target(next_obs, pi_target(next_obs))
    critic loss  = mean((Q(obs, action) - y)^2)
    actor loss   = -mean(Q(obs, pi(obs)))
    target      <- tau * model + (1 - tau) * target          (actor and critic)

Actions live in [-1, 1] (``policy`` ends in tanh); the agent scales them to the environment and
adds the exploration noise.
"""

import paddle
import paddle.nn.functional as F

from parl_lite.algorithms.common import ActorCriticLosses, SoftTargetActorCritic, column, frozen
from parl_lite.core.learn_inputs import (CONTINUOUS_ACTIONS, OBSERVATIONS, STEP_VALUES, TERMINALS, LearnInputs,
                                         check_action_width)
from parl_lite.core.model import Model

__all__ = ["DDPG"]


class DDPG(SoftTargetActorCritic):
    """Deep Deterministic Policy Gradient (PARL's ``DDPG``).

    The model has two roles and exposes their parameters:
    ``policy(obs) -> action`` in [-1, 1], ``value(obs, action) -> Q`` of shape ``[batch, 1]``,
    ``get_actor_params()`` and ``get_critic_params()``.

    Args:
        model: the actor-critic model; a deep copy becomes ``target_model``.
        gamma: discount factor in [0, 1].
        tau: soft target update rate in (0, 1] (``target = tau * model + (1 - tau) * target``).
        actor_lr: Adam learning rate of the actor.
        critic_lr: Adam learning rate of the critic.
    """

    def __init__(self, model: Model, gamma: float = 0.99, tau: float = 0.005,
                 actor_lr: float = 1e-3, critic_lr: float = 1e-3) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr)

    def predict(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The deterministic action ``pi(obs)`` in [-1, 1]."""
        return self.model.policy(obs)

    learn_inputs = LearnInputs(obs=OBSERVATIONS, action=CONTINUOUS_ACTIONS, reward=STEP_VALUES, next_obs=OBSERVATIONS,
                               terminal=TERMINALS)

    def learn(self, obs: paddle.Tensor, action: paddle.Tensor, reward: paddle.Tensor, next_obs: paddle.Tensor,
              terminal: paddle.Tensor) -> ActorCriticLosses:
        """One critic step, one actor step, one soft target update.

        Args:
            obs, next_obs: ``[batch, obs_dim]``.
            action: ``[batch, act_dim]`` in [-1, 1].
            reward, terminal: ``[batch]`` or ``[batch, 1]`` (terminal is 1 where the episode truly
                ended; 0 on a time-limit truncation).

        Returns:
            ``(critic_loss, actor_loss)``, 0-D tensors.

        Raises:
            TypeError, ValueError: the arrays do not fit (see :mod:`parl_lite.core.learn_inputs`),
                e.g. ``action`` is not ``[N, act_dim]``; no update is made.
        """
        critic_loss = self._learn_critic(obs, action, column(reward), next_obs, column(terminal))
        actor_loss = self._learn_actor(obs)
        self.sync_target()
        return ActorCriticLosses(critic_loss, actor_loss)

    def _learn_critic(self, obs, action, reward, next_obs, terminal) -> paddle.Tensor:
        with paddle.no_grad():
            next_action = self.target_model.policy(next_obs)
            check_action_width(type(self).__name__, "action", action, next_action.shape[-1])
            next_q = self.target_model.value(next_obs, next_action)
            target_q = reward + self.gamma * (1.0 - terminal) * next_q
        critic_loss = F.mse_loss(self.model.value(obs, action), target_q)
        self.critic_optimizer.clear_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        return critic_loss

    def _learn_actor(self, obs) -> paddle.Tensor:
        with frozen(self.model.get_critic_params()):
            actor_loss = -self.model.value(obs, self.model.policy(obs)).mean()
        self.actor_optimizer.clear_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        return actor_loss
