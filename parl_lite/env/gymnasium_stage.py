"""An old-gym wrapper whose work a gymnasium wrapper does.

PARL's wrappers are stacked on the old gym interface (``reset() -> obs``, ``step() -> (obs, reward,
done, info)``, below them a :class:`parl_lite.env.CompatWrapper`); gymnasium's wrappers expect its
own. A :class:`GymnasiumStage` shows the old-gym environment below it to a gymnasium wrapper
through the gymnasium interface and gives that wrapper's results back on the old one, so that PARL's
``MaxAndSkipEnv`` and ``FrameStack`` are gymnasium's ``MaxAndSkipObservation`` and
``FrameStackObservation`` at the place in the stack PARL puts them.
"""
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from parl_lite.env.forwarding import ForwardingWrapper

__all__ = ["GymnasiumStage"]


class GymnasiumStage(ForwardingWrapper):
    """Old-gym ``reset``/``step`` computed by the gymnasium wrapper ``make(env)`` builds.

    Args:
        env: an environment with the old gym interface.
        make: builds the gymnasium wrapper from a gymnasium-interface view of ``env``.
    """

    def __init__(self, env: gym.Env, make: Callable[[gym.Env], gym.Wrapper]) -> None:
        super().__init__(env)
        self.stage = make(_GymnasiumView(env))
        self.observation_space = self.stage.observation_space

    def reset(self, **kwargs: Any) -> Any:
        """Reset through the gymnasium wrapper; returns the observation only."""
        obs, _ = self.stage.reset(**kwargs)
        return self.observation(obs)

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:  # type: ignore[override]
        """Step through the gymnasium wrapper; returns ``(obs, reward, done, info)``."""
        obs, reward, terminated, truncated, info = self.stage.step(action)
        return self.observation(obs), float(reward), bool(terminated or truncated), info

    def observation(self, obs: Any) -> Any:
        """The observation given back, from the gymnasium wrapper's (a subclass may convert it)."""
        return obs


class _GymnasiumView(gym.Wrapper):
    """An old-gym environment on gymnasium's interface: ``done`` becomes ``terminated`` (the old
    interface does not tell a time limit apart), ``reset`` returns an empty info."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        kwargs: dict[str, Any] = {} if seed is None else {"seed": seed}
        if options is not None:
            kwargs["options"] = options
        return self.env.reset(**kwargs), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, done, info = self.env.step(action)  # type: ignore[misc]  # an old-gym 4-tuple
        return obs, reward, done, False, info
