"""Where a value-based algorithm runs its target network: paddle, or onnxruntime with the target's
weights as constants (:class:`OnnxTarget`)."""
from typing import Any

import paddle
from paddle.static import InputSpec

from parl_lite.common.onnx_runtime import FixedWeightsModel
from parl_lite.core.model import Model
from parl_lite.io.onnx_export import OnnxExportError, forward_graph

__all__ = ["TARGET_RUNTIMES", "OnnxTarget"]

TARGET_RUNTIMES = ("paddle", "onnxruntime")


class OnnxTarget:
    """``model(obs)`` computed by onnxruntime, for a network that is read at every update and whose
    weights are replaced only now and then: a target network, copied every thousand steps. Its
    weights are onnxruntime constants (:class:`parl_lite.common.onnx_runtime.FixedWeightsModel`),
    rebuilt at the first call after :attr:`parl_lite.Model.weights_version` changed (a sync, a
    restore). The outputs equal paddle's to float32 rounding, without gradients.

    Args:
        model: the target network; ``forward`` must return one tensor.
        owner: who asked for it, for error messages (e.g. ``"DQN"``).
    """

    def __init__(self, model: Model, owner: str) -> None:
        self.model = model
        self.owner = owner
        self._graph: FixedWeightsModel | None = None
        self._traced: tuple[list[int], Any] = ([], None)  # the observations' shape (no batch) and dtype
        self._version: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        # an onnxruntime session does not pickle or copy: a copy traces its own at its first call
        return {**self.__dict__, "_graph": None, "_traced": ([], None), "_version": None}

    def __call__(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The model's output for a batch of observations (traced at the first call, from its shape
        without the batch dimension and its dtype).

        Raises:
            OnnxExportError: the model's forward does not translate to ONNX (the message names the
                owner, the model and the operator).
            ValueError: the observations' shape or dtype is not the first call's.
        """
        if self._graph is None:
            spec = InputSpec([None, *obs.shape[1:]], obs.dtype)
            try:
                self._graph = FixedWeightsModel(forward_graph(self.model, spec))
            except OnnxExportError as error:
                raise OnnxExportError(f"{self.owner}(target_runtime='onnxruntime'): {error}; use "
                                      f"target_runtime='paddle' for this model") from error
            self._traced = (list(obs.shape[1:]), obs.dtype)
        if (list(obs.shape[1:]), obs.dtype) != self._traced:
            raise ValueError(f"{self.owner}(target_runtime='onnxruntime'): the target network was traced for "
                             f"observations {self._traced[0]} of {self._traced[1]}, and is now given "
                             f"{list(obs.shape[1:])} of {obs.dtype}")
        if self._version != self.model.weights_version:
            self._graph.set_weights(self.model.get_weights())
            self._version = self.model.weights_version
        return paddle.to_tensor(self._graph(obs.numpy())[0])
