"""Proximal Policy Optimization (Schulman et al., 2017): the clipped surrogate objective and/or the
adaptive KL penalty, clipped value loss, minibatch epochs over one on-policy batch.

Policy and value function come from :class:`ActorCriticAlgorithm`: one shared actor-critic model
(``model.policy`` / ``model.value``) or a policy model and a separate ``critic``; logits give
discrete actions, a ``(mean, log_std)`` pair diagonal-Gaussian ones.
"""

from collections.abc import Iterator, Mapping
import numpy as np
import paddle

from parl_lite.algorithms.actor_critic import ActorCriticAlgorithm
from parl_lite.algorithms.common import GlobalNormClip
from parl_lite.core.model import Model
from parl_lite.utils.distributions import DiagGaussian, Distribution

__all__ = ["PPO"]


class PPO(ActorCriticAlgorithm):
    """PPO for discrete or continuous actions.

    Args:
        model: the policy (``policy(obs)`` or ``forward``), with ``value(obs)`` when ``critic``
            is None.
        clip_param: surrogate clip epsilon; None turns clipping off (pure KL-penalty PPO).
        critic: a separate value model ``critic(obs) -> [batch, 1]``; None uses ``model.value``.
        lr: Adam learning rate (change it during training with ``alg.optimizer.set_lr``).
        epochs: passes over the batch per :meth:`learn`.
        batch_size: minibatch size (the batch is shuffled each epoch, unless it fits in one).
        value_coef: weight of the value loss ``(V - R)^2`` (Stable-Baselines3's form, so RL-Zoo's
            ``vf_coef`` means the same here).
        entropy_coef: weight of the entropy bonus.
        value_clip_param: clip of the value change around the old value; None: unclipped loss.
        kl_coef: initial weight ``beta`` of the ``KL(old || new)`` penalty; 0 with ``kl_target``
            None turns the penalty off.
        kl_target: when set, ``beta`` adapts after each learn: doubled when the measured KL
            exceeds 1.5 target, halved when it is under target / 1.5.
        max_grad_norm: global gradient-norm clip; None: no clipping.
        normalize_advantages: standardise advantages per minibatch.
        seed: seed of the minibatch shuffling.
    """

    def __init__(
        self,
        model: Model,
        clip_param: float | None = 0.2,
        critic: Model | None = None,
        lr: float = 3e-4,
        epochs: int = 10,
        batch_size: int = 64,
        value_coef: float = 0.5,
        entropy_coef: float = 0.0,
        value_clip_param: float | None = None,
        kl_coef: float = 0.0,
        kl_target: float | None = None,
        max_grad_norm: float | None = 0.5,
        normalize_advantages: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(model, critic)
        for name, value in (("lr", lr), ("epochs", epochs), ("batch_size", batch_size)):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if clip_param is not None and clip_param <= 0:
            raise ValueError(f"clip_param must be positive or None, got {clip_param}")
        if kl_target is not None and (kl_target <= 0 or kl_coef <= 0):
            raise ValueError(f"kl_target needs kl_target > 0 and kl_coef > 0, got {kl_target} and {kl_coef}")
        if clip_param is None and kl_coef <= 0:
            raise ValueError("clip_param=None needs a KL penalty (kl_coef > 0), otherwise nothing limits the update")
        self.clip_param, self.value_clip_param = clip_param, value_clip_param
        self.epochs, self.batch_size = epochs, batch_size
        self.value_coef, self.entropy_coef = value_coef, entropy_coef
        self.kl_coef, self.kl_target = kl_coef, kl_target
        self.normalize_advantages = normalize_advantages
        self.rng = np.random.default_rng(seed)
        clip = GlobalNormClip(max_grad_norm) if max_grad_norm else None
        self.optimizer = paddle.optimizer.Adam(learning_rate=lr, parameters=self.parameters(), epsilon=1e-5,
                                               grad_clip=clip)

    # ------------------------------------------------------------------ learning
    def learn(self, batch: Mapping[str, paddle.Tensor]) -> dict[str, float]:
        """``epochs`` passes of minibatch Adam steps over one on-policy batch.

        The policy at the start of the call is the "old" policy of the KL penalty and of the
        reported ``kl``: call ``learn`` once per batch, with the weights that collected it.

        Args:
            batch: ``obs`` ``[N, ...]``; ``actions`` ``[N]`` (discrete) or ``[N, act_dim]``
                (continuous); ``log_probs`` ``[N]``, of the actions when they were taken;
                ``advantages`` ``[N]`` (e.g. from :func:`parl_lite.utils.gae.gae`); ``returns``
                ``[N]`` value targets; ``values`` ``[N]``, the value estimates when the actions
                were taken.

        Returns:
            Mean ``policy_loss``, ``value_loss``, ``entropy``, ``clip_fraction`` over the
            minibatches; ``kl``, the mean ``KL(old || new)`` over the batch after the update;
            ``kl_coef``, the penalty weight for the next call.
        """
        keys = ("obs", "actions", "log_probs", "advantages", "returns", "values")
        batch = {key: batch[key] for key in keys}
        with paddle.no_grad():
            old_dist = self.distribution(batch["obs"])
        stats: dict[str, list[paddle.Tensor]] = {key: [] for key in ("policy_loss", "value_loss", "entropy",
                                                                     "clip_fraction")}
        for mb, mb_old in self._minibatches(batch, old_dist):
            for key, value in self._minibatch_step(mb, mb_old).items():
                stats[key].append(value)
        with paddle.no_grad():
            kl = float(old_dist.kl(self.distribution(batch["obs"])).mean())
        if self.kl_target is not None:
            if kl > 1.5 * self.kl_target:
                self.kl_coef *= 2.0
            elif kl < self.kl_target / 1.5:
                self.kl_coef /= 2.0
        # one host copy per statistic (a float() per minibatch would wait on each step)
        result = {key: float(np.mean(paddle.stack(values).numpy().astype(np.float64))) for key, values in stats.items()}
        result.update(kl=kl, kl_coef=self.kl_coef)
        return result

    def _minibatches(self, batch: dict[str, paddle.Tensor],
                     old_dist: Distribution) -> Iterator[tuple[dict[str, paddle.Tensor], Distribution]]:
        """Every epoch's minibatches (advantages normalised) with the old policy on their rows.

        A batch no larger than ``batch_size`` is used whole in every epoch, unshuffled: its mean
        loss does not depend on the order of its rows, and normalising it once is enough.
        """
        n = batch["obs"].shape[0]
        if self.batch_size >= n:
            whole = {**batch, "advantages": self._normalized(batch["advantages"])}
            for _ in range(self.epochs):
                yield whole, old_dist
            return
        for _ in range(self.epochs):
            order = self.rng.permutation(n)
            for start in range(0, n, self.batch_size):
                index = paddle.to_tensor(order[start:start + self.batch_size])
                mb = {key: paddle.gather(value, index) for key, value in batch.items()}
                mb["advantages"] = self._normalized(mb["advantages"])
                yield mb, _gather_distribution(old_dist, index)

    def _normalized(self, advantages: paddle.Tensor) -> paddle.Tensor:
        """Standardised advantages (per minibatch), when ``normalize_advantages``."""
        if self.normalize_advantages and len(advantages) > 1:
            return (advantages - advantages.mean()) / (_std(advantages) + 1e-8)
        return advantages

    def _minibatch_step(self, mb: dict[str, paddle.Tensor], old_dist: Distribution) -> dict[str, paddle.Tensor]:
        advantages = mb["advantages"]
        dist = self.distribution(mb["obs"])
        ratio = paddle.exp(dist.log_prob(mb["actions"]) - mb["log_probs"])
        surrogate = ratio * advantages
        if self.clip_param is not None:
            clipped = paddle.clip(ratio, 1.0 - self.clip_param, 1.0 + self.clip_param) * advantages
            surrogate = paddle.minimum(surrogate, clipped)
        policy_loss = -surrogate.mean()
        if self.kl_coef > 0:
            policy_loss = policy_loss + self.kl_coef * old_dist.kl(dist).mean()

        value = self.value(mb["obs"])
        value_loss = (value - mb["returns"]) ** 2
        if self.value_clip_param is not None:
            clipped_value = mb["values"] + paddle.clip(value - mb["values"], -self.value_clip_param,
                                                       self.value_clip_param)
            value_loss = paddle.maximum(value_loss, (clipped_value - mb["returns"]) ** 2)
        value_loss = value_loss.mean()

        entropy = dist.entropy().mean()
        loss = policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy
        loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        clip_fraction = ((ratio - 1.0).abs() > (self.clip_param or float("inf"))).astype("float32").mean()
        return {"policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(),
                "entropy": entropy.detach(), "clip_fraction": clip_fraction}


def _gather_distribution(dist: Distribution, index: paddle.Tensor) -> Distribution:
    """The rows ``index`` of a (constant) distribution."""
    if isinstance(dist, DiagGaussian):
        return type(dist)(paddle.gather(dist.mean, index), paddle.gather(dist.log_std, index))
    return type(dist)(paddle.gather(dist.logits, index))


def _std(x: paddle.Tensor) -> paddle.Tensor:
    """``x.std()`` (unbiased, over all elements) with the same operations as paddle's CPU
    ``paddle.std``, less its Python overhead: that one also checks the degrees of freedom with a
    host round trip on every call (a tenth of a PPO minibatch step)."""
    squares = paddle.pow(x - x.mean(keepdim=True), 2).sum()
    return paddle.sqrt(squares / paddle.to_tensor(float(x.size - 1), dtype=x.dtype))
