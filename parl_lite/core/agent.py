"""``parl_lite.Agent``: the bridge between an environment and an :class:`Algorithm`."""
import os
from typing import Any, Dict, Sequence

import numpy as np

from parl_lite.core.algorithm import Algorithm
from parl_lite.io import checkpoint

__all__ = ["Agent"]


class Agent:
    """Base class of user agents: turn observations into tensors, call the algorithm, and turn
    its output back into actions.

    Subclasses implement ``learn`` / ``predict`` / ``sample``. The agent starts in training mode;
    :meth:`eval` switches every model of the algorithm to evaluation mode (dropout off, batch-norm
    uses its running statistics) and :meth:`train` switches back.
    """

    def __init__(self, algorithm: Algorithm) -> None:
        if not isinstance(algorithm, Algorithm):
            raise TypeError(f"algorithm must be a parl_lite.Algorithm, got {type(algorithm).__name__}")
        self.alg = algorithm
        self.training = True

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        """Turn a batch of experience into tensors and call ``self.alg.learn``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement learn()")

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        """Return the greedy action for an observation."""
        raise NotImplementedError(f"{type(self).__name__} does not implement predict()")

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        """Return an exploratory action for an observation."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample()")

    def train(self) -> None:
        """Put every model of the algorithm in training mode."""
        self._set_mode(training=True)

    def eval(self) -> None:
        """Put every model of the algorithm in evaluation mode."""
        self._set_mode(training=False)

    def _set_mode(self, training: bool) -> None:
        for model in self.alg.models().values():
            model.train() if training else model.eval()
        self.training = training

    def get_weights(self) -> Dict[str, np.ndarray]:
        """Weights of the algorithm's model."""
        return self.alg.get_weights()

    def set_weights(self, weights: Dict[str, np.ndarray]) -> None:
        """Load weights into the algorithm's model."""
        self.alg.set_weights(weights)

    def save(self, path: "str | os.PathLike", with_optimizer: bool = False) -> None:
        """Write every model of the algorithm (and, if asked, its optimizer state) to an HDF5
        checkpoint at ``path``, atomically. See :mod:`parl_lite.io.checkpoint` for the layout.
        """
        checkpoint.save(
            path,
            models=self.alg.models(),
            optimizers=self.alg.optimizers() if with_optimizer else {},
            owner=type(self),
        )

    def restore(self, path: "str | os.PathLike") -> None:
        """Load a checkpoint written by :meth:`save` into this agent's algorithm.

        Optimizer state is restored when the checkpoint holds it. Everything (checksums, finite
        values, shapes of weights and optimizer accumulators) is checked before anything changes.

        Raises:
            parl_lite.CheckpointError: the file is missing, a folder, unreadable or corrupted, or
                does not fit the models or optimizers (the message names the dataset).
        """
        checkpoint.load(path, models=self.alg.models(), optimizers=self.alg.optimizers())

    def export_onnx(self, path: "str | os.PathLike", input_spec: Sequence[Any]) -> None:
        """Export the algorithm's model to ONNX (see :func:`parl_lite.export_onnx`)."""
        from parl_lite.io.onnx_export import export_onnx

        export_onnx(self.alg.model, path, input_spec)
