"""The evaluator: mean return of the greedy policy over a fixed set of seeded episodes."""
from collections.abc import Callable
from typing import Any

import numpy as np

from parl_lite.utils.envs import make_vector_env

__all__ = ["Evaluator"]


class Evaluator:
    """Plays ``episodes`` episodes with ``agent.predict``; episode ``k`` starts from
    ``reset(seed=seed + k)``, so every evaluation of a run, and of a repeated run, sees the same
    start states.

    The episodes run side by side, copies of one vector environment (an Atari game: whole games,
    rewards unclipped, see :func:`parl_lite.utils.envs.make_vector_env`): every step makes one
    batched ``predict``; a copy whose episode has ended plays on, unscored, until the last one ends.

    Args:
        env_id: a registered gymnasium id.
        episodes: episodes per evaluation.
        seed: seed of the first episode.
        action_scale: multiply actions by this before stepping (algorithms that act in [-1, 1]).
        env_kwargs: keyword arguments for making the environment (see
            :func:`parl_lite.utils.envs.make_vector_env`).
    """

    def __init__(self, env_id: str, episodes: int, seed: int, action_scale: np.ndarray | None = None,
                 env_kwargs: dict[str, Any] | None = None) -> None:
        if episodes <= 0:
            raise ValueError(f"eval_episodes must be positive, got {episodes}")
        self.env, _ = make_vector_env(env_id, episodes, seed, evaluation=True, env_kwargs=env_kwargs)
        self.episodes, self.seed, self.action_scale = episodes, seed, action_scale

    def __call__(self, predict: Callable[[np.ndarray], np.ndarray]) -> float:
        """Mean return of ``predict`` (a batch of observations -> a batch of actions)."""
        obs, _ = self.env.reset(seed=self.seed)
        totals = np.zeros(self.episodes)
        running = np.ones(self.episodes, dtype=bool)
        while running.any():
            actions = np.asarray(predict(obs))
            if self.action_scale is not None:
                actions = actions * self.action_scale
            obs, rewards, terminated, truncated, _ = self.env.step(actions)
            totals += np.where(running, rewards, 0.0)
            running &= ~(terminated | truncated)
        return float(totals.mean())

    def close(self) -> None:
        """Close the environments."""
        self.env.close()
