"""``parl_lite.Agent``: the bridge between an environment and an :class:`Algorithm`."""
import os
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np

from parl_lite.core.algorithm import Algorithm
from parl_lite.io import checkpoint

__all__ = ["Agent"]


class Agent:
    """Base class of user agents: turn observations into tensors, call the algorithm, and turn
    its output back into actions.

    By default ``learn`` / ``predict`` / ``sample`` hand numpy batches to the algorithm (which
    converts them, see :class:`parl_lite.Algorithm`); a subclass overrides them to reshape or
    preprocess. The agent starts in training mode;
    :meth:`eval` switches every model of the algorithm to evaluation mode (dropout off, batch-norm
    uses its running statistics) and :meth:`train` switches back.
    """

    def __init__(self, algorithm: Algorithm) -> None:
        if not isinstance(algorithm, Algorithm):
            raise TypeError(f"algorithm must be a parl_lite.Algorithm, got {type(algorithm).__name__}")
        self.alg = algorithm
        self.training = True

    def learn(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """Update the algorithm from a batch (names to numpy arrays); returns its statistics."""
        return self.alg.learn(batch)

    def predict(self, obs: Any) -> Any:
        """The greedy action(s) for a batch of observations (numpy in, numpy out)."""
        return self.alg.predict(obs)

    def sample(self, obs: Any) -> Any:
        """Exploratory action(s) for a batch of observations (numpy in, numpy out)."""
        return self.alg.sample(obs)

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

    def get_weights(self) -> dict[str, np.ndarray]:
        """Weights of the algorithm's model."""
        return self.alg.get_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
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
