"""PARL's ``parl.env``: wrappers that give a gymnasium environment the interface PARL's programs use.

``CompatWrapper`` turns gymnasium's ``reset() -> (obs, info)`` and ``step() -> (obs, reward,
terminated, truncated, info)`` into ``reset() -> obs`` and ``step() -> (obs, reward, done, info)``;
``ActionMappingWrapper`` maps a model's actions in [-1, 1] to a Box action space; ``VectorEnv``
steps several environments together; :mod:`parl_lite.env.mujoco_wrappers` normalises observations
and rewards (PARL's PPO example); :mod:`parl_lite.env.atari_wrappers` is DeepMind's Atari
preprocessing (the ``atari`` extra).
"""
from parl_lite.env.compat_wrappers import CompatWrapper, is_gym_version_ge
from parl_lite.env.continuous_wrappers import ActionMappingWrapper
from parl_lite.env.vector_env import VectorEnv

__all__ = ["CompatWrapper", "is_gym_version_ge", "ActionMappingWrapper", "VectorEnv"]
