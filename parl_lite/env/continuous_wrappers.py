"""PARL's ``ActionMappingWrapper``: a model's actions in [-1, 1] mapped to a Box action space."""
from typing import Any

import gymnasium as gym
import numpy as np

from parl_lite.env.forwarding import ForwardingWrapper

__all__ = ["ActionMappingWrapper"]

_TOLERANCE = 1e-3  # a model's tanh output may overshoot [-1, 1] by rounding


class ActionMappingWrapper(ForwardingWrapper):
    """``step(a)`` with ``a`` in [-1, 1] steps the wrapped environment with
    ``low + (a + 1) * (high - low) / 2``, per dimension, clipped to [low, high].

    (PARL's maps every dimension with the first dimension's bounds; for equal bounds the two agree.)

    Args:
        env: an environment with a bounded ``gymnasium.spaces.Box`` action space.

    Raises:
        TypeError: the action space is not a Box.
        ValueError: a bound is infinite, or a high bound is not above its low bound.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, gym.spaces.Box):
            raise TypeError(f"ActionMappingWrapper needs a Box action space, got {space}")
        self.low_bound, self.high_bound = space.low, space.high
        if not (np.all(np.isfinite(self.low_bound)) and np.all(np.isfinite(self.high_bound))):
            raise ValueError(f"ActionMappingWrapper needs finite action bounds, got {space}")
        if not np.all(self.high_bound > self.low_bound):
            raise ValueError(f"ActionMappingWrapper needs high > low in every dimension, got {space}")
        if hasattr(env, "_max_episode_steps"):
            self._max_episode_steps = env._max_episode_steps

    def step(self, model_output_act: Any) -> Any:
        """Step with a model's action in [-1, 1] (each element).

        Raises:
            ValueError: an element is outside [-1, 1] (by more than 1e-3).
        """
        action = np.asarray(model_output_act, dtype=np.float64)
        if np.any(action > 1.0 + _TOLERANCE) or np.any(action < -1.0 - _TOLERANCE):
            raise ValueError(f"ActionMappingWrapper.step: the action must be in [-1, 1] (the model's tanh "
                             f"output), got {model_output_act!r}")
        mapped = self.low_bound + (action + 1.0) * ((self.high_bound - self.low_bound) / 2.0)
        return self.env.step(np.clip(mapped, self.low_bound, self.high_bound).astype(self.action_space.dtype))
