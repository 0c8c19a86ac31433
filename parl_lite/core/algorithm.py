"""``parl_lite.Algorithm``: how a model is updated (``learn``) and used (``predict``/``sample``)."""
from typing import Any, Dict

import numpy as np
import paddle

from parl_lite.core.model import Model

__all__ = ["Algorithm"]


class Algorithm:
    """Base class of the update rules (PolicyGradient, DQN, PPO, ...).

    Subclasses keep their networks as :class:`Model` attributes (``self.model``,
    ``self.target_model``, ...) and their optimizers as ``paddle.optimizer.Optimizer`` attributes;
    :meth:`models` and :meth:`optimizers` find them, so checkpoints need no per-algorithm code.
    """

    def __init__(self, model: Model = None) -> None:
        if model is not None and not isinstance(model, Model):
            raise TypeError(f"model must be a parl_lite.Model, got {type(model).__name__}")
        self.model = model

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        """Update the model(s) from a batch of experience; return the loss(es)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement learn()")

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        """Return the model's greedy (evaluation) output."""
        raise NotImplementedError(f"{type(self).__name__} does not implement predict()")

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        """Return an exploratory output (e.g. an action drawn from the policy)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample()")

    def models(self) -> Dict[str, Model]:
        """Every :class:`Model` attribute of this algorithm, by attribute name."""
        return {name: value for name, value in vars(self).items() if isinstance(value, Model)}

    def optimizers(self) -> Dict[str, paddle.optimizer.Optimizer]:
        """Every optimizer attribute of this algorithm, by attribute name."""
        return {
            name: value
            for name, value in vars(self).items()
            if isinstance(value, paddle.optimizer.Optimizer)
        }

    def get_weights(self) -> Dict[str, np.ndarray]:
        """Weights of ``self.model`` (see :meth:`Model.get_weights`)."""
        return self.model.get_weights()

    def set_weights(self, weights: Dict[str, np.ndarray]) -> None:
        """Load weights into ``self.model`` (see :meth:`Model.set_weights`)."""
        self.model.set_weights(weights)
