"""``parl_lite.Agent``: the bridge between an environment and an :class:`Algorithm`."""
import os
from typing import Any
from collections.abc import Sequence

import numpy as np

from parl_lite.core.agent_base import AgentBase
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.model import Model, check_finite_state
from parl_lite.core.samples import Sample
from parl_lite.io import checkpoint

__all__ = ["Agent"]


class Agent(AgentBase):
    """Base class of user agents: turn observations into tensors, call the algorithm, and turn
    its output back into actions.

    As in PARL, an agent subclass usually writes ``learn``, ``predict`` and ``sample`` for its
    environment. Where PARL's base class leaves them abstract, parl_lite's work on batches of
    numpy observations for every shipped algorithm, which is what the training loops
    (:mod:`parl_lite.train`) call: ``learn(*args, **kwargs)`` is the algorithm's ``learn``,
    ``predict(obs)`` its greedy actions, ``sample(obs)`` its exploratory actions and their
    log-probabilities. The loops learn through :meth:`learn_from`, which calls ``learn``: an
    agent that overrides ``learn`` is what they call.

    The agent starts in training mode; :meth:`eval` switches every model of the algorithm to
    evaluation mode (dropout off, batch-norm uses its running statistics) and :meth:`train` back.

    Args:
        algorithm: the :class:`parl_lite.Algorithm` this agent drives (``self.alg``).
    """

    def __init__(self, algorithm: Algorithm) -> None:
        if not isinstance(algorithm, Algorithm):
            raise TypeError(f"algorithm must be a parl_lite.Algorithm, got {type(algorithm).__name__}")
        super().__init__(algorithm)
        self.training = True

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        """Update the algorithm: its ``learn`` with these arguments, and its result."""
        return self.alg.learn(*args, **kwargs)

    def learn_from(self, sample: Sample) -> Any:
        """Learn from a training loop's sample (:mod:`parl_lite.core.samples`): :meth:`learn` with
        the arrays under the algorithm's argument names (``alg.learn_arguments(sample)``)."""
        return self.learn(**self.alg.learn_arguments(sample))

    def predict(self, obs: Any) -> Any:
        """The greedy actions for a batch of observations (numpy in, numpy out)."""
        return self.alg.greedy_actions(obs)

    def sample(self, obs: Any) -> Any:
        """Exploratory actions for a batch of observations and their log-probabilities, as
        ``(actions, log_probs)`` (numpy in, numpy out)."""
        return self.alg.sample_actions(obs)

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

    def save(self, save_path: "str | os.PathLike", model: Model | None = None, *,
             with_optimizer: bool = False) -> None:
        """Write an HDF5 checkpoint at ``save_path``, atomically.

        Args:
            save_path: the checkpoint file (its folders are created).
            model: save only this model (PARL's argument; e.g. ``agent.alg.model.actor_model``);
                None saves every model of the algorithm (``model``, ``target_model``, ...).
            with_optimizer: also save the optimizers' state, so that training resumes exactly
                (only with ``model`` None).

        Raises:
            TypeError: ``model`` is not a :class:`parl_lite.Model` (e.g. ``True``: the optimizer
                state is asked for with ``with_optimizer=True``).
            ValueError: ``with_optimizer`` together with ``model``, or a weight (or optimizer
                accumulator) is NaN or infinite (named; nothing is written, the previous file stays).
        """
        models = self._models_of("save", model)
        if with_optimizer and model is not None:
            raise ValueError("Agent.save: with_optimizer=True saves the optimizers of the whole algorithm; "
                             "leave model=None")
        optimizers = self.alg.optimizers() if with_optimizer else {}
        check_finite_state(f"Agent.save({os.fspath(save_path)!r})", models, optimizers)
        checkpoint.save(save_path, models=models, optimizers=optimizers, owner=type(self))

    def restore(self, save_path: "str | os.PathLike", model: Model | None = None, *, strict: bool = True) -> None:
        """Load a checkpoint written by :meth:`save`.

        Args:
            save_path: the checkpoint file.
            model: load into this model only (PARL's argument): the checkpoint's ``model`` role,
                which is the model given to ``save``; None loads every model of the algorithm and
                the optimizers' state when the checkpoint holds it.
            strict: with ``model`` None, the checkpoint must hold exactly the algorithm's models
                (a DQN checkpoint, with its ``target_model``, does not restore into a
                PolicyGradient agent); False restores the models (and optimizer states) both
                have and leaves the others as they are.

        Everything (checksums, finite values, shapes of weights and optimizer accumulators) is
        checked before anything changes.

        Raises:
            TypeError: ``model`` is not a :class:`parl_lite.Model`.
            parl_lite.CheckpointError: the file is missing, a folder, unreadable or corrupted, or
                does not fit the models or optimizers (the message names the models extra in the
                file and missing from it, or the dataset).
        """
        models = self._models_of("restore", model)
        checkpoint.load(save_path, models=models, optimizers=self.alg.optimizers() if model is None else None,
                        strict=strict and model is None)

    def _models_of(self, method: str, model: Any) -> dict[str, Model]:
        if model is None:
            return self.alg.models()
        if not isinstance(model, Model):
            hint = "; to save the optimizer state pass with_optimizer=True" if isinstance(model, bool) else ""
            raise TypeError(f"Agent.{method}: model (PARL's argument: the model to {method}) must be a "
                            f"parl_lite.Model or None, got {type(model).__name__}{hint}")
        return {"model": model}

    def save_inference_model(self, save_path: "str | os.PathLike", input_shape_list: Sequence[Sequence[int | None]],
                             input_dtype_list: Sequence[str], model: Model | None = None) -> None:
        """Save a model's ``forward`` and weights for inference with ``paddle.jit.save``
        (``paddle.jit.load(save_path)`` reads them back); each file is written atomically.

        Args:
            save_path: path prefix of the files (``.json`` and ``.pdiparams`` with Paddle 3).
            input_shape_list: the shape of each input of ``forward``, None for a free dimension,
                e.g. ``[[None, 4]]``.
            input_dtype_list: the dtype of each input, e.g. ``["float32"]``.
            model: the model to save (e.g. ``agent.alg.model.actor_model``); None: ``self.alg.model``.

        Raises:
            ValueError: the model has no ``forward`` of its own, or the shapes and dtypes are not
                lists of the same length (each named).
        """
        from parl_lite.io.inference import save_inference_model

        save_inference_model(self.alg.model if model is None else model, save_path, input_shape_list,
                             input_dtype_list)

    def export_onnx(self, path: "str | os.PathLike", input_spec: Sequence[Any]) -> None:
        """Export the algorithm's model to ONNX (see :func:`parl_lite.export_onnx`)."""
        from parl_lite.io.onnx_export import export_onnx

        export_onnx(self.alg.model, path, input_spec)
