"""Build an ONNX graph directly from a ``paddle.nn.Sequential`` with ``onnx.helper``.

This is the export route that needs no paddle2onnx (which has no wheel for Python 3.13). It covers
the usual MLP and CNN policies: the layers in :data:`SUPPORTED_LAYERS`, nested Sequentials
included, float32 only, NCHW convolutions with zero padding.
"""
from typing import List, Tuple

import numpy as np
import onnx
import paddle
from onnx import TensorProto, helper, numpy_helper

__all__ = ["SUPPORTED_LAYERS", "MIN_OPSET", "UnsupportedLayerError", "build_sequential"]

SUPPORTED_LAYERS = ("Linear", "Conv2D", "Flatten", "ReLU", "Tanh", "Sigmoid", "Softmax")
MIN_OPSET = 13  # Softmax normalises along one axis (as paddle does) from opset 13 on

_ACTIVATIONS = {paddle.nn.ReLU: "Relu", paddle.nn.Tanh: "Tanh", paddle.nn.Sigmoid: "Sigmoid"}


class UnsupportedLayerError(ValueError):
    """A layer of the Sequential has no translation here; the message names it."""


def build_sequential(
    model: paddle.nn.Sequential,
    input_name: str,
    input_shape: List[int],
    output_name: str,
    opset_version: int,
) -> onnx.ModelProto:
    """Translate ``model`` layer by layer into an ONNX model with one input and one output.

    Args:
        model: the Sequential; its current weights are copied into the graph.
        input_name: name of the graph input.
        input_shape: shape of the input; ``None`` or ``-1`` marks a dynamic dimension.
        output_name: name of the graph output.
        opset_version: ONNX opset, at least :data:`MIN_OPSET`.

    Returns:
        The ONNX model (not yet checked).

    Raises:
        UnsupportedLayerError: a layer, or an option of one, has no translation.
    """
    if opset_version < MIN_OPSET:
        raise UnsupportedLayerError(f"the onnx.helper route needs opset_version >= {MIN_OPSET}, got {opset_version}")
    nodes: List[onnx.NodeProto] = []
    initializers: List[onnx.TensorProto] = []
    layers = list(_leaf_layers(model, prefix=""))
    if not layers:
        raise UnsupportedLayerError("the Sequential has no layers")
    current = input_name
    for index, (name, layer) in enumerate(layers):
        result = output_name if index == len(layers) - 1 else f"{name}.out"
        new_nodes, new_initializers = _translate(name, layer, current, result)
        nodes += new_nodes
        initializers += new_initializers
        current = result
    dims = [dim if dim is not None and dim >= 0 else ("batch" if axis == 0 else f"dim_{axis}")
            for axis, dim in enumerate(input_shape)]
    graph = helper.make_graph(
        nodes,
        "parl_lite_sequential",
        inputs=[helper.make_tensor_value_info(input_name, TensorProto.FLOAT, dims)],
        outputs=[helper.make_tensor_value_info(output_name, TensorProto.FLOAT, None)],
        initializer=initializers,
    )
    model_proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)],
                                    producer_name="parl_lite")
    return onnx.shape_inference.infer_shapes(model_proto)


def _leaf_layers(layer: paddle.nn.Layer, prefix: str):
    """(structured name, layer) of every layer of nested Sequentials, in call order."""
    for name, child in layer.named_children():
        if isinstance(child, paddle.nn.Sequential):
            yield from _leaf_layers(child, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", child


def _translate(name: str, layer: paddle.nn.Layer, source: str, result: str) -> Tuple[list, list]:
    if isinstance(layer, paddle.nn.Linear):
        return _linear(name, layer, source, result)
    if isinstance(layer, paddle.nn.Conv2D):
        return _conv2d(name, layer, source, result)
    if isinstance(layer, paddle.nn.Flatten):
        if layer.stop_axis != -1:
            raise UnsupportedLayerError(f"layer {name!r}: Flatten(stop_axis={layer.stop_axis}) is not supported, "
                                        f"only stop_axis=-1")
        return [helper.make_node("Flatten", [source], [result], name=name, axis=layer.start_axis)], []
    if isinstance(layer, paddle.nn.Softmax):
        return [helper.make_node("Softmax", [source], [result], name=name, axis=layer._axis)], []
    for layer_type, op_type in _ACTIVATIONS.items():
        if isinstance(layer, layer_type):
            return [helper.make_node(op_type, [source], [result], name=name)], []
    raise UnsupportedLayerError(f"layer {name!r} ({type(layer).__name__}) has no onnx.helper translation "
                                f"(supported: {', '.join(SUPPORTED_LAYERS)})")


def _weight(layer_name: str, parameter: paddle.Tensor, role: str) -> onnx.TensorProto:
    if parameter.dtype != paddle.float32:
        raise UnsupportedLayerError(f"layer {layer_name!r}: {role} is {parameter.dtype}, only float32 is supported")
    return numpy_helper.from_array(np.asarray(parameter.numpy()), name=f"{layer_name}.{role}")


def _linear(name: str, layer: paddle.nn.Linear, source: str, result: str) -> Tuple[list, list]:
    # paddle stores the weight as [in, out]: y = x @ W + b, which is exactly MatMul then Add
    weight = _weight(name, layer.weight, "weight")
    if layer.bias is None:
        return [helper.make_node("MatMul", [source, weight.name], [result], name=name)], [weight]
    bias = _weight(name, layer.bias, "bias")
    nodes = [
        helper.make_node("MatMul", [source, weight.name], [f"{name}.matmul"], name=f"{name}.matmul"),
        helper.make_node("Add", [f"{name}.matmul", bias.name], [result], name=f"{name}.add"),
    ]
    return nodes, [weight, bias]


def _conv2d(name: str, layer: paddle.nn.Conv2D, source: str, result: str) -> Tuple[list, list]:
    if layer._data_format != "NCHW":
        raise UnsupportedLayerError(f"layer {name!r}: Conv2D data_format {layer._data_format!r} is not supported, "
                                    f"only 'NCHW'")
    if layer._padding_mode != "zeros":
        raise UnsupportedLayerError(f"layer {name!r}: Conv2D padding_mode {layer._padding_mode!r} is not supported, "
                                    f"only 'zeros'")
    attributes = dict(kernel_shape=list(layer._kernel_size), strides=list(layer._stride),
                      dilations=list(layer._dilation), group=layer._groups)
    if layer._padding_algorithm == "SAME":
        attributes["auto_pad"] = "SAME_UPPER"  # paddle puts the odd extra padding at the end
    else:
        attributes["pads"] = _onnx_pads(name, layer)
    weight = _weight(name, layer.weight, "weight")
    initializers = [weight]
    inputs = [source, weight.name]
    if layer.bias is not None:
        initializers.append(_weight(name, layer.bias, "bias"))
        inputs.append(initializers[-1].name)
    return [helper.make_node("Conv", inputs, [result], name=name, **attributes)], initializers


def _onnx_pads(name: str, layer: paddle.nn.Conv2D) -> List[int]:
    """paddle's padding ([h, w] or [top, bottom, left, right]) as ONNX pads [top, left, bottom, right]."""
    if layer._padding_algorithm == "VALID":
        return [0, 0, 0, 0]
    padding = [int(p) for p in np.ravel(layer._updated_padding)]
    if len(padding) == 2:
        return padding + padding
    if len(padding) == 4:
        top, bottom, left, right = padding
        return [top, left, bottom, right]
    raise UnsupportedLayerError(f"layer {name!r}: Conv2D padding {layer._padding!r} is not supported")
