"""``ModelBase``: what every PARL model offers, whatever the deep-learning framework (PARL's
``parl.core.model_base``). :class:`parl_lite.Model` is the paddle implementation."""
from typing import Any

__all__ = ["ModelBase"]


class ModelBase:
    """Base of the framework-specific ``Model`` classes: calling a model runs its ``forward``;
    ``get_weights``, ``set_weights``, ``sync_weights_to`` and ``parameters`` are the framework's."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The model's computation; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} does not implement forward()")

    def get_weights(self) -> Any:
        """The model's weights."""
        raise NotImplementedError(f"{type(self).__name__} does not implement get_weights()")

    def set_weights(self, weights: Any) -> None:
        """Load weights returned by :meth:`get_weights`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement set_weights()")

    def sync_weights_to(self, target_model: Any) -> None:
        """Copy this model's weights to ``target_model``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sync_weights_to()")

    def parameters(self) -> Any:
        """The model's trainable parameters."""
        raise NotImplementedError(f"{type(self).__name__} does not implement parameters()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)
