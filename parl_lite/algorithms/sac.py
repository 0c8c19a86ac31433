"""SAC (Haarnoja et al., 2018): maximum-entropy actor-critic with a squashed Gaussian policy,
twin Q critics and automatic entropy tuning.

Update on a batch ``(obs, action, reward, next_obs, terminal)``, with ``alpha = exp(log_alpha)``::

    a', log p(a')  ~ pi(next_obs)
    y            = reward + gamma * (1 - terminal) * (min(Q1_t, Q2_t)(next_obs, a') - alpha * log p(a'))
    critic loss  = mean((Q1(obs, action) - y)^2) + mean((Q2(obs, action) - y)^2)
    a~, log p(a~) ~ pi(obs)
    actor loss   = mean(alpha * log p(a~) - min(Q1, Q2)(obs, a~))
    alpha loss   = -mean(log_alpha * (log p(a~) + target_entropy))
    target      <- tau * model + (1 - tau) * target

The policy is ``a = tanh(u)``, ``u ~ N(mean, exp(log_std))``; actions live in [-1, 1] and the
agent scales them to the environment.
"""
import math

import paddle
import paddle.nn.functional as F

from parl_lite.algorithms.common import ActorCriticLosses, SoftTargetActorCritic, check_hyperparameter, column, frozen
from parl_lite.algorithms.optimizers import Adam
from parl_lite.core.learn_inputs import (CONTINUOUS_ACTIONS, OBSERVATIONS, STEP_VALUES, TERMINALS, LearnInputs,
                                         check_action_width)
from parl_lite.core.model import Model

__all__ = ["SAC", "EntropyTemperature"]

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class EntropyTemperature(Model):
    """The learned ``log_alpha`` as a Model, so that checkpoints carry it (role ``temperature``)."""

    def __init__(self, initial_alpha: float) -> None:
        super().__init__()
        self.log_alpha = self.create_parameter(
            [1], dtype="float32",
            default_initializer=paddle.nn.initializer.Constant(math.log(initial_alpha)))


class SAC(SoftTargetActorCritic):
    """Soft Actor-Critic (PARL's ``SAC``, plus automatic entropy tuning when ``alpha_lr`` is set).

    The model exposes ``policy(obs) -> (mean, log_std)`` (pre-squash, each ``[batch, act_dim]``),
    ``value(obs, action) -> (Q1, Q2)`` (each ``[batch, 1]``), ``get_actor_params()`` and
    ``get_critic_params()``. Only the critic part of ``target_model`` is used.

    Args:
        model: the actor-critic model; a deep copy becomes ``target_model``.
        gamma: discount factor in [0, 1].
        tau: soft target update rate in (0, 1].
        alpha: the entropy temperature (> 0); fixed, as in PARL, unless ``alpha_lr`` is given.
        actor_lr: Adam learning rate of the policy.
        critic_lr: Adam learning rate of both critics.
        alpha_lr: Adam learning rate of ``log_alpha``, which then steers the policy's entropy toward
            ``target_entropy``; None (PARL's behaviour) keeps alpha fixed.
        target_entropy: entropy the temperature steers toward; default ``-act_dim``.
        log_std_bounds: the policy's log standard deviation is clipped to these: ``(-5, 2)``
            (PARL's, the default) or ``(-20, 2)`` (SB3's), or any other pair.
    """

    def __init__(self, model: Model, gamma: float = 0.99, tau: float = 0.005, alpha: float = 0.2,
                 actor_lr: float = 3e-4, critic_lr: float = 3e-4, *, alpha_lr: float | None = None,
                 target_entropy: float | None = None,
                 log_std_bounds: tuple[float, float] = (LOG_STD_MIN, LOG_STD_MAX)) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr)
        low, high = (float(bound) for bound in log_std_bounds)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"log_std_bounds must be two finite numbers, low < high, got {log_std_bounds!r}")
        self.log_std_bounds = (low, high)
        check_hyperparameter("alpha", alpha, 0.0, float("inf"), low_open=True)
        self.temperature = EntropyTemperature(alpha)
        self.alpha_optimizer = None
        if alpha_lr is not None:
            check_hyperparameter("alpha_lr", alpha_lr, 0.0, float("inf"), low_open=True)
            self.alpha_optimizer = Adam(alpha_lr, parameters=self.temperature.parameters())
        self.target_entropy = target_entropy

    def predict(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The deterministic action ``tanh(mean)`` in [-1, 1]."""
        mean, _ = self.model.policy(obs)
        return paddle.tanh(mean)

    def sample(self, obs: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        """A reparameterised action ``tanh(mean + std * eps)`` and its log-probability ``[batch, 1]``."""
        mean, log_std = self.model.policy(obs)
        log_std = log_std.clip(*self.log_std_bounds)
        eps = paddle.randn(mean.shape)
        action = paddle.tanh(mean + log_std.exp() * eps)
        # Gaussian log-density of u, minus log |d tanh(u) / du| (the change of variables)
        log_prob = (-0.5 * eps.square() - log_std - _HALF_LOG_2PI
                    - paddle.log(1.0 - action.square() + 1e-6)).sum(axis=-1, keepdim=True)
        return action, log_prob

    def sample_actions(self, obs: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        """:meth:`sample`'s actions ``[batch, act_dim]`` and log-probabilities as ``[batch]``."""
        action, log_prob = self.sample(obs)
        return action, log_prob.squeeze(-1)

    @property
    def alpha(self) -> float:
        """The current entropy temperature (settable, as PARL's attribute)."""
        return float(self.temperature.log_alpha.exp().item())

    @alpha.setter
    def alpha(self, value: float) -> None:
        check_hyperparameter("alpha", value, 0.0, float("inf"), low_open=True)
        self.temperature.log_alpha.set_value(paddle.full([1], math.log(value), dtype="float32"))

    learn_inputs = LearnInputs(obs=OBSERVATIONS, action=CONTINUOUS_ACTIONS, reward=STEP_VALUES, next_obs=OBSERVATIONS,
                               terminal=TERMINALS)

    def learn(self, obs: paddle.Tensor, action: paddle.Tensor, reward: paddle.Tensor, next_obs: paddle.Tensor,
              terminal: paddle.Tensor) -> ActorCriticLosses:
        """One critic step, one actor step, one temperature step (with ``alpha_lr``), one soft
        target update.

        Args:
            obs, next_obs: ``[batch, obs_dim]``.
            action: ``[batch, act_dim]`` in [-1, 1].
            reward, terminal: ``[batch]`` or ``[batch, 1]`` (terminal is 1 only on a true episode
                end).

        Returns:
            ``(critic_loss, actor_loss)``, 0-D tensors.

        Raises:
            TypeError, ValueError: the arrays do not fit (see :mod:`parl_lite.core.learn_inputs`),
                e.g. ``action`` is not ``[N, act_dim]``; no update is made.
        """
        alpha = self.temperature.log_alpha.exp().detach()
        critic_loss = self._learn_critic(obs, action, column(reward), next_obs, column(terminal), alpha)
        actor_loss, log_prob = self._learn_actor(obs, alpha)
        if self.alpha_optimizer is not None:
            self._learn_alpha(self.alpha_optimizer, log_prob, action.shape[-1])
        self.sync_target()
        return ActorCriticLosses(critic_loss, actor_loss)

    def _learn_critic(self, obs, action, reward, next_obs, terminal, alpha) -> paddle.Tensor:
        with paddle.no_grad():
            next_action, next_log_prob = self.sample(next_obs)
            check_action_width(type(self).__name__, "action", action, next_action.shape[-1])
            next_q1, next_q2 = self.target_model.value(next_obs, next_action)
            soft_q = paddle.minimum(next_q1, next_q2) - alpha * next_log_prob
            target_q = reward + self.gamma * (1.0 - terminal) * soft_q
        q1, q2 = self.model.value(obs, action)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        self.critic_optimizer.clear_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        return critic_loss

    def _learn_actor(self, obs, alpha) -> tuple[paddle.Tensor, paddle.Tensor]:
        with frozen(self.model.get_critic_params()):
            new_action, log_prob = self.sample(obs)
            q1, q2 = self.model.value(obs, new_action)
            actor_loss = (alpha * log_prob - paddle.minimum(q1, q2)).mean()
        self.actor_optimizer.clear_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        return actor_loss, log_prob.detach()

    def _learn_alpha(self, optimizer: paddle.optimizer.Optimizer, log_prob: paddle.Tensor, act_dim: int) -> None:
        target_entropy = -float(act_dim) if self.target_entropy is None else self.target_entropy
        alpha_loss = -(self.temperature.log_alpha * (log_prob + target_entropy)).mean()
        optimizer.clear_grad()
        alpha_loss.backward()
        optimizer.step()
