"""How an off-policy loop explores: epsilon-greedy (discrete actions) or Gaussian noise / the
policy's own sampling (continuous actions in [-1, 1]), after a warm-up of uniform random actions."""

import numpy as np

from parl_lite.core.agent import Agent
from parl_lite.utils.scheduler import LinearDecayScheduler

__all__ = ["Exploration", "EpsilonGreedy", "ContinuousExploration"]


class Exploration:
    """Chooses the action to play at an environment step."""

    def act(self, agent: Agent, obs: np.ndarray, step: int) -> np.ndarray | int:
        """The action for one observation at environment step ``step`` (1-based)."""
        raise NotImplementedError

    def episode_ended(self) -> None:
        """The episode the last action was played in has ended (time-correlated noise starts again)."""


class EpsilonGreedy(Exploration):
    """A uniformly random action with probability epsilon, else the greedy one; epsilon decays
    linearly from ``start`` to ``end`` over ``decay_steps``.

    Args:
        num_actions: size of the discrete action space.
        start, end: epsilon at step 0 and from ``decay_steps`` on.
        decay_steps: steps of the linear decay.
        seed: seed of the coin and of the random actions.
    """

    def __init__(self, num_actions: int, start: float = 1.0, end: float = 0.05, decay_steps: int = 10_000,
                 seed: int = 0) -> None:
        self.num_actions = num_actions
        self.epsilon = LinearDecayScheduler(start, decay_steps, end_value=end)
        self.rng = np.random.default_rng(seed)

    def act(self, agent: Agent, obs: np.ndarray, step: int) -> int:
        if self.rng.random() < self.epsilon.value_at(step):
            return int(self.rng.integers(self.num_actions))
        return int(agent.predict(obs[None])[0])


NOISE_TYPES = ("normal", "ornstein-uhlenbeck")


class ContinuousExploration(Exploration):
    """Uniform random actions in [-1, 1] for ``warmup_steps``, then the deterministic action plus
    noise (DDPG, TD3), or, with ``noise_std`` None, the policy's own sample (SAC).

    Args:
        act_dim: action dimensions.
        noise_std: standard deviation of the noise, in units of the action range; None:
            ``agent.sample``.
        warmup_steps: steps of uniform random actions.
        seed: seed of the warm-up actions and (a second generator) of the noise.
        noise_type: ``"normal"`` (independent Gaussian noise each step) or ``"ornstein-uhlenbeck"``
            (time-correlated, SB3's: ``theta=0.15``, ``dt=0.01``, from 0 at each episode's start).
    """

    def __init__(self, act_dim: int, noise_std: float | None, warmup_steps: int, seed: int = 0,
                 noise_type: str = "normal") -> None:
        if noise_type not in NOISE_TYPES:
            raise ValueError(f"noise_type must be one of {NOISE_TYPES}, got {noise_type!r}")
        self.act_dim, self.noise_std, self.warmup_steps = act_dim, noise_std, warmup_steps
        self.noise_type = noise_type
        self.warmup_rng = np.random.default_rng(seed)
        self.noise_rng = np.random.default_rng(seed)
        self._ou_state = np.zeros(act_dim)

    def episode_ended(self) -> None:
        self._ou_state = np.zeros(self.act_dim)

    def _noise(self) -> np.ndarray:
        assert self.noise_std is not None
        if self.noise_type == "normal":
            return self.noise_rng.normal(0.0, self.noise_std, self.act_dim)
        theta, dt = 0.15, 1e-2
        self._ou_state = (self._ou_state - theta * self._ou_state * dt
                          + self.noise_std * np.sqrt(dt) * self.noise_rng.normal(size=self.act_dim))
        return self._ou_state

    def act(self, agent: Agent, obs: np.ndarray, step: int) -> np.ndarray:
        if step <= self.warmup_steps:
            return self.warmup_rng.uniform(-1.0, 1.0, self.act_dim).astype(np.float32)
        if self.noise_std is None:
            action, _ = agent.sample(obs[None])
            return action[0]
        return np.clip(agent.predict(obs[None])[0] + self._noise(), -1.0, 1.0).astype(np.float32)
