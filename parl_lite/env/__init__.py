"""PARL's ``parl.env``: wrappers that give a gymnasium environment the interface PARL's programs use.

``CompatWrapper`` turns gymnasium's ``reset() -> (obs, info)`` and ``step() -> (obs, reward,
terminated, truncated, info)`` into ``reset() -> obs`` and ``step() -> (obs, reward, done, info)``;
``ActionMappingWrapper`` maps a model's actions in [-1, 1] to a Box action space;
:mod:`parl_lite.env.mujoco_wrappers` normalises observations and rewards (PARL's PPO example).
"""
from parl_lite.env.compat_wrappers import CompatWrapper, is_gym_version_ge
from parl_lite.env.continuous_wrappers import ActionMappingWrapper

__all__ = ["CompatWrapper", "is_gym_version_ge", "ActionMappingWrapper"]
