"""Translate a paddle model to ONNX in Python, without paddle2onnx.

``paddle.jit.to_static`` traces ``forward`` into a PIR program; each of its operators becomes ONNX
nodes built with ``onnx.helper``. This covers the MLP / CNN / actor-critic models of RL (the
operators in :data:`SUPPORTED_OPS`) in milliseconds, and works where paddle2onnx cannot be
installed (Python 3.13). Anything else raises :class:`UnsupportedOperatorError` naming the
operator and the layer it comes from.
"""
from typing import Any
from collections.abc import Sequence

import numpy as np
import onnx
import paddle
from onnx import helper, numpy_helper
from paddle.static import InputSpec

__all__ = ["SUPPORTED_OPS", "MIN_OPSET", "UnsupportedOperatorError", "TraceError", "translate"]

MIN_OPSET = 13  # Softmax normalises along one axis (as paddle does) from opset 13 on

_UNARY = {"tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid", "exp": "Exp", "log": "Log", "abs": "Abs",
          "sqrt": "Sqrt"}
_BINARY = {"add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "maximum": "Max",
           "minimum": "Min"}
_REDUCE = {"mean": "ReduceMean", "sum": "ReduceSum", "max": "ReduceMax"}
_PLUMBING = ("builtin.parameter", "pd_op.data", "pd_op.fetch", "builtin.shadow_output")


class UnsupportedOperatorError(ValueError):
    """The traced program holds an operator (or an option of one) with no translation here."""


class TraceError(RuntimeError):
    """``forward`` could not be traced into a static program."""


def translate(model: paddle.nn.Layer, specs: Sequence[InputSpec], opset_version: int) -> onnx.ModelProto:
    """Trace ``model.forward`` for ``specs`` and build the equivalent ONNX model.

    Args:
        model: the layer, already in the mode to export (evaluation).
        specs: one named InputSpec per input of ``forward``.
        opset_version: ONNX opset, at least :data:`MIN_OPSET`.

    Returns:
        The ONNX model, outputs named ``output_<i>`` in the order ``forward`` returns them.

    Raises:
        UnsupportedOperatorError: an operator or one of its options has no translation.
        TraceError: ``paddle.jit.to_static`` cannot trace ``forward``.
    """
    if opset_version < MIN_OPSET:
        raise UnsupportedOperatorError(f"the translation needs opset_version >= {MIN_OPSET}, got {opset_version}")
    try:
        program = paddle.jit.to_static(model.forward, input_spec=list(specs), full_graph=True).concrete_program
    except Exception as error:
        raise TraceError(f"paddle.jit.to_static could not trace forward: {type(error).__name__}: {error}") from error
    return _Translator(model, opset_version).run(program)


class _Translator:
    def __init__(self, model: paddle.nn.Layer, opset: int) -> None:
        self.opset = opset
        self.structured = {tensor.name: name for name, tensor in model.state_dict().items()}
        self.names: dict[str, Any] = {}       # PIR value id -> ONNX name (a list for builtin.combine)
        self.constants: dict[str, np.ndarray] = {}  # PIR value id -> array of full / full_int_array
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []

    def run(self, program) -> onnx.ModelProto:
        tensors, values = program.parameters
        for tensor, value in zip(tensors, values, strict=True):
            name = self.structured.get(tensor.name, tensor.name)
            self.initializers.append(numpy_helper.from_array(np.asarray(tensor.numpy()), name=name))
            self.names[value.id] = name
        for op in program.main_program.global_block().ops:
            self._op(op)
        outputs = []
        for index, value in enumerate(program.outputs):
            name = f"output_{index}"
            self.nodes.append(helper.make_node("Identity", [self._name(value)], [name]))
            outputs.append(helper.make_tensor_value_info(name, _onnx_dtype(value), None))
        graph = helper.make_graph(self.nodes, "parl_lite", self.inputs, outputs, self.initializers)
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="parl_lite")
        return onnx.shape_inference.infer_shapes(proto)

    # ---------------------------------------------------------------- helpers

    def _name(self, value) -> str:
        if value.id not in self.names:  # a constant becomes a node once a node uses it
            self.names[value.id] = self._constant(self.constants[value.id])
        return self.names[value.id]

    def _combined(self, value) -> list[str]:
        """The names a ``builtin.combine`` value groups (the inputs of concat)."""
        return self.names[value.id]

    def _emit(self, op, op_type: str, inputs: list[str], **attributes) -> str:
        result = op.results()[0]
        name = f"v{len(self.names)}_{op_type.lower()}"
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attributes))
        self.names[result.id] = name
        return name

    def _constant(self, array: np.ndarray) -> str:
        """A Constant node: initializers are kept for the model's own tensors."""
        name = f"n{len(self.nodes)}_constant"
        self.nodes.append(helper.make_node("Constant", [], [name], name=name,
                                           value=numpy_helper.from_array(array, name=name)))
        return name

    def _python(self, op, value) -> Any:
        if value.id not in self.constants:
            raise UnsupportedOperatorError(f"operator {op.name()}: an argument that is computed at run time "
                                           f"(only constants are supported there)")
        return self.constants[value.id].tolist()

    # ---------------------------------------------------------------- operators

    def _op(self, op) -> None:
        kind = op.name()
        operands = [value for value in op.operands_source() if value.initialized()]
        attrs = op.attrs()
        if self._graph_op(kind, op, operands, attrs):
            return
        short = kind.partition(".")[2]
        if not (self._math_op(short, op, operands, attrs) or self._layout_op(short, op, operands, attrs)):
            raise UnsupportedOperatorError(f"operator {short or kind}{_where(attrs)} has no translation "
                                           f"(supported: {', '.join(SUPPORTED_OPS)})")

    def _graph_op(self, kind: str, op, operands, attrs) -> bool:
        """Inputs, constants and bookkeeping operators; False if ``kind`` is none of them."""
        if kind == "pd_op.data":
            name = attrs["name"]
            shape = [dim if dim >= 0 else ("batch" if axis == 0 else f"dim_{axis}")
                     for axis, dim in enumerate(attrs["shape"])]
            self.inputs.append(helper.make_tensor_value_info(name, _onnx_dtype(op.results()[0]), shape))
            self.names[op.results()[0].id] = name
        elif kind in _PLUMBING:
            pass
        elif kind == "builtin.combine":
            self.names[op.results()[0].id] = [self._name(value) for value in operands]
        elif kind == "pd_op.full":
            result = op.results()[0]
            self.constants[result.id] = np.full(attrs["shape"], attrs["value"], dtype=_numpy_dtype(result))
        elif kind == "pd_op.full_int_array":
            result = op.results()[0]
            self.constants[result.id] = np.asarray(attrs["value"], dtype=_numpy_dtype(result))
        else:
            return False
        return True

    def _math_op(self, short: str, op, operands, attrs) -> bool:
        """Element-wise, matrix, reduction and normalisation operators; False if ``short`` is none of them."""
        if short in _UNARY:
            self._emit(op, _UNARY[short], [self._name(operands[0])])
        elif short in _BINARY:
            self._emit(op, _BINARY[short], [self._name(v) for v in operands])
        elif short in ("softmax", "log_softmax"):
            self._emit(op, "Softmax" if short == "softmax" else "LogSoftmax", [self._name(operands[0])],
                       axis=attrs["axis"])
        elif short == "leaky_relu":
            self._emit(op, "LeakyRelu", [self._name(operands[0])], alpha=attrs["negative_slope"])
        elif short == "matmul":
            self._matmul(op, operands, attrs)
        elif short == "scale":
            self._scale(op, operands, attrs)
        elif short == "conv2d":
            self._conv2d(op, operands, attrs)
        elif short in _REDUCE:
            self._reduce(op, operands, attrs, _REDUCE[short])
        elif short == "clip":
            low, high = (float(np.ravel(self._python(op, v))[0]) for v in operands[1:3])
            bounds = [self._constant(np.array(b, dtype=_numpy_dtype(operands[0]))) for b in (low, high)]
            self._emit(op, "Clip", [self._name(operands[0]), *bounds])
        elif short == "dropout":
            if not attrs.get("is_test") or attrs.get("mode") != "upscale_in_train":
                raise UnsupportedOperatorError(f"operator dropout{_where(attrs)}: only evaluation mode with "
                                               f"mode='upscale_in_train' is supported")
            self._emit(op, "Identity", [self._name(operands[0])])
        elif short in ("batch_norm", "batch_norm_"):
            self._batch_norm(op, operands, attrs)
        else:
            return False
        return True

    def _layout_op(self, short: str, op, operands, attrs) -> bool:
        """Operators that move or regroup elements; False if ``short`` is none of them."""
        if short == "flatten":
            self._flatten(op, operands, attrs)
        elif short == "reshape":
            self._emit(op, "Reshape", [self._name(operands[0]), self._name(operands[1])])
        elif short == "transpose":
            self._emit(op, "Transpose", [self._name(operands[0])], perm=list(attrs["perm"]))
        elif short == "cast":  # e.g. uint8 frames to float32 in a convolutional network's first step
            self._emit(op, "Cast", [self._name(operands[0])], to=_onnx_dtype(op.results()[0]))
        elif short == "concat":
            self._emit(op, "Concat", self._combined(operands[0]), axis=int(self._python(op, operands[1])[0]))
        else:
            return False
        return True

    def _matmul(self, op, operands, attrs) -> None:
        names = []
        for value, transposed in zip(operands, (attrs["transpose_x"], attrs["transpose_y"]), strict=True):
            name = self._name(value)
            if transposed:
                rank = len(value.shape)
                perm = list(range(rank - 2)) + [rank - 1, rank - 2]
                name = self._node("Transpose", [name], perm=perm)
            names.append(name)
        self._emit(op, "MatMul", names)

    def _node(self, op_type: str, inputs: list[str], **attributes) -> str:
        """An intermediate node whose result is not a PIR value."""
        name = f"n{len(self.nodes)}_{op_type.lower()}"
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attributes))
        return name

    def _scale(self, op, operands, attrs) -> None:
        # out = x * scale + bias (bias_after_scale), or (x + bias) * scale
        source, scale = self._name(operands[0]), self._name(operands[1])
        bias = self._constant(np.array(attrs["bias"], dtype=_numpy_dtype(operands[0])))
        if attrs["bias_after_scale"]:
            self._emit(op, "Add", [self._node("Mul", [source, scale]), bias])
        else:
            self._emit(op, "Mul", [self._node("Add", [source, bias]), scale])

    def _conv2d(self, op, operands, attrs) -> None:
        if attrs["data_format"] != "NCHW":
            raise UnsupportedOperatorError(f"operator conv2d{_where(attrs)}: data_format {attrs['data_format']!r}, "
                                           f"only 'NCHW' is supported")
        options = dict(strides=list(attrs["strides"]), dilations=list(attrs["dilations"]), group=attrs["groups"])
        algorithm, padding = attrs["padding_algorithm"], list(attrs["paddings"])
        if algorithm == "SAME":
            options["auto_pad"] = "SAME_UPPER"  # paddle puts the odd extra padding at the end
        elif algorithm == "VALID":
            options["pads"] = [0, 0, 0, 0]
        elif len(padding) == 2:
            options["pads"] = padding + padding
        elif len(padding) == 4:  # paddle: top, bottom, left, right; ONNX: top, left, bottom, right
            options["pads"] = [padding[0], padding[2], padding[1], padding[3]]
        else:
            raise UnsupportedOperatorError(f"operator conv2d{_where(attrs)}: paddings {padding}")
        self._emit(op, "Conv", [self._name(v) for v in operands[:2]], **options)

    def _flatten(self, op, operands, attrs) -> None:
        rank = len(operands[0].shape)
        start, stop = attrs["start_axis"] % rank, attrs["stop_axis"] % rank
        if start == 1 and stop == rank - 1:
            self._emit(op, "Flatten", [self._name(operands[0])], axis=1)
            return
        # general case: reshape to the traced output shape (paddle marks the batch dim with -1)
        shape = [0 if axis < start else dim for axis, dim in enumerate(op.results()[0].shape)]
        if sum(1 for dim in shape if dim == -1) > 1:
            raise UnsupportedOperatorError(f"operator flatten{_where(attrs)}: axes {start}..{stop} of a tensor with "
                                           f"several dynamic dimensions")
        self._emit(op, "Reshape", [self._name(operands[0]), self._constant(np.array(shape, dtype=np.int64))])

    def _reduce(self, op, operands, attrs, op_type: str) -> None:
        axes = [int(axis) for axis in np.ravel(self._python(op, operands[1]))]
        inputs = [self._name(operands[0])]
        options: dict[str, Any] = {"keepdims": int(attrs["keepdim"])}
        if axes and (op_type == "ReduceSum" or self.opset >= 18):  # axes became an input
            inputs.append(self._constant(np.array(axes, dtype=np.int64)))
        elif axes:
            options["axes"] = axes
        self._emit(op, op_type, inputs, **options)

    def _batch_norm(self, op, operands, attrs) -> None:
        if not attrs.get("is_test") or attrs.get("data_format") != "NCHW":
            raise UnsupportedOperatorError(f"operator batch_norm{_where(attrs)}: only evaluation mode, NCHW")
        source, mean, variance, scale, bias = (self._name(v) for v in operands)
        self._emit(op, "BatchNormalization", [source, scale, bias, mean, variance], epsilon=attrs["epsilon"])


SUPPORTED_OPS = tuple(sorted([*_UNARY, *_BINARY, *_REDUCE, "softmax", "log_softmax", "leaky_relu", "matmul",
                              "scale", "conv2d", "flatten", "reshape", "transpose", "concat", "clip", "cast",
                              "dropout (evaluation)", "batch_norm (evaluation)", "full", "full_int_array"]))


def _where(attrs: dict[str, Any]) -> str:
    layer = attrs.get("struct_name")
    return f" (in layer {layer})" if layer else " (in forward itself, outside any sublayer)"


def _numpy_dtype(value) -> np.dtype:
    return np.dtype(str(value.dtype).replace("paddle.", ""))


def _onnx_dtype(value) -> int:
    return helper.np_dtype_to_tensor_dtype(_numpy_dtype(value))
