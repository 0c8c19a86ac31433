"""Running normalisation of observations and rewards (what SB3's ``VecNormalize`` does), kept where
it travels with the policy.

- :class:`ObsNormalizer` is a layer of the model: ``(obs - mean) / sqrt(var + epsilon)``, clipped,
  with the running mean, variance and count as buffers. So the statistics are in every checkpoint
  (``Agent.save``, a trainer's), in the weights sent to remote actors, and in the exported ONNX
  policy, and ``predict`` takes raw observations. The training loop updates them
  (:meth:`ObsNormalizer.update`) with the raw observations it collects; they never change during a
  forward pass.
- :class:`RewardScaler` divides rewards by the running standard deviation of the discounted return
  (and clips them), for learning only: evaluations and reported returns use the raw rewards. Its
  state goes into the trainer's checkpoint.
"""
from typing import Any

import numpy as np
import paddle
from gymnasium.wrappers.utils import RunningMeanStd

__all__ = ["ObsNormalizer", "RewardScaler"]

CLIP = 10.0  # SB3's clip_obs and clip_reward
EPSILON = 1e-8
_COUNT = 1e-4  # the count the statistics start from (SB3's and gymnasium's RunningMeanStd)


class ObsNormalizer(paddle.nn.Layer):
    """Observations standardised by running statistics, clipped to ``[-clip, clip]``.

    Args:
        obs_dim: observation size.
        clip: the clip after standardising (SB3's ``clip_obs``).
        epsilon: added to the variance.
    """

    def __init__(self, obs_dim: int, clip: float = CLIP, epsilon: float = EPSILON) -> None:
        super().__init__()
        self.clip, self.epsilon = float(clip), float(epsilon)
        self.register_buffer("mean", paddle.zeros([obs_dim], dtype="float32"))
        self.register_buffer("var", paddle.ones([obs_dim], dtype="float32"))
        self.register_buffer("count", paddle.to_tensor([_COUNT], dtype="float32"))

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        scaled = (obs - self.mean) / paddle.sqrt(self.var + self.epsilon)
        return paddle.clip(scaled, -self.clip, self.clip)

    def update(self, obs: np.ndarray) -> None:
        """Add raw observations (``[batch, obs_dim]``, or ``[..., obs_dim]``) to the statistics."""
        moments = RunningMeanStd()
        moments.mean, moments.var = self.mean.numpy().astype(np.float64), self.var.numpy().astype(np.float64)
        moments.count = float(self.count.numpy()[0])
        moments.update(np.asarray(obs, dtype=np.float64).reshape(-1, self.mean.shape[0]))
        paddle.assign(paddle.to_tensor(moments.mean, dtype="float32"), self.mean)
        paddle.assign(paddle.to_tensor(moments.var, dtype="float32"), self.var)
        paddle.assign(paddle.to_tensor([moments.count], dtype="float32"), self.count)


class RewardScaler:
    """Rewards divided by the running standard deviation of each environment's discounted return,
    clipped (SB3's ``VecNormalize(norm_reward=True)``).

    Args:
        num_envs: environments whose returns are followed.
        gamma: the discount of those returns (the algorithm's).
        clip: the clip after scaling.
        epsilon: added to the variance.
    """

    def __init__(self, num_envs: int, gamma: float, clip: float = CLIP, epsilon: float = EPSILON) -> None:
        self.gamma, self.clip, self.epsilon = gamma, clip, epsilon
        self.returns = np.zeros(num_envs)
        self.moments = RunningMeanStd(_COUNT, shape=())

    def observe(self, rewards: np.ndarray, episode_end: np.ndarray) -> None:
        """Follow one step of raw rewards of every environment (``episode_end``: the return starts
        again; another number of environments than the last step's, as when remote actors were
        lost or added: every return starts again)."""
        rewards = np.asarray(rewards, dtype=np.float64)
        if rewards.shape != self.returns.shape:
            self.returns = np.zeros(rewards.shape)
        self.returns = self.returns * self.gamma + rewards
        self.moments.update(self.returns)
        self.returns[np.asarray(episode_end, dtype=bool)] = 0.0

    def scale(self, rewards: np.ndarray) -> np.ndarray:
        """Raw rewards as the learner sees them."""
        scaled = np.asarray(rewards) / np.sqrt(self.moments.var + self.epsilon)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (:meth:`load_state` reads it back)."""
        return {"reward_returns": self.returns.copy(), "reward_mean": float(self.moments.mean),
                "reward_var": float(self.moments.var), "reward_count": float(self.moments.count)}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`.

        Raises:
            ValueError: a value is missing, not finite, or of another shape (named).
        """
        returns = np.asarray(state["reward_returns"], dtype=np.float64)
        if returns.shape != self.returns.shape:
            raise ValueError(f"reward_returns has shape {returns.shape}, expected {self.returns.shape} (one per "
                             "environment)")
        values = {key: float(state[key]) for key in ("reward_mean", "reward_var", "reward_count")}
        if not all(np.isfinite(list(values.values()))) or not np.isfinite(returns).all() or values["reward_var"] < 0:
            raise ValueError(f"the reward normalisation statistics are not finite or a variance is negative: {values}")
        self.returns = returns
        self.moments.mean, self.moments.var = np.asarray(values["reward_mean"]), np.asarray(values["reward_var"])
        self.moments.count = values["reward_count"]
