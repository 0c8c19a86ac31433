"""Advantage Actor-Critic (Mnih et al., 2016; the synchronous A2C variant), PARL's ``A2C``.

One gradient step per batch on ``pi_loss + vf_loss_coeff * vf_loss + entropy_coeff * entropy`` with
``pi_loss = -sum(log pi(a|s) A)``, ``vf_loss = 0.5 * sum((V(s) - R)^2)`` and ``entropy = sum(H)``
(PARL's sums; ``reduction="mean"`` takes means instead). A negative ``entropy_coeff`` rewards
entropy, as in PARL. A2C and A3C share this update: A3C only differs in who collects the batch
(asynchronous remote actors with slightly stale weights, see :class:`parl_lite.train.AsyncTrainer`).

With ``optimizer="rmsprop"`` (RMSprop as torch defines it,
:class:`parl_lite.algorithms.optimizers.RMSprop`), ``reduction="mean"``, ``vf_loss_coeff = 2 *
vf_coef`` and ``entropy_coeff = -ent_coef`` this is Stable-Baselines3's A2C update, so RL-Zoo's
hyperparameters carry over.
"""
from typing import Any, NamedTuple

import paddle
import paddle.nn.functional as F

from parl_lite.algorithms.actor_critic import ActorCriticAlgorithm
from parl_lite.algorithms.common import GlobalNormClip, check_hyperparameter, reduction_of
from parl_lite.algorithms.optimizers import Adam, RMSprop
from parl_lite.core.learn_inputs import ACTIONS, OBSERVATIONS, STEP_VALUES_FLAT, LearnInputs
from parl_lite.core.model import Model
from parl_lite.core.samples import AdvantageBatch
from parl_lite.core.distributions import Categorical

__all__ = ["A2C", "A2CLosses"]


class A2CLosses(NamedTuple):
    """What :meth:`A2C.learn` returns (a tuple, as PARL's): 0-D tensors."""

    total_loss: paddle.Tensor
    pi_loss: paddle.Tensor
    vf_loss: paddle.Tensor
    entropy: paddle.Tensor


class A2C(ActorCriticAlgorithm):
    """A2C for discrete (as PARL) or continuous actions (see :class:`ActorCriticAlgorithm` for the
    models).

    Args:
        model: the policy (``policy(obs)``), with ``value(obs)`` when ``critic`` is None.
        vf_loss_coeff: weight of the value loss.
        critic: a separate value model.
        lr: the learning rate until ``learn`` is given one (PARL's A2C starts at 0.001).
        optimizer: ``"adam"`` (PARL's) or ``"rmsprop"`` (decay 0.99, epsilon 1e-5 added to the root
            mean square, as torch and SB3).
        max_grad_norm: global gradient-norm clip (PARL's: 40); None: no clipping.
        reduction: ``"sum"`` (PARL's) or ``"mean"`` of the losses over the batch.
        entropy_coeff: the weight of the entropy term when ``learn`` is given none.
        normalize_advantages: standardise the advantages of each batch.
    """

    def __init__(self, model: Model, vf_loss_coeff: float = 0.5, *, critic: Model | None = None, lr: float = 1e-3,
                 optimizer: str = "adam", max_grad_norm: float | None = 40.0, reduction: str = "sum",
                 entropy_coeff: float = 0.0, normalize_advantages: bool = False) -> None:
        super().__init__(model, critic)
        self.vf_loss_coeff = check_hyperparameter("vf_loss_coeff", vf_loss_coeff, 0.0, float("inf"))
        self.entropy_coeff = check_hyperparameter("entropy_coeff", entropy_coeff, -float("inf"), float("inf"))
        check_hyperparameter("lr", lr, 0.0, float("inf"), low_open=True)
        self.reduce = reduction_of(reduction)
        self.normalize_advantages = normalize_advantages
        clip = GlobalNormClip(max_grad_norm) if max_grad_norm else None
        if optimizer == "rmsprop":
            self.optimizer = RMSprop(lr, rho=0.99, epsilon=1e-5, parameters=self.parameters(), grad_clip=clip)
        elif optimizer == "adam":
            self.optimizer = Adam(learning_rate=lr, parameters=self.parameters(), grad_clip=clip)
        else:
            raise ValueError(f"optimizer must be 'adam' or 'rmsprop', got {optimizer!r}")

    learn_inputs = LearnInputs(obs=OBSERVATIONS, actions=ACTIONS, advantages=STEP_VALUES_FLAT,
                               target_values=STEP_VALUES_FLAT)
    sample_type = AdvantageBatch  # A2C's from the on-policy loop, A3C's from the asynchronous one

    def learn_arguments(self, sample: AdvantageBatch) -> dict[str, Any]:
        """An on-policy batch under :meth:`learn`'s names (PARL's): the returns are the value targets."""
        return {"obs": sample.obs, "actions": sample.actions, "advantages": sample.advantages,
                "target_values": sample.returns}

    def learn(self, obs: paddle.Tensor, actions: paddle.Tensor, advantages: paddle.Tensor,
              target_values: paddle.Tensor, learning_rate: float | None = None,
              entropy_coeff: float | None = None) -> A2CLosses:
        """One gradient step on a batch.

        Args:
            obs: ``[N, ...]``.
            actions: ``[N]`` (discrete) or ``[N, act_dim]``.
            advantages: ``[N]`` (e.g. n-step returns minus values, from GAE).
            target_values: ``[N]``, the value targets.
            learning_rate: when given, the learning rate from this step on.
            entropy_coeff: weight of the entropy term, negative rewards entropy; None: the
                constructor's.

        Returns:
            ``(total_loss, pi_loss, vf_loss, entropy)``, 0-D tensors.

        Raises:
            TypeError, ValueError: the arrays do not fit (see :mod:`parl_lite.core.learn_inputs`);
                no update is made.
        """
        if self.normalize_advantages and len(advantages) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        dist, values = self.distribution_and_value(obs)
        pi_loss = -self.reduce(self.checked_log_prob(dist, actions, "actions") * advantages)
        vf_loss = 0.5 * self.reduce((values.reshape([-1]) - target_values) ** 2)
        entropy = self.reduce(dist.entropy())
        total_loss = pi_loss + vf_loss * self.vf_loss_coeff + entropy * (
            self.entropy_coeff if entropy_coeff is None else entropy_coeff)
        if learning_rate:
            self.optimizer.set_lr(learning_rate)
        total_loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        return A2CLosses(total_loss, pi_loss, vf_loss, entropy)

    def prob_and_value(self, obs: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        """The action probabilities ``[batch, num_actions]`` and ``V(obs)`` of a discrete policy
        (one pass through a shared trunk: see :meth:`distribution_and_value`)."""
        dist, values = self.distribution_and_value(obs)
        if not isinstance(dist, Categorical):
            raise ValueError("A2C.prob_and_value: the policy is continuous; action probabilities need a discrete one")
        return F.softmax(dist.logits, axis=-1), values
