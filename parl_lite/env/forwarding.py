"""The base of parl_lite's wrappers: gym 0.26's attribute forwarding, which PARL's programs rely on.

gymnasium 1.x wrappers no longer pass unknown attributes to the environment they wrap; PARL's
examples call e.g. ``ActionMappingWrapper(CompatWrapper(env)).seed(1)``, which needs it.
"""
from typing import Any

import gymnasium as gym

__all__ = ["ForwardingWrapper"]


class ForwardingWrapper(gym.Wrapper):
    """A ``gymnasium.Wrapper`` that reads a public attribute it lacks from the wrapped environment."""

    def __getattr__(self, name: str) -> Any:
        env = self.__dict__.get("env")  # absent while unpickling: no recursion through self.env
        if name.startswith("_") or env is None:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (private attributes "
                                 "are not read from the wrapped environment)")
        return getattr(env, name)
