"""PARL's ``parl.core.paddle.policy_distribution``: the policy distributions under PARL's names and
constructors, on parl_lite's own (:mod:`parl_lite.core.distributions`).

PARL's classes take the policy's output as one ``logits`` argument (a ``[batch, num_actions]``
tensor, or a ``(mean, logstd)`` pair of ``[batch, act_dim]`` tensors) and call the log-probability
``logp``; everything else is parl_lite's :class:`Categorical` and :class:`DiagGaussian`.
"""
from typing import Any
from collections.abc import Sequence

import numpy as np
import paddle
import paddle.nn.functional as F

from parl_lite.core.distributions import Categorical, DiagGaussian

__all__ = ["PolicyDistribution", "CategoricalDistribution", "SoftCategoricalDistribution",
           "DiagGaussianDistribution", "SoftMultiCategoricalDistribution"]

_GUMBEL_EPS = 1e-4  # PARL's bound of the uniform draws of the relaxed (soft) samples


class PolicyDistribution:
    """What every policy distribution offers: ``sample``, ``entropy``, ``kl(other)``, ``logp(actions)``."""

    def sample(self) -> paddle.Tensor:
        """A draw from the distribution."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample()")

    def entropy(self) -> paddle.Tensor:
        """The entropy, one value per batch row."""
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy()")

    def kl(self, other: Any) -> paddle.Tensor:
        """``KL(self || other)``, one value per batch row."""
        raise NotImplementedError(f"{type(self).__name__} does not implement kl()")

    def logp(self, actions: paddle.Tensor) -> paddle.Tensor:
        """Log-probabilities of ``actions``, one value per batch row."""
        raise NotImplementedError(f"{type(self).__name__} does not implement logp()")


def _check_rank(owner: str, name: str, tensor: Any, rank: int) -> None:
    if not isinstance(tensor, paddle.Tensor) or len(tensor.shape) != rank:
        shape = tensor.shape if isinstance(tensor, paddle.Tensor) else type(tensor).__name__
        raise ValueError(f"{owner}: {name} must be a {rank}-D tensor [batch, actions], got {shape}")


class CategoricalDistribution(Categorical, PolicyDistribution):
    """Categorical distribution for discrete actions.

    Args:
        logits: unnormalised log-probabilities, ``[batch, num_actions]``.
    """

    def __init__(self, logits: paddle.Tensor) -> None:
        _check_rank(type(self).__name__, "logits", logits, 2)
        super().__init__(logits)

    def logp(self, actions: paddle.Tensor, eps: float = 1e-6) -> paddle.Tensor:
        """``log(p(actions) + eps)`` (PARL's guard against underflow), ``[batch]``."""
        return paddle.log(paddle.exp(self.log_prob(actions)) + eps)


class SoftCategoricalDistribution(CategoricalDistribution):
    """A categorical distribution whose ``sample`` is relaxed: the softmax of the Gumbel-perturbed
    logits, ``[batch, num_actions]`` (as MADDPG uses it)."""

    def sample(self) -> paddle.Tensor:
        uniform = paddle.uniform(self.logits.shape, dtype=self.logits.dtype, min=_GUMBEL_EPS, max=1.0 - _GUMBEL_EPS)
        return F.softmax(self.logits - paddle.log(-paddle.log(uniform)), axis=-1)


class DiagGaussianDistribution(DiagGaussian, PolicyDistribution):
    """Gaussian with diagonal covariance for continuous actions.

    Args:
        logits: ``(mean, logstd)``, each ``[batch, act_dim]``.
    """

    def __init__(self, logits: Sequence[paddle.Tensor]) -> None:
        owner = type(self).__name__
        if not isinstance(logits, (tuple, list)) or len(logits) != 2:
            raise ValueError(f"{owner}: logits must be a (mean, logstd) pair, got {type(logits).__name__}")
        _check_rank(owner, "mean", logits[0], 2)
        _check_rank(owner, "logstd", logits[1], 2)
        super().__init__(logits[0], logits[1])
        self.logits = logits

    @property
    def logstd(self) -> paddle.Tensor:
        """The log standard deviation, ``[batch, act_dim]``."""
        return self.log_std

    def logp(self, actions: paddle.Tensor) -> paddle.Tensor:
        """Log density of ``actions`` ``[batch, act_dim]``, summed over the action axis: ``[batch]``."""
        return self.log_prob(actions)


class SoftMultiCategoricalDistribution(PolicyDistribution):
    """Independent relaxed categoricals for a MultiDiscrete action space.

    Args:
        logits: ``[batch, sum(high - low + 1)]``, the logits of every sub-action side by side.
        low: the lowest value of each sub-action.
        high: the highest value of each sub-action.
    """

    def __init__(self, logits: paddle.Tensor, low: Sequence[int], high: Sequence[int]) -> None:
        self.logits, self.low, self.high = logits, np.asarray(low), np.asarray(high)
        sections = [int(size) for size in self.high - self.low + 1]
        self.categoricals = [SoftCategoricalDistribution(part)
                             for part in paddle.split(logits, num_or_sections=sections, axis=-1)]

    def sample(self) -> paddle.Tensor:
        """Each sub-action's relaxed sample offset by its ``low``, side by side."""
        return paddle.concat([float(low) + dist.sample() for low, dist in zip(self.low, self.categoricals,
                                                                              strict=True)], axis=-1)

    def entropy(self) -> paddle.Tensor:
        """The sum of the sub-actions' entropies, ``[batch]``."""
        return paddle.add_n([dist.entropy() for dist in self.categoricals])

    def kl(self, other: "SoftMultiCategoricalDistribution") -> paddle.Tensor:
        """The sum of the sub-actions' KL divergences, ``[batch]``."""
        return paddle.add_n([dist.kl(theirs) for dist, theirs in zip(self.categoricals, other.categoricals,
                                                                      strict=True)])
