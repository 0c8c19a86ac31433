"""Advantage Actor-Critic (Mnih et al., 2016; the synchronous A2C variant).

One gradient step per batch on ``-log pi(a|s) A + value_coef * (V(s) - R)^2 - entropy_coef * H`` (the
value term as Stable-Baselines3 writes it, so RL-Zoo's ``vf_coef`` means the same here), with RMSprop as
torch defines it (:class:`parl_lite.algorithms.optimizers.RMSprop`).
A2C and A3C share this update: A3C only differs in who collects the batch (asynchronous remote
actors with slightly stale weights, see :class:`parl_lite.train.AsyncTrainer`).
"""

from collections.abc import Mapping
import paddle

from parl_lite.algorithms.actor_critic import ActorCriticAlgorithm
from parl_lite.algorithms.common import GlobalNormClip
from parl_lite.algorithms.optimizers import RMSprop
from parl_lite.core.model import Model

__all__ = ["A2C"]


class A2C(ActorCriticAlgorithm):
    """A2C for discrete or continuous actions (see :class:`ActorCriticAlgorithm` for the models).

    Args:
        model: the policy, with ``value(obs)`` when ``critic`` is None.
        critic: a separate value model.
        lr: learning rate.
        value_coef: weight of the value loss ``(V(s) - R)^2``.
        entropy_coef: weight of the entropy bonus.
        max_grad_norm: global gradient-norm clip; None: no clipping.
        optimizer: ``"rmsprop"`` (decay 0.99, epsilon 1e-5 added to the root mean square, as SB3) or
            ``"adam"``.
        normalize_advantages: standardise the advantages of each batch.
    """

    def __init__(
        self,
        model: Model,
        critic: Model | None = None,
        lr: float = 7e-4,
        value_coef: float = 0.5,
        entropy_coef: float = 0.0,
        max_grad_norm: float | None = 0.5,
        optimizer: str = "rmsprop",
        normalize_advantages: bool = False,
    ) -> None:
        super().__init__(model, critic)
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.value_coef, self.entropy_coef = value_coef, entropy_coef
        self.normalize_advantages = normalize_advantages
        clip = GlobalNormClip(max_grad_norm) if max_grad_norm else None
        if optimizer == "rmsprop":
            self.optimizer = RMSprop(lr, rho=0.99, epsilon=1e-5, parameters=self.parameters(), grad_clip=clip)
        elif optimizer == "adam":
            self.optimizer = paddle.optimizer.Adam(learning_rate=lr, parameters=self.parameters(), grad_clip=clip)
        else:
            raise ValueError(f"optimizer must be 'rmsprop' or 'adam', got {optimizer!r}")

    def learn(self, batch: Mapping[str, paddle.Tensor]) -> dict[str, paddle.Tensor]:
        """One gradient step on a batch.

        Args:
            batch: ``obs`` ``[N, ...]``; ``actions`` ``[N]`` or ``[N, act_dim]``; ``advantages``
                ``[N]`` (e.g. n-step returns minus values, from GAE); ``returns`` ``[N]`` value targets.

        Returns:
            ``policy_loss``, ``value_loss``, ``entropy``.
        """
        obs, advantages = batch["obs"], batch["advantages"]
        if self.normalize_advantages and len(advantages) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        dist = self.distribution(obs)
        policy_loss = -(dist.log_prob(batch["actions"]) * advantages).mean()
        value_loss = ((self.value(obs) - batch["returns"]) ** 2).mean()
        entropy = dist.entropy().mean()
        loss = policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy
        loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        return {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}
