"""The evaluator: mean return of the greedy policy over a fixed set of seeded episodes."""
from collections.abc import Callable

import gymnasium as gym
import numpy as np

__all__ = ["Evaluator"]


class Evaluator:
    """Plays ``episodes`` episodes with ``agent.predict`` (one observation at a time, as a batch of
    one); episode ``k`` starts from ``reset(seed=seed + k)``, so every evaluation of a run, and of
    a repeated run, sees the same start states.

    Args:
        env_id: a registered gymnasium id.
        episodes: episodes per evaluation.
        seed: seed of the first episode.
        action_scale: multiply actions by this before stepping (algorithms that act in [-1, 1]).
    """

    def __init__(self, env_id: str, episodes: int, seed: int, action_scale: np.ndarray | None = None) -> None:
        if episodes <= 0:
            raise ValueError(f"eval_episodes must be positive, got {episodes}")
        self.env = gym.make(env_id)
        self.episodes, self.seed, self.action_scale = episodes, seed, action_scale

    def __call__(self, predict: Callable[[np.ndarray], np.ndarray]) -> float:
        """Mean return of ``predict`` (a batch of observations -> a batch of actions)."""
        totals = []
        for k in range(self.episodes):
            obs, _ = self.env.reset(seed=self.seed + k)
            total, done = 0.0, False
            while not done:
                action = predict(obs[None])[0]
                if self.action_scale is not None:
                    action = action * self.action_scale
                obs, reward, terminated, truncated, _ = self.env.step(action)
                total += float(reward)
                done = terminated or truncated
            totals.append(total)
        return float(np.mean(totals))

    def close(self) -> None:
        """Close the environment."""
        self.env.close()
