"""PARL's ``VectorEnv``: several old-gym environments stepped together, each reset when it ends.

    envs = VectorEnv([wrap_deepmind(gym.make("PongNoFrameskip-v4")) for _ in range(5)])
    obs_batch = envs.reset()                                         # a list of 5 observations
    obs_batch, reward_batch, done_batch, info_batch = envs.step(actions)   # lists of 5

The environments run one after the other, in this process (as PARL's).
"""
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

__all__ = ["VectorEnv"]


class VectorEnv:
    """A list of environments with the old gym interface, stepped in turn.

    Args:
        envs: the environments (e.g. :func:`parl_lite.env.atari_wrappers.wrap_deepmind` ones).
    """

    def __init__(self, envs: Sequence[gym.Env]) -> None:
        self.envs = list(envs)
        if not self.envs:
            raise ValueError("VectorEnv: envs is empty; give at least one environment")
        self.envs_num = len(self.envs)

    def reset(self) -> list[Any]:
        """Reset every environment; returns the list of first observations."""
        return [env.reset() for env in self.envs]

    def step(self, actions: Sequence[Any]) -> tuple[list[Any], list[float], list[bool], list[dict]]:
        """Step environment ``i`` with ``actions[i]``; one that ends is reset at once and its
        observation in the batch is the new episode's first (its ``done`` is True, its ``info`` that
        of the last step).

        Args:
            actions: one action per environment (a list or an array of ``envs_num`` rows).

        Returns:
            ``(obs_batch, reward_batch, done_batch, info_batch)``, lists of ``envs_num``.

        Raises:
            ValueError: ``actions`` does not hold one action per environment.
        """
        if len(actions) != self.envs_num:
            raise ValueError(f"VectorEnv.step: actions holds {len(actions)} action(s) for {self.envs_num} "
                             "environments; give one per environment")
        obs_batch, reward_batch, done_batch, info_batch = [], [], [], []
        for env, action in zip(self.envs, actions, strict=True):
            obs, reward, done, info = env.step(action)  # type: ignore[misc]  # an old-gym 4-tuple
            if done:
                obs = env.reset()
            obs_batch.append(obs)
            reward_batch.append(reward)
            done_batch.append(done)
            info_batch.append(info)
        return obs_batch, reward_batch, done_batch, info_batch
