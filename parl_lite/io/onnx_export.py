"""Export a paddle model to an ONNX file that onnxruntime runs.

Two routes:

- **parl_lite's own translation** (:mod:`parl_lite.io.pir_to_onnx`; no paddle2onnx, milliseconds):
  ``forward`` is traced to a PIR program whose operators (:data:`pir_to_onnx.SUPPORTED_OPS`: what
  MLP, CNN and actor-critic models use) become ONNX nodes.
- **paddle2onnx** (other operators; Python < 3.13 only): ``paddle.jit.save`` traces ``forward`` in
  this process, then paddle2onnx converts the static model *in a child process*, because on
  failure it ends its process (``sys.exit(-1)``, or a C++ abort on an unsupported operator). The
  child never runs paddle2onnx's polygraphy step (which may pip-install packages).

Either way the result is checked with ``onnx.checker``, run once in onnxruntime against the paddle
model on a random input, and written atomically (temporary file, fsync, rename).
"""
import contextlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from collections.abc import Iterator, Sequence

import numpy as np
import onnx
import paddle
from paddle.static import InputSpec

from parl_lite.common.onnx_runtime import session_options, weights_to_inputs
from parl_lite.io import pir_to_onnx
from parl_lite.common.atomic import write_bytes_atomically
from parl_lite.common.paths import check_destination

__all__ = ["OnnxExportError", "export_onnx", "policy_graph", "forward_graph", "BACKENDS"]

BACKENDS = ("auto", "paddle2onnx", "onnx")
_CHILD = Path(__file__).with_name("_paddle2onnx_child.py")
_VERIFY_BATCH = 3  # size given to dynamic dimensions of the verification input
_VERIFY_ATOL = 1e-5
_VERIFY_RTOL = 1e-5


class OnnxExportError(RuntimeError):
    """The model could not be exported; the message names the model class and, where known, the
    layer or operator at fault."""


def export_onnx(
    model: paddle.nn.Layer,
    path: "str | os.PathLike",
    input_spec: Any,
    *,
    output_names: Sequence[str] | None = None,
    opset_version: int = 17,
    backend: str = "auto",
    verify: bool = True,
    timeout: float = 300.0,
) -> Path:
    """Export ``model.forward`` (in evaluation mode) to the ONNX file ``path``.

    Args:
        model: a ``paddle.nn.Layer`` (e.g. a :class:`parl_lite.Model`). Its ``forward`` may return
            one tensor or a tuple/list of tensors (e.g. ``(policy, value)`` of a shared model).
        path: the ``.onnx`` file to write; replaced atomically, never left half-written (a folder,
            FIFO, socket or device there is refused before the export).
        input_spec: one entry per ``forward`` input: a ``paddle.static.InputSpec`` or a plain shape
            such as ``[None, 4]`` (float32; ``None`` or ``-1`` is a dynamic dimension). A single
            shape may be given unwrapped. Inputs are named after ``forward``'s parameters unless
            the InputSpec has a name.
        output_names: names of the graph outputs; default ``output_0``, ``output_1``, ...
        opset_version: ONNX opset (paddle2onnx supports 7–21; the own translation needs >= 13).
        backend: ``"auto"`` (parl_lite's own translation, else paddle2onnx), ``"onnx"`` (the
            translation only) or ``"paddle2onnx"``.
        verify: run the exported graph in onnxruntime on a random input and require it to match
            paddle (``|onnx - paddle| <= 1e-5 + 1e-5 * |paddle|``).
        timeout: seconds allowed to the paddle2onnx child process.

    Returns:
        ``path`` as a :class:`pathlib.Path`.

    Raises:
        OnnxExportError: every failure (bad ``input_spec``, a ``forward`` that paddle cannot trace,
            an operator or layer that cannot be converted, a missing paddle2onnx, a mismatch in
            verification); the message names the model class and, where known, the layer or op.
    """
    label = _label(model)
    try:
        path = check_destination(path)  # before the work: a folder, a FIFO or a device is refused
    except (OSError, ValueError) as error:
        raise OnnxExportError(f"{label}: {error}") from error
    if backend not in BACKENDS:
        raise OnnxExportError(f"backend must be one of {BACKENDS}, got {backend!r}")
    specs = _input_specs(model, input_spec, label)
    with _evaluation_mode(model):
        proto = _export(model, specs, output_names, opset_version, backend, verify, timeout, label)
    try:
        write_bytes_atomically(path, proto.SerializeToString())
    except OSError as error:  # no space left on device, the file size limit, ...: the message names the file
        raise OnnxExportError(f"{label}: {error}") from error
    return path


def policy_graph(model: paddle.nn.Layer, input_spec: InputSpec) -> bytes:
    """``model.policy`` (``forward`` when the model has none) as a serialized ONNX model whose
    weights are graph inputs named as in ``model.get_weights()`` (see
    :mod:`parl_lite.common.onnx_runtime`): what a rollout actor runs with onnxruntime, given the
    learner's weights with each batch of work, without importing paddle. Only parl_lite's own
    translation is used.

    Raises:
        OnnxExportError: ``policy`` has an operator the translation does not know (named), or the
            graph does not match paddle on a random input.
    """
    return _graph_with_weight_inputs(model, "policy", input_spec)


def forward_graph(model: paddle.nn.Layer, input_spec: InputSpec) -> bytes:
    """``model.forward`` as :func:`policy_graph` gives the policy: weights as graph inputs named as
    in ``model.get_weights()``, parl_lite's own translation only.

    Raises:
        OnnxExportError: as :func:`policy_graph`.
    """
    return _graph_with_weight_inputs(model, "forward", input_spec)


def _graph_with_weight_inputs(model: paddle.nn.Layer, role: str, input_spec: InputSpec) -> bytes:
    label = _label(model)
    traced = _RoleOf(model, role)
    specs = _input_specs(traced, input_spec, label)
    with _evaluation_mode(traced):
        proto = _export(traced, specs, None, 17, "onnx", True, 300.0, label)
    graph, _ = weights_to_inputs(proto)
    prefix = "model."
    for value in graph.graph.input:
        value.name = value.name.removeprefix(prefix)
    for node in graph.graph.node:
        node.input[:] = [name.removeprefix(prefix) for name in node.input]
    return graph.SerializeToString()


class _RoleOf(paddle.nn.Layer):
    """One of a model's roles (``policy``, falling back to ``forward``) as the ``forward`` an export
    traces (its weights are ``model.<name>``)."""

    def __init__(self, model: paddle.nn.Layer, role: str) -> None:
        super().__init__()
        self.model = model
        self.role = role

    def forward(self, obs: paddle.Tensor) -> Any:
        return getattr(self.model, self.role, self.model.forward)(obs)


def _label(model: Any) -> str:
    cls = type(model)
    return f"model {cls.__qualname__} ({cls.__module__})"


# ---------------------------------------------------------------- inputs


def _input_specs(model: Any, input_spec: Any, label: str) -> list[InputSpec]:
    """Normalise ``input_spec`` to named InputSpecs, one per ``forward`` input."""
    if not isinstance(model, paddle.nn.Layer):
        raise OnnxExportError(f"{label}: export_onnx needs a paddle.nn.Layer, got {type(model).__name__}")
    names, required, open_ended = _forward_inputs(model, label)
    if isinstance(input_spec, InputSpec) or _looks_like_shape(input_spec):
        items = [input_spec]
    elif isinstance(input_spec, (list, tuple)) and input_spec:
        items = list(input_spec)
    else:
        raise OnnxExportError(f"{label}: input_spec must be an InputSpec, a shape such as [None, 4], or a list of "
                              f"them, got {input_spec!r}")
    if len(items) < required or (len(items) > len(names) and not open_ended):
        raise OnnxExportError(f"{label}: forward takes inputs {names} ({required} required) but input_spec "
                              f"gives {len(items)}: {input_spec!r}")
    specs = []
    for index, item in enumerate(items):
        name = names[index] if index < len(names) else f"input_{index}"
        if isinstance(item, InputSpec):
            specs.append(item if item.name else InputSpec(item.shape, item.dtype, name))
        elif _is_shape(item):
            specs.append(InputSpec([None if dim == -1 else dim for dim in item], "float32", name))
        else:
            where = "input_spec" if item is input_spec else f"input_spec[{index}]"
            raise OnnxExportError(f"{label}: {where} must be an InputSpec or a shape of positive ints and None "
                                  f"(dynamic), got {item!r}")
    return specs


def _looks_like_shape(value: Any) -> bool:
    """A flat sequence of numbers and None: one shape, maybe with bad dimensions."""
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(
        dim is None or isinstance(dim, (int, float, np.number)) for dim in value)


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(
        dim is None or (isinstance(dim, (int, np.integer)) and not isinstance(dim, bool) and (dim >= 1 or dim == -1))
        for dim in value
    )


def _forward_inputs(model: paddle.nn.Layer, label: str):
    """(input parameter names, how many are required, whether it takes ``*args``) of forward.

    paddle.jit binds the InputSpecs to forward's parameters *after the one named ``self``*; a
    forward whose first parameter has another name fails there with a misleading message.
    """
    forward = type(model).forward
    try:
        parameters = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError) as error:
        raise OnnxExportError(f"{label}: cannot read the signature of forward: {error}") from error
    where = _where(forward)
    if not parameters or parameters[0].name != "self":
        first = parameters[0].name if parameters else "nothing"
        raise OnnxExportError(f"{label}: the first parameter of forward{where} is named {first!r}; paddle.jit "
                              f"(which the export uses) requires it to be named 'self'")
    positional = [p for p in parameters[1:] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(1 for p in positional if p.default is p.empty)
    open_ended = any(p.kind == p.VAR_POSITIONAL for p in parameters)
    return [p.name for p in positional], required, open_ended


def _where(function: Any) -> str:
    try:
        return f" ({inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]})"
    except (TypeError, OSError):
        return ""


@contextlib.contextmanager
def _evaluation_mode(model: paddle.nn.Layer) -> Iterator[None]:
    """Export with dropout off and batch-norm on its running statistics; restore the modes after."""
    modes = [(layer, layer.training) for layer in model.sublayers(include_self=True)]
    model.eval()
    try:
        yield
    finally:
        for layer, training in modes:
            layer.training = training


# ---------------------------------------------------------------- routes


def _paddle2onnx_available() -> bool:
    try:
        return importlib.util.find_spec("paddle2onnx") is not None
    except (ImportError, ValueError):  # ValueError: a module blocked via sys.modules[name] = None
        return False


def _export(model: paddle.nn.Layer, specs: list[InputSpec], output_names: Sequence[str] | None, opset: int,
            backend: str, verify: bool, timeout: float, label: str) -> onnx.ModelProto:
    """Build, name, check and verify the graph. Under "auto" the translation in Python comes first
    (milliseconds); if it cannot translate the model, or its graph does not pass, paddle2onnx does."""
    translation_failure = None
    if backend in ("auto", "onnx"):
        try:
            return _finish(_translate(model, specs, opset, label), model, specs, output_names, verify, label)
        except OnnxExportError as error:
            if backend == "onnx":
                raise
            translation_failure = str(error).removeprefix(label + ": ")
    if not _paddle2onnx_available():
        why = (f"parl_lite's own translation cannot export it ({translation_failure}), and "
               if translation_failure else "backend='paddle2onnx' was asked for, but ")
        raise OnnxExportError(
            f"{label}: {why}paddle2onnx is not installed (it has no wheel for Python 3.13; this is Python "
            f"{sys.version_info.major}.{sys.version_info.minor}). Install it with `pip install 'paddle2onnx>=2.0'` "
            f"on Python 3.10-3.12, or use only the operators {', '.join(pir_to_onnx.SUPPORTED_OPS)}."
        )
    try:
        proto = _weights_as_initializers(_export_with_paddle2onnx(model, specs, opset, timeout, label), model)
        return _finish(proto, model, specs, output_names, verify, label)
    except OnnxExportError as error:
        if translation_failure is None:
            raise
        raise OnnxExportError(f"{error}\n(parl_lite's own translation failed too: {translation_failure})") from error


def _finish(proto: onnx.ModelProto, model: paddle.nn.Layer, specs: list[InputSpec],
            output_names: Sequence[str] | None, verify: bool, label: str) -> onnx.ModelProto:
    proto = _name_outputs(proto, output_names, label)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as error:
        raise OnnxExportError(f"{label}: the exported graph fails onnx.checker: {error}") from error
    if verify:
        _verify(model, proto, specs, label)
    return proto


def _translate(model: paddle.nn.Layer, specs: list[InputSpec], opset: int, label: str) -> onnx.ModelProto:
    try:
        return pir_to_onnx.translate(model, specs, opset)
    except (pir_to_onnx.UnsupportedOperatorError, pir_to_onnx.TraceError) as error:
        raise OnnxExportError(f"{label}: {error}") from error
    except Exception as error:  # a program shape the translation does not expect
        raise OnnxExportError(f"{label}: parl_lite's translation failed: {type(error).__name__}: {error}") from error


def _export_with_paddle2onnx(
    model: paddle.nn.Layer, specs: list[InputSpec], opset: int, timeout: float, label: str
) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory(prefix="parl_lite_onnx_") as workdir:
        prefix = os.path.join(workdir, "model")
        try:
            paddle.jit.save(model, prefix, input_spec=specs)
        except Exception as error:
            raise OnnxExportError(f"{label}: paddle.jit.save could not trace forward: "
                                  f"{type(error).__name__}: {error}") from error
        output = os.path.join(workdir, "model.onnx")
        report = os.path.join(workdir, "unsupported.json")
        # TMPDIR: whatever paddle2onnx leaves behind lands in workdir, which is removed below
        env = dict(os.environ, TMPDIR=workdir, POLYGRAPHY_AUTOINSTALL_DEPS="0", P2O_KEEP_TEMP_MODEL="0")
        command = [sys.executable, str(_CHILD), prefix, output, str(opset), report]
        try:
            result = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired as error:
            raise OnnxExportError(f"{label}: paddle2onnx did not finish within {timeout} s") from error
        if result.returncode != 0 or not os.path.isfile(output):
            raise OnnxExportError(_describe_failure(label, result, report))
        try:
            return onnx.load(output)
        except Exception as error:
            raise OnnxExportError(f"{label}: paddle2onnx wrote an unreadable ONNX file: {error}") from error


def _describe_failure(label: str, result: subprocess.CompletedProcess, report: str) -> str:
    version = importlib.metadata.version("paddle2onnx")
    if result.returncode < 0:
        how = f"was killed by {signal.Signals(-result.returncode).name}"
    else:
        how = f"exited with status {result.returncode}"
    message = f"{label}: paddle2onnx {version} {how}"
    unsupported = _read_report(report)
    if unsupported:
        where = [f"{entry['op']} (in layer {entry['layer']})" if entry.get("layer")
                 else f"{entry['op']} (in forward itself, outside any sublayer)" for entry in unsupported]
        message += "; operators it does not support: " + ", ".join(where)
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip() and "warnings.warn" not in line]
    errors = [line for line in lines if "[ERROR]" in line or line.startswith(("Error:", "ValueError", "RuntimeError"))]
    return message + ". paddle2onnx said:\n" + "\n".join(errors or lines[-12:])


def _read_report(report: str) -> list[dict[str, str]]:
    try:
        with open(report) as handle:
            return [entry for entry in json.load(handle) if "op" in entry]
    except (OSError, ValueError):
        return []


def _weights_as_initializers(proto: onnx.ModelProto, model: paddle.nn.Layer) -> onnx.ModelProto:
    """paddle2onnx stores the weights as Constant nodes named ``linear_0.w_0``; make them
    initializers named as in ``Model.get_weights()`` (``fc1.weight``), as the own translation does,
    so that a consumer (e.g. evokit_py's OnnxPolicy) finds exactly the model's tensors."""
    structured = {tensor.name: name for name, tensor in model.state_dict().items()}
    graph = proto.graph
    taken = {name for node in graph.node for name in node.output} | {value.name for value in graph.input}
    renames, kept = {}, []
    for node in graph.node:
        source = node.output[0] if node.op_type == "Constant" and len(node.output) == 1 else None
        is_value = len(node.attribute) == 1 and node.attribute[0].name == "value"
        if source is not None and source in structured and is_value:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(node.attribute[0].t)
            tensor.name = structured[source] if structured[source] not in taken else source
            graph.initializer.append(tensor)
            renames[source] = tensor.name
        else:
            kept.append(node)
    _rename_inputs(kept, renames)
    del graph.node[:]
    graph.node.extend(kept)
    return proto


def _rename_inputs(nodes: Sequence[onnx.NodeProto], renames: dict[str, str]) -> None:
    """Rename the inputs of ``nodes``, including those of subgraphs (If / Loop bodies)."""
    for node in nodes:
        node.input[:] = [renames.get(name, name) for name in node.input]
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                _rename_inputs(subgraph.node, renames)


# ---------------------------------------------------------------- outputs, checks, file


def _name_outputs(proto: onnx.ModelProto, output_names: Sequence[str] | None, label: str) -> onnx.ModelProto:
    """Give the graph outputs their names (paddle2onnx calls them ``fetch_name_<i>``)."""
    outputs = proto.graph.output
    names = list(output_names) if output_names is not None else [f"output_{i}" for i in range(len(outputs))]
    if len(names) != len(outputs) or len(set(names)) != len(names):
        raise OnnxExportError(f"{label}: output_names {names} must be {len(outputs)} distinct names, one per "
                              f"output of forward")
    taken = {name for node in proto.graph.node for name in node.output}
    taken |= {value.name for value in proto.graph.input} | {init.name for init in proto.graph.initializer}
    for output, name in zip(outputs, names, strict=True):
        if output.name == name:
            continue
        if name in taken:
            raise OnnxExportError(f"{label}: output name {name!r} is already the name of a value in the graph")
        # an Identity is correct wherever the old name is used (inputs, subgraphs, other outputs)
        proto.graph.node.append(onnx.helper.make_node("Identity", [output.name], [name], name=f"rename_{name}"))
        output.name = name
    return proto


def _verify(model: paddle.nn.Layer, proto: onnx.ModelProto, specs: list[InputSpec], label: str) -> None:
    """Run the graph once in onnxruntime and compare it with paddle on the same random input."""
    import onnxruntime

    rng = np.random.default_rng(0)
    feeds = {spec.name: _sample(rng, spec) for spec in specs}
    try:
        with paddle.no_grad():
            expected = model(*[paddle.to_tensor(value) for value in feeds.values()])
    except Exception as error:
        shapes = {name: value.shape for name, value in feeds.items()}
        raise OnnxExportError(f"{label}: paddle forward fails on the verification input {shapes} (dynamic "
                              f"dimensions set to {_VERIFY_BATCH}): {error}; give fixed sizes or verify=False"
                              ) from error
    expected = [np.asarray(t.numpy()) for t in (expected if isinstance(expected, (list, tuple)) else [expected])]
    try:
        session = onnxruntime.InferenceSession(proto.SerializeToString(), session_options(),
                                               providers=["CPUExecutionProvider"])
        actual = session.run(None, feeds)
    except Exception as error:
        raise OnnxExportError(f"{label}: onnxruntime cannot run the exported graph: {error}") from error
    if len(actual) != len(expected):
        raise OnnxExportError(f"{label}: the ONNX graph has {len(actual)} outputs, "
                              f"paddle forward returns {len(expected)}")
    for output, got, want in zip(session.get_outputs(), actual, expected, strict=True):
        if got.shape != want.shape or not np.allclose(got, want, rtol=_VERIFY_RTOL, atol=_VERIFY_ATOL):
            difference = np.abs(got - want).max() if got.shape == want.shape else f"shape {got.shape} vs {want.shape}"
            raise OnnxExportError(f"{label}: output {output.name!r} of the ONNX graph differs from paddle "
                                  f"(max abs difference {difference})")


def _sample(rng: np.random.Generator, spec: InputSpec) -> np.ndarray:
    shape = [_VERIFY_BATCH if dim is None or dim < 0 else dim for dim in spec.shape]
    dtype = np.dtype(str(spec.dtype).replace("paddle.", ""))
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 2, shape).astype(dtype)  # valid for bool, and for ints used as indices


