"""``AgentBase``: the agent's interface, whatever the framework (PARL's ``parl.core.agent_base``).
:class:`parl_lite.Agent` is the paddle implementation."""
from typing import Any

__all__ = ["AgentBase"]


class AgentBase:
    """Base of the framework-specific ``Agent`` classes: holds the algorithm as ``alg`` and passes
    ``get_weights`` / ``set_weights`` to it.

    Args:
        algorithm: the algorithm the agent drives.
    """

    def __init__(self, algorithm: Any) -> None:
        self.alg = algorithm

    def get_weights(self, *args: Any, **kwargs: Any) -> Any:
        """The algorithm's weights."""
        return self.alg.get_weights(*args, **kwargs)

    def set_weights(self, weights: Any, *args: Any, **kwargs: Any) -> None:
        """Load weights into the algorithm."""
        self.alg.set_weights(weights, *args, **kwargs)

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        """Update the algorithm from experience."""
        raise NotImplementedError(f"{type(self).__name__} does not implement learn()")

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        """The action to take when evaluating."""
        raise NotImplementedError(f"{type(self).__name__} does not implement predict()")

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        """The action to take when exploring."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample()")

    def train(self) -> None:
        """Switch to training mode."""
        raise NotImplementedError(f"{type(self).__name__} does not implement train()")

    def eval(self) -> None:
        """Switch to evaluation mode."""
        raise NotImplementedError(f"{type(self).__name__} does not implement eval()")
