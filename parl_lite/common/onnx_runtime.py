"""ONNX models run by onnxruntime whose weights are *graph inputs*: one session serves every set of
weights, which are fed with each call, so a process that only runs a policy (a rollout actor, an
evolution-strategies sampler) needs onnxruntime and numpy, never paddle.

:func:`weights_to_inputs` turns a model's float initializers (its parameters and buffers, as
:func:`parl_lite.export_onnx` names them) into inputs; :class:`WeightedModel` runs such a model.
:class:`FixedWeightsModel` runs one with its weights made constants again, for weights that change
rarely.
"""
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # onnxruntime is imported where a model is run (its import writes $TMPDIR/.ses)
    import onnx
    import onnxruntime as ort

__all__ = ["session_options", "weights_to_inputs", "WeightedModel", "FixedWeightsModel"]

_NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(uint8)": np.uint8, "tensor(double)": np.float64}


def session_options() -> "ort.SessionOptions":
    """One intra-op and one inter-op thread, no spinning: a worker process has one core, shared with
    numpy and the environment; errors only in the log (not the notes on initializers a graph does not
    use, such as a value head beside the policy)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options


def weights_to_inputs(model: "onnx.ModelProto") -> "tuple[onnx.ModelProto, dict[str, np.ndarray]]":
    """A copy of ``model`` whose float initializers with at least one dimension (the weights; scalar
    constants stay) are graph inputs, and their values by name, in file order."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    keep, values = [], {}
    for tensor in graph.initializer:
        if tensor.data_type == TensorProto.FLOAT and len(tensor.dims) >= 1:
            values[tensor.name] = numpy_helper.to_array(tensor).astype(np.float32)
            graph.input.append(helper.make_tensor_value_info(tensor.name, TensorProto.FLOAT, list(tensor.dims)))
        else:
            keep.append(tensor)
    del graph.initializer[:]
    graph.initializer.extend(keep)
    return model, values


def _check_given(weight_names: list[str], weights: Mapping[str, np.ndarray]) -> None:
    """Raise ValueError naming the weights of ``weight_names`` that ``weights`` lacks."""
    missing = [name for name in weight_names if name not in weights]
    if missing:
        raise ValueError(f"the graph takes weights {missing} that were not given")


class WeightedModel:
    """An ONNX model whose first input is the observation and whose other inputs are named weights.

    Args:
        model_bytes: the serialized model (e.g. :func:`parl_lite.io.onnx_export.policy_graph`'s).
    """

    def __init__(self, model_bytes: bytes) -> None:
        import onnxruntime as ort

        self.session = ort.InferenceSession(model_bytes, session_options(), providers=["CPUExecutionProvider"])
        inputs = self.session.get_inputs()
        self.obs_name = inputs[0].name
        self.obs_dtype = _NUMPY_TYPES.get(inputs[0].type, np.float32)
        self.weight_names = [value.name for value in inputs[1:]]
        self.output_names = [value.name for value in self.session.get_outputs()]
        self._feed: dict[str, np.ndarray] = {}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Use these weights from the next call on (a model's ``get_weights()``; names the graph does
        not take, such as a value head's, are left out).

        Raises:
            ValueError: a weight the graph takes is missing (named).
        """
        _check_given(self.weight_names, weights)
        self._feed = {name: np.ascontiguousarray(weights[name], dtype=np.float32) for name in self.weight_names}

    def __call__(self, obs: np.ndarray) -> list[np.ndarray]:
        """The model's outputs for a batch of observations."""
        return self.session.run(self.output_names, {**self._feed, self.obs_name: np.asarray(obs, self.obs_dtype)})


class FixedWeightsModel:
    """The model :class:`WeightedModel` takes, run with its weights as constants: :meth:`set_weights`
    builds a session in which they are initializers, so that onnxruntime lays them out once for its
    fastest kernels. The Nature DQN's forward pass on 32 frames takes 8 ms of CPU so, against 20 ms
    with the weights fed as inputs and 17 ms in paddle; a session costs 25–50 ms to build. For
    weights that stay unchanged over many calls: a target network's.

    Args:
        model_bytes: the serialized model, its first input the observation and the others weights
            (e.g. :func:`parl_lite.io.onnx_export.forward_graph`'s).
    """

    def __init__(self, model_bytes: bytes) -> None:
        import onnx
        from onnx import helper

        self._graph = onnx.ModelProto.FromString(model_bytes)
        inputs = self._graph.graph.input
        self.obs_name = inputs[0].name
        self.obs_dtype = helper.tensor_dtype_to_np_dtype(inputs[0].type.tensor_type.elem_type)
        self.weight_names = [value.name for value in inputs[1:]]
        self.output_names = [value.name for value in self._graph.graph.output]
        self._session: ort.InferenceSession | None = None

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Build the session that runs with these weights (names the graph does not take are left out).

        Raises:
            ValueError: a weight the graph takes is missing (named); the previous weights stay.
        """
        import onnx
        import onnxruntime as ort
        from onnx import numpy_helper

        _check_given(self.weight_names, weights)
        model = onnx.ModelProto()
        model.CopyFrom(self._graph)
        del model.graph.input[1:]
        model.graph.initializer.extend(
            numpy_helper.from_array(np.ascontiguousarray(weights[name], dtype=np.float32), name)
            for name in self.weight_names)
        self._session = ort.InferenceSession(model.SerializeToString(), session_options(),
                                             providers=["CPUExecutionProvider"])

    def __call__(self, obs: np.ndarray) -> list[np.ndarray]:
        """The model's outputs for a batch of observations.

        Raises:
            RuntimeError: :meth:`set_weights` was never called.
        """
        if self._session is None:
            raise RuntimeError("FixedWeightsModel: call set_weights before running the model")
        return self._session.run(self.output_names, {self.obs_name: np.asarray(obs, self.obs_dtype)})
