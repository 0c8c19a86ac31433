"""What PPO, A2C and IMPALA share: a policy and a value function on one or two models.

The policy is ``model.policy(obs)`` (or ``model(obs)`` when the model has no ``policy`` method) and
returns logits (discrete actions, :class:`Categorical`) or a ``(mean, std)`` pair (continuous,
:class:`DiagGaussian`; PARL's PPO convention). The value function is ``model.value(obs)`` on a
shared actor-critic model (one trunk, two heads), or ``critic(obs)`` when a separate critic model
is given.
"""

import paddle

from parl_lite.core.algorithm import Algorithm
from parl_lite.core.learn_inputs import check_action_indices, check_action_width
from parl_lite.core.model import Model
from parl_lite.core.distributions import Categorical, Distribution, make_distribution, policy_output

__all__ = ["ActorCriticAlgorithm"]


class ActorCriticAlgorithm(Algorithm):
    """Base of the actor-critic algorithms.

    Args:
        model: the policy, with a ``value(obs)`` method when ``critic`` is None.
        critic: a separate value model, ``critic(obs) -> [batch, 1]``.
        continuous_action: whether the policy is continuous (a ``(mean, std)`` pair) or discrete
            (logits); None: whichever the policy returns.
    """

    samples_from_policy = True

    def __init__(self, model: Model, critic: Model | None = None, continuous_action: bool | None = None) -> None:
        super().__init__(model)
        if critic is None and not callable(getattr(model, "value", None)):
            raise ValueError(f"{type(self).__name__} needs a value function: give the model a value(obs) "
                             "method or pass critic=")
        if critic is not None and not isinstance(critic, Model):
            raise TypeError(f"critic must be a parl_lite.Model, got {type(critic).__name__}")
        self.critic = critic
        self.continuous_action = continuous_action

    def parameters(self) -> list[paddle.Tensor]:
        """Every trainable parameter of the policy and the value function, each once."""
        models = [m for m in (self.model, self.critic) if m is not None]
        return list({id(p): p for m in models for p in m.parameters()}.values())

    def distribution(self, obs: paddle.Tensor) -> Distribution:
        """The policy's action distribution at ``obs``.

        Raises:
            ValueError: the policy's output does not match ``continuous_action``.
        """
        return self._distribution_of(policy_output(self.model, obs))

    def distribution_and_value(self, obs: paddle.Tensor) -> tuple[Distribution, paddle.Tensor]:
        """The policy's distribution and ``V(obs)`` (``[batch, 1]``) at ``obs``: one pass through
        a shared trunk when the model has ``policy_and_value(obs)`` (a convolutional one), else
        the two computed apart."""
        both = getattr(self.model, "policy_and_value", None) if self.critic is None else None
        if both is None:
            return self.distribution(obs), self.value(obs)
        output, value = both(obs)
        return self._distribution_of(output), value

    def _distribution_of(self, output: paddle.Tensor | tuple[paddle.Tensor, paddle.Tensor]) -> Distribution:
        if self.continuous_action is not None and isinstance(output, paddle.Tensor) == self.continuous_action:
            expected = "a (mean, std) pair" if self.continuous_action else "a logits tensor"
            raise ValueError(f"{type(self).__name__}: continuous_action={self.continuous_action}, so the policy must "
                             f"return {expected}; it returned {type(output).__name__}")
        return make_distribution(output)

    def checked_log_prob(self, dist: Distribution, actions: paddle.Tensor, name: str) -> paddle.Tensor:
        """``dist.log_prob(actions)`` after checking that ``actions`` (``learn``'s argument ``name``)
        fit the policy: ``[N]`` indices in ``[0, num_actions)`` for a discrete one, ``[N, act_dim]``
        for a continuous one.

        Raises:
            ValueError: they do not (the message names ``name`` and what is wrong).
        """
        if isinstance(dist, Categorical):
            check_action_indices(type(self).__name__, name, actions, dist.logits.shape[-1], column=False)
        else:
            check_action_width(type(self).__name__, name, actions, dist.mean.shape[-1])
        return dist.log_prob(actions)

    def value(self, obs: paddle.Tensor) -> paddle.Tensor:
        """``V(obs)``, as the value model returns it (``[batch, 1]``)."""
        return self.critic(obs) if self.critic is not None else self.model.value(obs)

    def predict(self, obs: paddle.Tensor) -> paddle.Tensor:
        """Greedy actions (the mode of the policy): the mean (continuous) or the most probable action."""
        return self.distribution(obs).mode()

    def sample_actions(self, obs: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        """Actions drawn from the policy and their log-probabilities ``[batch]``."""
        with paddle.no_grad():
            dist = self.distribution(obs)
            actions = dist.sample()
            return actions, dist.log_prob(actions)
