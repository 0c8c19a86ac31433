"""The evaluator: mean return of the greedy policy over a fixed set of seeded episodes."""
from collections.abc import Callable

import gymnasium as gym
import numpy as np

__all__ = ["Evaluator"]


class Evaluator:
    """Plays ``episodes`` episodes with ``agent.predict``; episode ``k`` starts from
    ``reset(seed=seed + k)``, so every evaluation of a run, and of a repeated run, sees the same
    start states.

    The episodes run side by side, one environment each: every step makes one batched
    ``predict`` over the episodes still running (a tenth of the forwards of playing them one
    after another, for the same actions).

    Args:
        env_id: a registered gymnasium id.
        episodes: episodes per evaluation.
        seed: seed of the first episode.
        action_scale: multiply actions by this before stepping (algorithms that act in [-1, 1]).
    """

    def __init__(self, env_id: str, episodes: int, seed: int, action_scale: np.ndarray | None = None) -> None:
        if episodes <= 0:
            raise ValueError(f"eval_episodes must be positive, got {episodes}")
        self.envs = [gym.make(env_id) for _ in range(episodes)]
        self.seed, self.action_scale = seed, action_scale

    def __call__(self, predict: Callable[[np.ndarray], np.ndarray]) -> float:
        """Mean return of ``predict`` (a batch of observations -> a batch of actions)."""
        obs = np.stack([env.reset(seed=self.seed + k)[0] for k, env in enumerate(self.envs)])
        totals = np.zeros(len(self.envs))
        running = np.arange(len(self.envs))
        while running.size:
            actions = predict(obs[running])
            if self.action_scale is not None:
                actions = actions * self.action_scale
            still_running = []
            for k, action in zip(running, actions, strict=True):
                obs[k], reward, terminated, truncated, _ = self.envs[k].step(action)
                totals[k] += float(reward)
                if not (terminated or truncated):
                    still_running.append(k)
            running = np.asarray(still_running, dtype=np.int64)
        return float(totals.mean())

    def close(self) -> None:
        """Close the environments."""
        for env in self.envs:
            env.close()
