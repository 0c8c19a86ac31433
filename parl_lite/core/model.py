"""``parl_lite.Model``: a ``paddle.nn.Layer`` with weight transfer and target-network sync."""
import functools
import inspect
import json
from typing import Any
from collections.abc import Mapping

import numpy as np
import paddle

from parl_lite.core.model_base import ModelBase
from parl_lite.malloc import keep_freed_memory
from parl_lite.mkl import prefer_avx2_on_amd

__all__ = ["Model", "check_finite_state", "weight_problems"]

# every network of parl_lite is a Model: set before the first runs (parl_lite/mkl.py, parl_lite/malloc.py)
prefer_avx2_on_amd()
keep_freed_memory()


class Model(paddle.nn.Layer, ModelBase):
    """Base class of every network in parl_lite.

    Parameters and buffers are addressed by their *structured* names (``fc1.weight``,
    ``bn._mean``): the attribute path from the model to the tensor. Unlike paddle's generated
    ``linear_0.w_0`` names, these are equal across instances of a class and across
    ``copy.deepcopy``, so weights, checkpoints and target networks can be matched by name.

    A model may expose several roles (e.g. ``policy(obs)`` and ``value(obs)`` on one trunk);
    every method here covers all of its sublayers, hence every head.

    A model records the arguments its constructor was called with when they are plain JSON values
    (numbers, strings, booleans, lists, dicts): :meth:`constructor_args` returns them, checkpoints
    store them, and ``parl-lite export`` rebuilds the model from them.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            cls.__init__ = _recording_init(init)  # type: ignore[method-assign]  # wraps the subclass's own

    def constructor_args(self) -> dict[str, Any] | None:
        """The keyword arguments that rebuild this model (``type(model)(**args)``), or None when
        the constructor took something that is not a plain JSON value (a layer, a function)."""
        return self.__dict__.get("_constructor_args")

    @property
    def weights_version(self) -> int:
        """A count of the times this model's weights were replaced as a whole: by :meth:`set_weights`,
        ``set_state_dict`` (a checkpoint's restore uses one of them) or as the target of
        :meth:`sync_weights_to`. Something computed from weights that are only ever replaced so (a
        target network's compiled copy) is current while the count is unchanged. Optimizer steps and
        writes into single parameters do not count."""
        return self.__dict__.get("_weights_version", 0)

    def _weights_replaced(self) -> None:
        self.__dict__["_weights_version"] = self.weights_version + 1

    def set_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """paddle's ``set_state_dict``; counted in :attr:`weights_version`."""
        result = super().set_state_dict(*args, **kwargs)
        self._weights_replaced()
        return result

    def sync_weights_to(self, target_model: "Model", decay: float = 0.0) -> None:
        """Blend this model's parameters into ``target_model`` and copy its buffers there.

        ``target = decay * target + (1 - decay) * self`` for every parameter; ``decay=0`` copies.
        Running statistics (batch norm's, an observation normaliser's: buffers and untrainable
        parameters) are copied, as SB3's target updates do: a target network sees its inputs as
        the online network does.

        Args:
            target_model: a model with the same structure (same names, shapes and dtypes).
            decay: weight kept of the target's old values, in [0, 1].

        Raises:
            ValueError: ``decay`` out of range, or ``target_model`` does not match; the message
                names the first mismatching parameter.
        """
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"decay must be in [0, 1], got {decay}")
        if target_model is self:
            raise ValueError("sync_weights_to: target_model is this model itself")
        pairs = _paired_tensors(self, target_model)
        # running statistics: buffers, and paddle's batch norm's untrainable parameters
        # (read from this model: a target model's parameters may all be frozen)
        statistics = {id(buffer) for _, buffer in self.named_buffers()} | {
            id(parameter) for parameter in self.parameters() if not parameter.trainable}
        # one weight tensor per dtype: lerp_ given a float builds a new tensor per call (~100 us)
        weights: dict[paddle.dtype, paddle.Tensor] = {}
        with paddle.no_grad():
            for source, target in pairs:
                if decay == 0.0 or not target.is_floating_point() or id(source) in statistics:
                    paddle.assign(source, output=target)
                    continue
                weight = weights.get(target.dtype)
                if weight is None:
                    weight = weights[target.dtype] = paddle.to_tensor([1.0 - decay], dtype=target.dtype)
                # in-place lerp: ~8x faster than building decay*t + (1-decay)*s and assigning it
                target.lerp_(source, weight)
        target_model._weights_replaced()

    def get_weights(self) -> dict[str, np.ndarray]:
        """Return a copy of every parameter and buffer as ``{structured name: numpy array}``."""
        return {name: np.array(tensor.numpy(), copy=True) for name, tensor in self.state_dict().items()}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Load ``weights`` (as returned by :meth:`get_weights`) into this model.

        Every name must be present, no name may be extra, and shapes and dtypes must match.

        Raises:
            ValueError: naming every missing, unexpected, mis-shaped or mis-typed parameter;
                nothing is changed in that case.
        """
        own = self.state_dict()
        problems = weight_problems(own, weights)
        if problems:
            raise ValueError(f"set_weights on {type(self).__name__}: " + "; ".join(problems))
        for name, tensor in own.items():
            tensor.set_value(np.asarray(weights[name]))
        self._weights_replaced()


def check_finite_state(destination: str, models: Mapping[str, "Model"],
                       optimizers: Mapping[str, paddle.optimizer.Optimizer]) -> None:
    """Refuse to write weights or optimizer state that are not finite (training diverged): such a
    checkpoint would not restore (restore refuses NaN and infinity), and the previous one would be
    lost to it.

    Args:
        destination: what was to be written, for the message (e.g. ``"Agent.save('run.h5')"``).
        models: role -> model whose parameters and buffers are checked.
        optimizers: name -> optimizer whose accumulators are checked.

    Raises:
        ValueError: naming the first parameter, buffer or accumulator that holds NaN or infinity;
            nothing was written.
    """
    for role, model in models.items():
        for name, tensor in model.state_dict().items():
            problem = _non_finite(tensor)
            if problem:
                raise _diverged(destination, f"{role} parameter {name!r}", problem)
    for opt_name, optimizer in optimizers.items():
        for key, value in optimizer.state_dict().items():
            problem = _non_finite(value) if isinstance(value, paddle.Tensor | np.ndarray) else None
            if problem:
                raise _diverged(destination, _accumulator(opt_name, key, models), problem)


def _non_finite(value: "paddle.Tensor | np.ndarray") -> str | None:
    """``"nan (3 of 80 values are not finite)"`` for an array that holds NaN or infinity, else None."""
    values = value.numpy() if isinstance(value, paddle.Tensor) else np.asarray(value)
    if values.dtype.kind != "f":
        return None
    finite = np.isfinite(values)
    if finite.all():
        return None
    first = values.reshape(-1)[np.argmax(~finite.reshape(-1))]
    return f"{first} ({values.size - int(finite.sum())} of {values.size} values are not finite)"


def _diverged(destination: str, what: str, problem: str) -> ValueError:
    return ValueError(f"{destination}: {what} holds {problem}, so nothing was written and the previous file "
                      "stays; the training diverged (a learning rate too high, or a non-finite input)")


def _accumulator(opt_name: str, key: str, models: Mapping[str, "Model"]) -> str:
    """``optimizer 'optimizer' accumulator 'moment2_0' of model parameter 'fc1.weight'`` for paddle's
    state key ``linear_0.w_0_moment2_0``."""
    owners = {parameter.name: f"{role} parameter {name!r}"
              for role, model in models.items() for name, parameter in model.named_parameters()}
    matches = [unique for unique in owners if key.startswith(unique + "_")]
    if not matches:
        return f"optimizer {opt_name!r} state {key!r}"
    unique = max(matches, key=len)  # "linear_0.w_0" is a prefix of "linear_0.w_0_deepcopy_0"
    return f"optimizer {opt_name!r} accumulator {key[len(unique) + 1:]!r} of {owners[unique]}"


def _recording_init(init):
    """Wrap a subclass's ``__init__`` so that the outermost constructor records its arguments."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if type(self).__init__ is not wrapper:
            return  # a subclass's constructor is running this one: the subclass records
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        recorded: dict[str, Any] = {}
        for name, value in list(bound.arguments.items())[1:]:
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                if value:
                    return
            elif kind is inspect.Parameter.VAR_KEYWORD:
                recorded.update(value)
            else:
                recorded[name] = value
        try:
            json.dumps(recorded)
        except (TypeError, ValueError):
            return
        self.__dict__["_constructor_args"] = recorded

    return wrapper


def weight_problems(own: Mapping[str, paddle.Tensor], weights: Mapping[str, np.ndarray]) -> list[str]:
    """Describe every way ``weights`` does not fit the tensors ``own``; empty when it fits."""
    problems = []
    missing = [name for name in own if name not in weights]
    unexpected = [name for name in weights if name not in own]
    if missing:
        problems.append(f"missing parameters {missing}")
    if unexpected:
        problems.append(f"unexpected parameters {unexpected}")
    for name, tensor in own.items():
        if name not in weights:
            continue
        value = np.asarray(weights[name])
        expected_shape = tuple(tensor.shape)
        if value.shape != expected_shape:
            problems.append(f"parameter {name!r} has shape {value.shape}, expected {expected_shape}")
        expected_dtype = _numpy_dtype(tensor)
        if value.dtype != expected_dtype:
            problems.append(f"parameter {name!r} has dtype {value.dtype}, expected {expected_dtype}")
    return problems


def _numpy_dtype(tensor: paddle.Tensor) -> np.dtype:
    return np.dtype(str(tensor.dtype).replace("paddle.", ""))


def _paired_tensors(source: Model, target: Model) -> list[tuple[paddle.Tensor, paddle.Tensor]]:
    """Pair the tensors of two models by structured name, checking that they match."""
    source_tensors = source.state_dict()
    target_tensors = target.state_dict()
    for name, tensor in source_tensors.items():
        other = target_tensors.get(name)
        if other is None:
            raise ValueError(f"target model {type(target).__name__} has no parameter {name!r}")
        if tuple(other.shape) != tuple(tensor.shape) or other.dtype != tensor.dtype:
            raise ValueError(
                f"parameter {name!r} does not match: source {tuple(tensor.shape)} {tensor.dtype}, "
                f"target {tuple(other.shape)} {other.dtype}"
            )
    extra = [name for name in target_tensors if name not in source_tensors]
    if extra:
        raise ValueError(f"target model {type(target).__name__} has extra parameter {extra[0]!r}")
    return [(tensor, target_tensors[name]) for name, tensor in source_tensors.items()]
