"""Action distributions for policy-gradient algorithms (paddle tensors, batched on the last axis).

``Categorical(logits)`` for discrete actions and ``DiagGaussian(mean, log_std)`` for continuous
ones share one interface: ``sample()``, ``mode()``, ``log_prob(actions)``, ``entropy()`` and
``kl(other)`` (``KL(self || other)``), each reducing the action axis so that every method returns
one value per batch row. Sampling draws from paddle's global generator, so ``paddle.seed``
makes it repeat.

:func:`policy_distribution` is a policy model's distribution at a batch of observations (the
learner's actor-critic algorithms and the rollout actors both use it).
"""
import math
from collections.abc import Sequence
from typing import Any

import paddle
import paddle.nn.functional as F

__all__ = ["Categorical", "DiagGaussian", "make_distribution", "policy_output", "policy_distribution"]

_LOG_2PI = math.log(2.0 * math.pi)


class Categorical:
    """A categorical distribution over ``logits.shape[-1]`` actions.

    Args:
        logits: unnormalised log-probabilities, shape ``[..., num_actions]``.
    """

    def __init__(self, logits: paddle.Tensor) -> None:
        self.logits = F.log_softmax(logits, axis=-1)  # normalised log-probabilities

    @property
    def probs(self) -> paddle.Tensor:
        """Action probabilities, shape ``[..., num_actions]``."""
        return paddle.exp(self.logits)

    def sample(self) -> paddle.Tensor:
        """Actions drawn with the Gumbel-max trick, int64, shape ``[...]``."""
        uniform = paddle.rand(self.logits.shape, dtype=self.logits.dtype).clip(1e-10, 1.0 - 1e-7)
        return paddle.argmax(self.logits - paddle.log(-paddle.log(uniform)), axis=-1)

    def mode(self) -> paddle.Tensor:
        """The most probable action, int64, shape ``[...]``."""
        return paddle.argmax(self.logits, axis=-1)

    def log_prob(self, actions: paddle.Tensor) -> paddle.Tensor:
        """``log p(actions)``, shape ``[...]``; ``actions`` holds integer indices."""
        index = actions.astype("int64").unsqueeze(-1)
        return paddle.take_along_axis(self.logits, index, axis=-1).squeeze(-1)

    def entropy(self) -> paddle.Tensor:
        """``-sum p log p``, shape ``[...]``."""
        return -(self.probs * self.logits).sum(axis=-1)

    def kl(self, other: "Distribution") -> paddle.Tensor:
        """``KL(self || other) = sum p (log p - log q)``, shape ``[...]``."""
        if not isinstance(other, Categorical):
            raise TypeError(f"kl: other must be a Categorical, got {type(other).__name__}")
        return (self.probs * (self.logits - other.logits)).sum(axis=-1)


class DiagGaussian:
    """A Gaussian with diagonal covariance; the last axis holds the action dimensions.

    Args:
        mean: shape ``[..., act_dim]``.
        log_std: log standard deviation, broadcastable to ``mean`` (e.g. a state-independent
            parameter of shape ``[act_dim]``).
    """

    def __init__(self, mean: paddle.Tensor, log_std: paddle.Tensor) -> None:
        self.mean = mean
        self.log_std = paddle.broadcast_to(log_std, mean.shape)

    @property
    def std(self) -> paddle.Tensor:
        return paddle.exp(self.log_std)

    def sample(self) -> paddle.Tensor:
        """``mean + std * eps`` with ``eps ~ N(0, I)``, shape ``[..., act_dim]``."""
        return self.mean + self.std * paddle.randn(self.mean.shape, dtype=self.mean.dtype)

    def mode(self) -> paddle.Tensor:
        """The mean."""
        return self.mean

    def log_prob(self, actions: paddle.Tensor) -> paddle.Tensor:
        """Log density of ``actions`` summed over the action axis, shape ``[...]``."""
        z = (actions - self.mean) / self.std
        return (-0.5 * z * z - self.log_std - 0.5 * _LOG_2PI).sum(axis=-1)

    def entropy(self) -> paddle.Tensor:
        """``sum(log_std + 0.5 * log(2 pi e))``, shape ``[...]``."""
        return (self.log_std + 0.5 * (_LOG_2PI + 1.0)).sum(axis=-1)

    def kl(self, other: "Distribution") -> paddle.Tensor:
        """Closed-form ``KL(self || other)``, shape ``[...]``."""
        if not isinstance(other, DiagGaussian):
            raise TypeError(f"kl: other must be a DiagGaussian, got {type(other).__name__}")
        var, other_var = paddle.exp(2.0 * self.log_std), paddle.exp(2.0 * other.log_std)
        diff = self.mean - other.mean
        terms = other.log_std - self.log_std + (var + diff * diff) / (2.0 * other_var) - 0.5
        return terms.sum(axis=-1)


Distribution = Categorical | DiagGaussian


def make_distribution(params: paddle.Tensor | Sequence[paddle.Tensor]) -> Distribution:
    """Build the distribution a policy head returned (PARL's PPO convention).

    Args:
        params: a logits tensor (discrete actions) or a ``(mean, std)`` pair (continuous).

    Returns:
        :class:`Categorical` or :class:`DiagGaussian`.
    """
    if isinstance(params, paddle.Tensor):
        return Categorical(params)
    if isinstance(params, (tuple, list)) and len(params) == 2:
        return DiagGaussian(params[0], paddle.log(params[1]))
    raise TypeError(
        "a policy must return a logits tensor or a (mean, std) pair, "
        f"got {type(params).__name__}"
    )


def policy_output(model: Any, obs: paddle.Tensor) -> paddle.Tensor | tuple[paddle.Tensor, paddle.Tensor]:
    """What a policy model gives at ``obs``: ``model.policy(obs)``, or ``model(obs)`` when the
    model has no ``policy`` method; logits (discrete actions) or a ``(mean, std)`` pair
    (continuous), PARL's PPO convention."""
    return getattr(model, "policy", model)(obs)


def policy_distribution(model: Any, obs: paddle.Tensor) -> Distribution:
    """The action distribution of a policy model at ``obs`` (see :func:`policy_output`)."""
    return make_distribution(policy_output(model, obs))
