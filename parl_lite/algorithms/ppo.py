"""Proximal Policy Optimization (Schulman et al., 2017): one minibatch step of the clipped surrogate
objective, with a clipped or plain value loss and an entropy bonus (PARL's ``PPO``).

The caller (an agent, or :class:`parl_lite.train.OnPolicyTrainer`) runs the epochs and minibatches
over an on-policy batch, as PARL's PPO agent does. Policy and value function come from
:class:`ActorCriticAlgorithm`: one shared actor-critic model (``model.policy`` / ``model.value``) or
a policy model and a separate ``critic``; logits give discrete actions, a ``(mean, std)`` pair
diagonal-Gaussian ones.
"""
from typing import Any, NamedTuple

import paddle

from parl_lite.algorithms.actor_critic import ActorCriticAlgorithm
from parl_lite.algorithms.common import GlobalNormClip, check_hyperparameter
from parl_lite.algorithms.optimizers import Adam
from parl_lite.core.learn_inputs import ACTIONS, OBSERVATIONS, STEP_VALUES_FLAT, LearnInputs
from parl_lite.core.model import Model
from parl_lite.core.samples import AdvantageBatch

__all__ = ["PPO", "PPOLosses"]


class PPOLosses(NamedTuple):
    """What :meth:`PPO.learn` returns (a tuple, as PARL's): plain floats."""

    value_loss: float
    action_loss: float
    entropy: float


class PPO(ActorCriticAlgorithm):
    """PPO for discrete or continuous actions.

    Args:
        model: the policy (``policy(obs)``, or ``forward``), with ``value(obs)`` when ``critic``
            is None.
        clip_param: surrogate clip epsilon (and the value clip's, with ``use_clipped_value_loss``).
        value_loss_coef: weight of the value loss ``0.5 * (V - R)^2``.
        entropy_coef: weight of the entropy bonus.
        initial_lr: Adam learning rate (``learn(..., lr=)`` or ``alg.optimizer.set_lr`` change it).
        eps: Adam's epsilon.
        max_grad_norm: clip of the global gradient norm; None: no clipping.
        use_clipped_value_loss: clip the value change around the old value to ``clip_param``.
        norm_adv: standardise the advantages of each minibatch (of more than one row).
        continuous_action: the policy returns ``(mean, std)`` (True) or logits (False).
        critic: a separate value model ``critic(obs) -> [batch, 1]``; None uses ``model.value``.
    """

    def __init__(self, model: Model, clip_param: float = 0.1, value_loss_coef: float = 0.5,
                 entropy_coef: float = 0.01, initial_lr: float = 2.5e-4, eps: float = 1e-5,
                 max_grad_norm: float | None = 0.5, use_clipped_value_loss: bool = True, norm_adv: bool = True,
                 continuous_action: bool = False, *, critic: Model | None = None) -> None:
        super().__init__(model, critic, continuous_action)
        self.clip_param = check_hyperparameter("clip_param", clip_param, 0.0, float("inf"), low_open=True)
        self.value_loss_coef = check_hyperparameter("value_loss_coef", value_loss_coef, 0.0, float("inf"))
        self.entropy_coef = check_hyperparameter("entropy_coef", entropy_coef, -float("inf"), float("inf"))
        check_hyperparameter("initial_lr", initial_lr, 0.0, float("inf"), low_open=True)
        check_hyperparameter("eps", eps, 0.0, float("inf"), low_open=True)
        self.max_grad_norm = max_grad_norm
        self.use_clipped_value_loss, self.norm_adv = use_clipped_value_loss, norm_adv
        clip = GlobalNormClip(max_grad_norm) if max_grad_norm else None
        self.optimizer = Adam(learning_rate=initial_lr, parameters=self.parameters(), epsilon=eps, grad_clip=clip)
        # (advantages, their in-place version, normalised): the last batch_adv normalised
        self._normalized: tuple[paddle.Tensor, int, paddle.Tensor] | None = None

    learn_inputs = LearnInputs(batch_obs=OBSERVATIONS, batch_action=ACTIONS, batch_value=STEP_VALUES_FLAT,
                               batch_return=STEP_VALUES_FLAT, batch_logprob=STEP_VALUES_FLAT,
                               batch_adv=STEP_VALUES_FLAT)
    sample_type = AdvantageBatch  # the on-policy loop's; it runs the epochs and minibatches

    def learn_arguments(self, sample: AdvantageBatch) -> dict[str, Any]:
        """An on-policy (mini)batch under :meth:`learn`'s names (PARL's)."""
        return {"batch_obs": sample.obs, "batch_action": sample.actions, "batch_value": sample.values,
                "batch_return": sample.returns, "batch_logprob": sample.log_probs, "batch_adv": sample.advantages}

    def learn(self, batch_obs: paddle.Tensor, batch_action: paddle.Tensor, batch_value: paddle.Tensor,
              batch_return: paddle.Tensor, batch_logprob: paddle.Tensor, batch_adv: paddle.Tensor,
              lr: float | None = None) -> PPOLosses:
        """One Adam step on a minibatch.

        Args:
            batch_obs: ``[N, ...]``.
            batch_action: ``[N]`` (discrete) or ``[N, act_dim]`` (continuous).
            batch_value: ``[N]``, the value estimates when the actions were taken.
            batch_return: ``[N]``, the value targets.
            batch_logprob: ``[N]``, the actions' log-probabilities when they were taken.
            batch_adv: ``[N]``, the advantages (e.g. from :func:`parl_lite.utils.gae.gae`).
            lr: when given, the learning rate from this step on.

        Returns:
            ``(value_loss, action_loss, entropy)`` as floats.

        Raises:
            TypeError, ValueError: the arrays do not fit (see :mod:`parl_lite.core.learn_inputs`);
                no update is made.
        """
        dist, values = self.distribution_and_value(batch_obs)
        action_log_probs = self.checked_log_prob(dist, batch_action, "batch_action")
        entropy = dist.entropy().mean()
        # one row has no spread to normalise by (its std is NaN): used as it is, as Stable-Baselines3 does
        advantages = self._normalized_advantages(batch_adv) if self.norm_adv and batch_adv.shape[0] > 1 else batch_adv
        ratio = paddle.exp(action_log_probs - batch_logprob)
        surrogate = paddle.minimum(ratio * advantages,
                                   paddle.clip(ratio, 1.0 - self.clip_param, 1.0 + self.clip_param) * advantages)
        action_loss = -surrogate.mean()

        values = values.reshape([-1])
        value_losses = (values - batch_return) ** 2
        if self.use_clipped_value_loss:
            clipped = batch_value + paddle.clip(values - batch_value, -self.clip_param, self.clip_param)
            value_losses = paddle.maximum(value_losses, (clipped - batch_return) ** 2)
        value_loss = 0.5 * value_losses.mean()

        loss = value_loss * self.value_loss_coef + action_loss - entropy * self.entropy_coef
        if lr:
            self.optimizer.set_lr(lr)
        loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        return PPOLosses(value_loss.item(), action_loss.item(), entropy.item())

    def _normalized_advantages(self, advantages: paddle.Tensor) -> paddle.Tensor:
        """``(advantages - mean) / (std + 1e-8)``, computed once for a batch given again unchanged
        (an epoch over a batch that fits one minibatch passes the same tensor every time: the
        normalisation would cost a twentieth of each step)."""
        last = self._normalized
        version = advantages._inplace_version()
        if last is not None and last[0] is advantages and last[1] == version:
            return last[2]
        normalized = (advantages - advantages.mean()) / (_std(advantages) + 1e-8)
        if advantages.stop_gradient:  # data, not part of a graph: the result can serve the next call
            self._normalized = (advantages, version, normalized)
        return normalized

    def sample(self, obs: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor, paddle.Tensor]:
        """Actions drawn from the policy, in PARL's shapes.

        Returns:
            ``(value [batch, 1], action [1, batch, ...], action_log_probs [1, batch],
            action_entropy)``; the entropy is ``[batch]`` for a discrete policy and its mean, a
            0-D tensor, for a continuous one (as PARL's).
        """
        dist = self.distribution(obs)
        actions = dist.sample()
        entropy = dist.entropy()
        return (self.value(obs), actions.unsqueeze(0), dist.log_prob(actions).unsqueeze(0),
                entropy.mean() if self.continuous_action else entropy)


def _std(x: paddle.Tensor) -> paddle.Tensor:
    """``x.std()`` (unbiased, over all elements) with the same operations as paddle's CPU
    ``paddle.std``, less its Python overhead: that one also checks the degrees of freedom with a
    host round trip on every call (a tenth of a PPO minibatch step)."""
    squares = paddle.pow(x - x.mean(keepdim=True), 2).sum()
    return paddle.sqrt(squares / paddle.to_tensor(float(x.size - 1), dtype=x.dtype))
