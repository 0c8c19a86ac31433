"""Gymnasium helpers shared by the training loops: vector environments and episode returns."""
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from parl_lite.env.atari import AtariSettings, AtariVectorEnv, atari_game

__all__ = ["make_vector_env", "final_observations", "EpisodeReturns"]


def make_vector_env(env_id: str, num_envs: int, seed: int, evaluation: bool = False,
                    env_kwargs: dict[str, Any] | None = None) -> tuple[gym.vector.VectorEnv, np.ndarray]:
    """``num_envs`` copies of ``env_id`` stepped in this process, reset in the same step.

    With same-step autoreset, the observation returned after an episode ends is the first one
    of the next episode; the last one of the ended episode is in ``info["final_obs"]`` (see
    :func:`final_observations`). An Atari id gets DeepMind's preprocessing, stepped in C++
    (:class:`parl_lite.env.atari.AtariVectorEnv`).

    Args:
        env_id: a registered gymnasium id, e.g. ``"CartPole-v1"``, or an ALE id.
        num_envs: number of copies (positive).
        seed: copy ``i`` is reset with ``seed + i``.
        evaluation: the environment evaluates a policy (an Atari game then ends at game over
            only and keeps its rewards unclipped; other ids are the same either way).
        env_kwargs: keyword arguments of ``gymnasium.make`` for the id; for an Atari game, the
            fields of :class:`parl_lite.env.atari.AtariSettings` (e.g. ``{"screen_size": 42}``).

    Returns:
        ``(env, first observations)``.
    """
    if num_envs <= 0:
        raise ValueError(f"num_envs must be positive, got {num_envs}")
    game = atari_game(env_id)
    if game is not None:
        env: gym.vector.VectorEnv = AtariVectorEnv(game, num_envs, AtariSettings.of(env_kwargs or {}),
                                                   evaluation=evaluation)
    else:
        env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                           vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}, **(env_kwargs or {}))
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    return env, obs


def final_observations(next_obs: np.ndarray, episode_end: np.ndarray, info: dict) -> np.ndarray:
    """The true next observation of every copy: ``next_obs``, with the final observation of an
    ended episode in place of the reset one."""
    if not episode_end.any():
        return next_obs
    result = next_obs.copy()
    for i in np.flatnonzero(info["_final_obs"]):
        result[i] = info["final_obs"][i]
    return result


class EpisodeReturns:
    """Running undiscounted returns of vectorised episodes, and the mean of the recent ones.

    Args:
        num_envs: number of environment copies.
        window: how many finished episodes :attr:`recent_mean` averages.
    """

    def __init__(self, num_envs: int, window: int = 20) -> None:
        self.running = np.zeros(num_envs)
        self.finished: deque = deque(maxlen=window)
        self.episodes = 0

    def update(self, rewards: np.ndarray, episode_end: np.ndarray, info: dict | None = None) -> list[float]:
        """Add one step's rewards; close the episodes that ended and return their returns.

        An environment that reports its episodes itself (``info["episode"]["r"]`` where
        ``info["_episode"]``, as gymnasium's ``RecordEpisodeStatistics`` and the Atari games do:
        whole games, unclipped) is taken at its word; ``rewards`` and ``episode_end`` are then what
        the learner sees (a lost life, clipped rewards) and are not summed here."""
        if info is not None and "_episode" in info:
            ended = [float(value) for value in info["episode"]["r"][info["_episode"]]]
        else:
            self.running += rewards
            ended = []
            for i in np.flatnonzero(episode_end):
                ended.append(float(self.running[i]))
                self.running[i] = 0.0
        self.add(ended)
        return ended

    def add(self, returns: list[float]) -> None:
        """Count episodes that ended elsewhere (in remote actors), with their returns."""
        self.finished.extend(returns)
        self.episodes += len(returns)

    @property
    def recent_mean(self) -> float:
        """Mean return of the last ``window`` finished episodes (nan before the first)."""
        return float(np.mean(self.finished)) if self.finished else float("nan")
