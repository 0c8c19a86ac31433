"""PARL's ``CompatWrapper``: the old gym interface (``reset() -> obs``, ``step() -> 4-tuple``) on a
gymnasium environment.

    env = CompatWrapper(gymnasium.make("CartPole-v1"))
    env.seed(1)                      # the next reset() starts from seed 1
    obs = env.reset()
    obs, reward, done, info = env.step(action)   # done: terminated or truncated (time limit)
"""
import copy
from typing import Any

import gymnasium as gym

from parl_lite.env.forwarding import ForwardingWrapper

__all__ = ["CompatWrapper", "is_gym_version_ge"]


def is_gym_version_ge(compare_version: str) -> bool:
    """Whether the installed gymnasium's version is at least ``compare_version`` (e.g. ``"0.26.0"``)."""
    def numbers(version: str) -> tuple[int, ...]:
        parts = []
        for part in version.split("."):
            digits = "".join(ch for ch in part if ch.isdigit())
            if not digits:
                break
            parts.append(int(digits))
        return tuple(parts)

    return numbers(gym.__version__) >= numbers(compare_version)


class CompatWrapper(ForwardingWrapper):
    """Old-gym ``reset``/``step``/``seed`` on a gymnasium environment.

    ``done`` is ``terminated or truncated``; the wrapped environment's time limit (from its spec)
    is ``_max_episode_steps``, as PARL's examples read it. ``seed(s)`` seeds the next ``reset()``
    and the action space once: later episodes go on from that state (PARL's reseeds every reset,
    so that every episode starts from the same state). A ``Discrete`` action or observation space
    has Python ints as ``n`` and ``start``, as in gym 0.26 (gymnasium's are numpy integers, which
    ``isinstance(n, int)`` in PARL's programs refuses).

    Args:
        env: a gymnasium environment.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.action_space = _gym_space(env.action_space)
        self.observation_space = _gym_space(env.observation_space)
        limit = env.spec.max_episode_steps if env.spec is not None else None
        if limit is not None:
            self._max_episode_steps = int(limit)
        self._next_seed: int | None = None

    def seed(self, random_seed: int) -> None:
        """Seed the next ``reset()`` and the action space's ``sample()``."""
        self._next_seed = int(random_seed)
        self.action_space.seed(int(random_seed))

    def reset(self, **kwargs: Any) -> Any:
        """Start an episode; returns the first observation only."""
        if self._next_seed is not None:
            if kwargs.get("seed") is None:  # an outer gymnasium wrapper passes seed=None
                kwargs["seed"] = self._next_seed
            self._next_seed = None
        obs, _ = self.env.reset(**kwargs)
        return obs

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:  # type: ignore[override]
        """One step; returns ``(obs, reward, done, info)``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(reward), bool(terminated or truncated), info


def _gym_space(space: gym.Space) -> gym.Space:
    """``space``, with a ``Discrete`` one copied to have int ``n`` and ``start`` (gym 0.26's types)."""
    if not isinstance(space, gym.spaces.Discrete):
        return space
    discrete = copy.deepcopy(space)
    discrete.n, discrete.start = int(space.n), int(space.start)
    return discrete
