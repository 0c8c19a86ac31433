"""An ONNX policy run by onnxruntime whose weights change per candidate without a new session.

The weights are *graph inputs*, not initializers, so every ``run`` feeds the current parameters:
one session serves every candidate. An ONNX file given by the user (e.g. exported from paddle, output
``fetch_name_0``) is converted on load: its float initializers (tensors with at least one dimension)
become inputs and together form the flat parameter vector, in file order. :meth:`OnnxPolicy.to_onnx`
turns the inputs back into initializers holding chosen values, optionally behind an
observation-normalisation prefix, for deployment.

:func:`make_policy` makes the policy the config's ``policy`` block describes and checks it against
the environment's spaces. A sampling worker builds its policy from bytes and only runs it, so the
``onnx`` package (graph building and editing, 35 ms to import) is imported where a graph is built,
read or edited.
"""
import itertools
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import onnxruntime as ort

from evokit_py.sections import PolicyConfig
from evokit_py.envs import action_size, mlp_output_activation, observation_size
from parl_lite.common.onnx_runtime import session_options, weights_to_inputs
from parl_lite.common.paths import describe_file_type

if TYPE_CHECKING:
    import onnx

__all__ = ["OnnxPolicy", "LinearPolicy", "build_mlp", "make_policy", "check_policy",
           "sampling_policy"]

OPSET = 17


def build_mlp(obs_dim: int, act_dim: int, hidden: Sequence[int], activation: str = "tanh",
              output_activation: str = "none", bias: bool = True) -> "onnx.ModelProto":
    """An MLP ``obs -> [MatMul, Add, act] * len(hidden) -> MatMul, Add, output act`` whose weights
    ``w0, b0, w1, b1, ...`` are graph inputs. Input ``obs`` is [batch, obs_dim] float32, output
    ``action`` is [batch, act_dim]. A linear policy (no hidden layer) computes ``obs @ w0 + b0`` in
    float64 and rounds it once to float32, as :class:`LinearPolicy` does in numpy: the same bits.

    Args:
        activation: "tanh" or "relu" between layers.
        output_activation: "none", "tanh" or "softmax".
        bias: False: no ``Add`` and no ``b*`` inputs (each layer is ``x @ w``; ARS's linear policy).
    """
    import onnx
    from onnx import TensorProto, helper

    ops, sizes = {"tanh": "Tanh", "relu": "Relu", "softmax": "Softmax"}, [obs_dim, *hidden, act_dim]
    inputs = [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", obs_dim])]
    nodes = []
    x = "obs"
    in_double = not hidden  # a linear layer sums in float64, rounded once (see LinearPolicy)

    def operand(name: str) -> str:
        if not in_double:
            return name
        nodes.append(helper.make_node("Cast", [name], [f"{name}__f64"], to=TensorProto.DOUBLE))
        return f"{name}__f64"

    for layer, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        w, b = f"w{layer}", f"b{layer}"
        inputs.append(helper.make_tensor_value_info(w, TensorProto.FLOAT, [fan_in, fan_out]))
        nodes.append(helper.make_node("MatMul", [operand(x), operand(w)], [f"mm{layer}"]))
        x = f"mm{layer}"
        if bias:
            inputs.append(helper.make_tensor_value_info(b, TensorProto.FLOAT, [fan_out]))
            nodes.append(helper.make_node("Add", [x, operand(b)], [f"z{layer}"]))
            x = f"z{layer}"
        if in_double:
            nodes.append(helper.make_node("Cast", [x], [f"{x}__f32"], to=TensorProto.FLOAT))
            x = f"{x}__f32"
        act = activation if layer < len(sizes) - 2 else output_activation
        if act != "none":
            options: dict[str, Any] = {"axis": -1} if act == "softmax" else {}
            nodes.append(helper.make_node(ops[act], [x], [f"a{layer}"], **options))
            x = f"a{layer}"
    nodes.append(helper.make_node("Identity", [x], ["action"]))
    output = helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", act_dim])
    graph = helper.make_graph(nodes, "evokit_mlp", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="evokit_py")
    onnx.checker.check_model(model)
    return model


class OnnxPolicy:
    """A policy graph whose float weights are inputs; parameters are one flat vector.

    Args:
        model: an ONNX model whose first input is the observation and whose other inputs are the
            weights (as :func:`build_mlp` makes, or :meth:`from_file` converts), or its serialized
            bytes (then parsed only if :attr:`model` is read).
    """

    def __init__(self, model: "onnx.ModelProto | bytes"):
        self._model = None if isinstance(model, bytes) else model
        self._bytes = model if isinstance(model, bytes) else model.SerializeToString()
        self.session = ort.InferenceSession(self._bytes, session_options(), providers=["CPUExecutionProvider"])
        inputs = self.session.get_inputs()
        self.obs_name = inputs[0].name
        self.weight_names = [i.name for i in inputs[1:]]
        self.weight_shapes = [tuple(i.shape) for i in inputs[1:]]
        bad = [(name, shape) for name, shape in zip(self.weight_names, self.weight_shapes, strict=True)
               if not all(isinstance(d, int) for d in shape)]
        if bad:
            raise ValueError(f"policy weight inputs need static shapes, got {bad}")
        self.output_name = self.session.get_outputs()[0].name
        self.sizes = [int(np.prod(s)) for s in self.weight_shapes]
        self.param_size = int(sum(self.sizes))
        self._feed: dict[str, np.ndarray] = {}
        self.set_parameters(np.zeros(self.param_size, dtype=np.float32))

    @property
    def model(self) -> "onnx.ModelProto":
        """The graph (weights as inputs)."""
        if self._model is None:
            import onnx

            self._model = onnx.ModelProto.FromString(self._bytes)
        return self._model

    @classmethod
    def from_file(cls, path: "str | Path") -> tuple["OnnxPolicy", np.ndarray]:
        """Load a user's ONNX file; returns the policy and its weights as the initial parameters.

        Raises:
            ValueError: the file is missing, not ONNX, or has no float weights.
        """
        import onnx

        path = Path(path)
        try:
            mode = os.stat(path).st_mode  # stat, not open: a FIFO would block the open
        except OSError as error:
            raise ValueError(f"policy.onnx: file {path} does not exist" if isinstance(error, FileNotFoundError)
                             else f"policy.onnx: {path}: {error.strerror or error}") from None
        if not stat.S_ISREG(mode):
            raise ValueError(f"policy.onnx: {path} is {describe_file_type(mode)}, not an ONNX file")
        try:
            model = onnx.load(str(path))
        except Exception as error:  # onnx raises DecodeError and others for a bad file
            raise ValueError(f"policy.onnx: {path} is not an ONNX model: {error}") from error
        model, weights = weights_to_inputs(model)
        values = list(weights.values())
        if not values:
            raise ValueError(f"policy.onnx: {path} has no float weights to optimise")
        return cls(model), np.concatenate([v.ravel() for v in values])

    @classmethod
    def from_bytes(cls, data: bytes) -> "OnnxPolicy":
        return cls(data)

    def to_bytes(self) -> bytes:
        return self._bytes

    def set_parameters(self, params: np.ndarray) -> None:
        """Use ``params`` (flat, length ``param_size``) from the next call on; no session rebuild."""
        params = np.asarray(params, dtype=np.float32)
        if params.shape != (self.param_size,):
            raise ValueError(f"parameters have shape {params.shape}, the policy has {self.param_size}")
        chunks = np.split(params, np.cumsum(self.sizes)[:-1])
        self._feed = {name: chunk.reshape(shape) for name, chunk, shape
                      in zip(self.weight_names, chunks, self.weight_shapes, strict=True)}

    def get_parameters(self) -> np.ndarray:
        """The parameters in use (flat float32 copy)."""
        return np.concatenate([self._feed[name].ravel() for name in self.weight_names])

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Run the policy on a batch of observations ([batch, obs_dim] float32)."""
        self._feed[self.obs_name] = obs
        return self.session.run([self.output_name], self._feed)[0]

    def to_onnx(self, params: np.ndarray, obs_mean: np.ndarray | None = None,
                obs_std: np.ndarray | None = None, obs_clip: float | None = None) -> "onnx.ModelProto":
        """A standalone model: weights = ``params`` as initializers; with ``obs_mean``/``obs_std`` the
        input is normalised first and, with ``obs_clip``, clipped to ``[-obs_clip, obs_clip]``, as
        :func:`evokit_py.obs_stats.normalise` does during training."""
        import onnx
        from onnx import helper, numpy_helper

        self.set_parameters(params)
        model = onnx.ModelProto.FromString(self.model.SerializeToString())
        graph = model.graph
        weights = set(self.weight_names)
        kept_inputs = [i for i in graph.input if i.name not in weights]
        del graph.input[:]
        graph.input.extend(kept_inputs)
        graph.initializer.extend(numpy_helper.from_array(np.ascontiguousarray(self._feed[n]), n)
                                 for n in self.weight_names)
        if obs_mean is not None:
            raw = graph.input[0].name
            internal = f"{raw}__normalised"
            for node in graph.node:
                node.input[:] = [internal if name == raw else name for name in node.input]
            graph.initializer.extend([
                numpy_helper.from_array(np.asarray(obs_mean, np.float32), "obs_mean"),
                numpy_helper.from_array(np.asarray(obs_std, np.float32), "obs_std")])
            prefix = [helper.make_node("Sub", [raw, "obs_mean"], ["obs__centred"])]
            if obs_clip is None:
                prefix.append(helper.make_node("Div", ["obs__centred", "obs_std"], [internal]))
            else:
                graph.initializer.extend([numpy_helper.from_array(np.asarray(-obs_clip, np.float32), "clip_low"),
                                          numpy_helper.from_array(np.asarray(obs_clip, np.float32), "clip_high")])
                prefix += [helper.make_node("Div", ["obs__centred", "obs_std"], ["obs__scaled"]),
                           helper.make_node("Clip", ["obs__scaled", "clip_low", "clip_high"], [internal])]
            nodes = prefix + list(graph.node)
            del graph.node[:]
            graph.node.extend(nodes)
        onnx.checker.check_model(model)
        return model


class LinearPolicy:
    """The linear policy :func:`build_mlp` makes (no hidden layer, no output activation), computed
    in numpy: ``obs @ w0 (+ b0)`` summed in float64 and rounded once to float32, the bits the graph
    gives through onnxruntime (tested), without a session call per environment step. Parameters are
    laid out as the graph's inputs: ``w0`` ([obs_dim, act_dim], row-major), then ``b0``.

    Args:
        obs_dim, act_dim: the observation and action sizes.
        bias: whether there is a ``b0`` (``policy.mlp.bias``).
    """

    def __init__(self, obs_dim: int, act_dim: int, bias: bool):
        self.shape = (obs_dim, act_dim)
        self.param_size = obs_dim * act_dim + (act_dim if bias else 0)
        self.bias = bias
        self.set_parameters(np.zeros(self.param_size, dtype=np.float32))

    def set_parameters(self, params: np.ndarray) -> None:
        """Use ``params`` (flat, length ``param_size``; rounded to float32, as the graph is fed them)."""
        params = np.asarray(params, dtype=np.float32)
        if params.shape != (self.param_size,):
            raise ValueError(f"parameters have shape {params.shape}, the policy has {self.param_size}")
        size = self.shape[0] * self.shape[1]
        self._weights = params[:size].reshape(self.shape).astype(np.float64)
        self._bias = params[size:].astype(np.float64) if self.bias else None

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The actions of a batch of observations ([batch, obs_dim] float32) as [batch, act_dim] float32."""
        output = np.asarray(obs, dtype=np.float64) @ self._weights
        if self._bias is not None:
            output += self._bias
        return output.astype(np.float32)


def sampling_policy(config: PolicyConfig, policy_bytes: bytes, env: gym.Env) -> "OnnxPolicy | LinearPolicy":
    """The policy a sampling worker runs for the ``policy`` block: a :class:`LinearPolicy` for a
    linear MLP without output activation (the same bits, a fifth of the time per step), else the
    graph ``policy_bytes`` (:meth:`OnnxPolicy.to_bytes`) in onnxruntime."""
    mlp = config.mlp
    if config.onnx is None and not mlp.hidden and mlp_output_activation(mlp, env.action_space) == "none":
        return LinearPolicy(observation_size(env.observation_space), action_size(env.action_space), mlp.bias)
    return OnnxPolicy.from_bytes(policy_bytes)


def make_policy(config: PolicyConfig, seed: int, env: gym.Env) -> tuple[OnnxPolicy, np.ndarray]:
    """The policy the ``policy`` block describes for ``env`` (made by :func:`evokit_py.envs.make_env`),
    checked against its spaces (:func:`check_policy`), and its initial parameters: an ONNX file's
    weights, or the MLP's (zeros, or normal draws of std ``init_std`` from ``seed``).

    Raises:
        ValueError: naming ``policy.onnx`` and the file, or ``policy.mlp`` (see :func:`check_policy`).
    """
    if config.onnx:
        policy, x0 = OnnxPolicy.from_file(config.onnx)
        check_policy(policy, env, f"policy.onnx {config.onnx}")
        return policy, x0
    mlp = config.mlp
    policy = OnnxPolicy(build_mlp(observation_size(env.observation_space), action_size(env.action_space), mlp.hidden,
                                  mlp.activation, mlp_output_activation(mlp, env.action_space), mlp.bias))
    check_policy(policy, env, "policy.mlp")
    rng = np.random.default_rng(seed)
    x0 = np.zeros(policy.param_size)
    if mlp.init_std > 0:
        x0 = mlp.init_std * rng.standard_normal(policy.param_size)
    return policy, x0


def _output_op(policy: OnnxPolicy) -> str:
    """The op type that produces the policy's output, looking through Identity nodes."""
    producers = {output: node for node in policy.model.graph.node for output in node.output}
    node = producers.get(policy.output_name)
    while node is not None and node.op_type == "Identity":
        node = producers.get(node.input[0])
    return node.op_type if node is not None else ""


def check_policy(policy: OnnxPolicy, env: gym.Env, source: str) -> None:
    """Refuse a policy that does not fit ``env`` (made by :func:`evokit_py.envs.make_env`) before
    any episode runs.

    Args:
        source: what the policy came from, for the message (the ONNX file, or ``policy.mlp``).

    Raises:
        ValueError: naming ``source`` and the space: the observation does not go in, the output
            size is not the action count (Discrete) or the action size (Box), or a softmax output
            drives a continuous action.
    """
    obs_space, act_space = env.observation_space, env.action_space
    obs_size = observation_size(obs_space)
    try:
        output = policy(np.zeros((1, obs_size), dtype=np.float32))
    except Exception as error:  # onnxruntime raises its own exception types for a wrong input
        raise ValueError(f"{source}: does not take the observations of {obs_space} "
                         f"(shape [1, {obs_size}]): {error}") from error
    if output.ndim != 2 or output.shape[0] != 1:
        raise ValueError(f"{source}: gives an output of shape {list(output.shape)} for one observation; "
                         f"expected [1, actions]")
    size, needed = output.shape[1], action_size(act_space)
    discrete = isinstance(act_space, gym.spaces.Discrete)
    if size != needed:
        raise ValueError(f"{source}: has {size} output(s), the action space {act_space} needs {needed}"
                         + (" (one score per action, the action is their argmax)" if discrete else ""))
    if not discrete and _output_op(policy) == "Softmax":
        raise ValueError(f"{source}: ends in a softmax, which cannot drive the continuous action space "
                         f"{act_space} (use tanh, scaled to the bounds, or no output activation)")
