"""What an algorithm's ``learn`` takes, declared once beside it and checked on every call.

An algorithm class declares the arrays its ``learn`` takes::

    class DQN(Algorithm):
        learn_inputs = LearnInputs(obs=OBSERVATIONS, action=DISCRETE_ACTIONS, reward=STEP_VALUES,
                                   next_obs=OBSERVATIONS, terminal=TERMINALS)

and :class:`parl_lite.Algorithm` checks every call of that ``learn`` against the declaration before
the arrays become tensors and before anything changes, numpy arrays and paddle tensors alike:

* each is an array (or tensor) of an accepted dtype kind and shape (an observation batch ``[N, ...]``,
  one value per step ``[N]``, ...);
* all share one leading size ``N`` (the rows of the batch), at least 1: nothing is broadcast;
* floating-point values are finite (a NaN reward would turn every weight into NaN);
* terminal flags are 0 or 1 (or bool).

Observations and per-step values are handed to ``learn`` as float32 (integer observations too),
but for ``uint8`` observations (frames), which stay ``uint8`` until the network scales them.

Discrete actions must also be indices below the number of actions, which only the policy's output
tells; :func:`check_action_indices` checks them once the algorithm knows it, before its update.
Continuous actions must have the policy's width: :func:`check_action_width`. Errors name the
algorithm, the argument and what is wrong.
"""
from collections.abc import Callable
from dataclasses import dataclass
import inspect
from typing import Any

import numpy as np
import paddle

__all__ = ["ArrayInput", "LearnInputs", "OBSERVATIONS", "STEP_VALUES", "STEP_VALUES_FLAT", "DISCRETE_ACTIONS",
           "CONTINUOUS_ACTIONS", "ACTIONS", "TERMINALS", "POLICY_OUTPUTS", "check_action_indices",
           "check_action_width"]

# the accepted shapes, as messages say them, and their tests
_SHAPES: dict[str, Callable[[tuple[int, ...]], bool]] = {
    "[N, ...]": lambda shape: len(shape) >= 2,
    "[N]": lambda shape: len(shape) == 1,
    "[N] or [N, 1]": lambda shape: len(shape) == 1 or (len(shape) == 2 and shape[1] == 1),
    "[N, act_dim]": lambda shape: len(shape) == 2,
    "[N] (discrete) or [N, act_dim] (continuous)": lambda shape: len(shape) in (1, 2),
}
_KIND_NAMES = {"f": "floating point", "i": "integer", "u": "unsigned integer", "b": "bool"}
# a tensor's dtype -> (its numpy kind, whether it is float32)
_TENSOR_KINDS = {paddle.float32: ("f", True), paddle.float64: ("f", False), paddle.float16: ("f", False),
                 paddle.bfloat16: ("f", False), paddle.int64: ("i", False), paddle.int32: ("i", False),
                 paddle.int16: ("i", False), paddle.int8: ("i", False), paddle.uint8: ("u", False),
                 paddle.bool: ("b", False)}


@dataclass(frozen=True)
class ArrayInput:
    """How one array argument of ``learn`` must look.

    Attributes:
        what: what the array holds, for messages ("observations").
        shape: the accepted shapes, one of ``_SHAPES``' keys (``"[N, ...]"``, ``"[N]"``, ...).
        kinds: the accepted numpy dtype kinds: ``f`` floating point, ``i``/``u`` integer, ``b`` bool.
        as_float: handed to ``learn`` as float32 (``uint8`` arrays too, unless ``frames``).
        frames: ``uint8`` arrays are frames and stay ``uint8`` (a convolutional network scales them).
        binary: every value is 0 or 1.
        pair: a ``(mean, std)`` pair of such arrays is accepted too (a Gaussian policy's output).
    """

    what: str
    shape: str
    kinds: str
    as_float: bool = False
    frames: bool = False
    binary: bool = False
    pair: bool = False

    def __post_init__(self) -> None:
        if self.shape not in _SHAPES:
            raise ValueError(f"ArrayInput shape must be one of {sorted(_SHAPES)}, got {self.shape!r}")


OBSERVATIONS = ArrayInput("observations", "[N, ...]", "fiub", as_float=True, frames=True)
STEP_VALUES = ArrayInput("one value per step", "[N] or [N, 1]", "fiub", as_float=True)
STEP_VALUES_FLAT = ArrayInput("one value per step", "[N]", "fiub", as_float=True)
DISCRETE_ACTIONS = ArrayInput("action indices", "[N] or [N, 1]", "iuf")
CONTINUOUS_ACTIONS = ArrayInput("continuous actions", "[N, act_dim]", "fiu", as_float=True)
ACTIONS = ArrayInput("actions", "[N] (discrete) or [N, act_dim] (continuous)", "iuf")
TERMINALS = ArrayInput("terminal flags", "[N] or [N, 1]", "biuf", as_float=True, binary=True)
POLICY_OUTPUTS = ArrayInput("policy outputs", "[N, act_dim]", "f", as_float=True, pair=True)


class LearnInputs:
    """The array arguments of one ``learn``, by parameter name (see the module docstring).

    Args:
        inputs: parameter name -> :class:`ArrayInput`; parameters not named here (a learning rate)
            are not checked.
    """

    def __init__(self, **inputs: ArrayInput) -> None:
        self.inputs = inputs
        self.positions: tuple[str, ...] = ()

    def bind(self, learn: Callable[..., Any]) -> "LearnInputs":
        """A copy that knows the order of ``learn``'s parameters (so positional arguments are named).

        Raises:
            TypeError: a declared input is not a parameter of ``learn``.
        """
        parameters = list(inspect.signature(learn).parameters)[1:]  # after self
        unknown = [name for name in self.inputs if name not in parameters]
        if unknown:
            raise TypeError(f"{learn.__qualname__}: learn_inputs declares {unknown}, which learn does not take")
        bound = LearnInputs(**self.inputs)
        bound.positions = tuple(parameters)
        return bound

    def check(self, owner: str, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        """``(args, kwargs)`` of a ``learn`` call with the declared arrays checked and, where declared,
        made float32.

        Raises:
            TypeError: an array is not a numpy array or paddle tensor, or has a dtype not accepted.
            ValueError: a wrong shape, an empty batch, leading sizes that differ, a non-finite value
                or a terminal flag other than 0/1; the message names ``owner``, the argument and what
                is wrong.
        """
        rows: list[tuple[str, int]] = []  # (the first argument, its rows)
        checked = list(args)
        for index, value in enumerate(args[:len(self.positions)]):
            spec = self.inputs.get(self.positions[index])
            if spec is not None:
                checked[index] = _checked(owner, self.positions[index], value, spec, rows)
        checked_kwargs = dict(kwargs)
        for name, value in kwargs.items():
            spec = self.inputs.get(name)
            if spec is not None:
                checked_kwargs[name] = _checked(owner, name, value, spec, rows)
        return tuple(checked), checked_kwargs


def _checked(owner: str, name: str, value: Any, spec: ArrayInput, rows: list[tuple[str, int]]) -> Any:
    if spec.pair and isinstance(value, tuple):
        if len(value) != 2:
            raise ValueError(f"{owner}.learn: {name} is a tuple of {len(value)}; {spec.what} are one array or "
                             "a (mean, std) pair")
        return tuple(_checked_array(owner, f"{name}[{index}]", item, spec, rows) for index, item in enumerate(value))
    return _checked_array(owner, name, value, spec, rows)


def _checked_array(owner: str, name: str, value: Any, spec: ArrayInput, rows: list[tuple[str, int]]) -> Any:
    label = f"{owner}.learn: {name}"
    if isinstance(value, np.ndarray):
        kind, is_float32 = value.dtype.kind, value.dtype == np.float32
    elif isinstance(value, paddle.Tensor):
        kind, is_float32 = _TENSOR_KINDS.get(value.dtype, ("?", False))
    else:
        raise TypeError(f"{label} must be a numpy array or a paddle tensor of {spec.what}, got "
                        f"{type(value).__name__}")
    if kind not in spec.kinds:
        accepted = " or ".join(_KIND_NAMES[accepted_kind] for accepted_kind in spec.kinds)
        raise TypeError(f"{label} has dtype {value.dtype}; {spec.what} must be {accepted}")
    shape = tuple(value.shape)
    if not _SHAPES[spec.shape](shape):
        raise ValueError(f"{label} has shape {list(shape)}; {spec.what} must be {spec.shape}, N the batch size")
    _check_rows(label, name, shape[0], rows)
    if spec.as_float and not is_float32 and not (spec.frames and kind == "u" and str(value.dtype).endswith("uint8")):
        value = value.astype(np.float32) if isinstance(value, np.ndarray) else value.astype("float32")
    check_binary = spec.binary and kind != "b"
    if kind == "f" or check_binary:  # the values are read: integers and bools are finite, bools are flags
        values = value if isinstance(value, np.ndarray) else value.numpy()
        if kind == "f":
            _check_finite(label, values)
        if check_binary:
            _check_binary(label, values, spec.what)
    return value


def _check_rows(label: str, name: str, count: int, rows: list[tuple[str, int]]) -> None:
    if count == 0:
        raise ValueError(f"{label} is empty (0 rows): learn needs a batch of at least one step")
    if not rows:
        rows.append((name, count))
    elif rows[0][1] != count:
        first, expected = rows[0]
        raise ValueError(f"{label} has {count} rows but {first} has {expected}: every array of a batch must have "
                         "the same leading size (nothing is broadcast)")


def _check_binary(label: str, values: np.ndarray, what: str) -> None:
    flags = (values == 0) | (values == 1)
    if not flags.all():
        row = _first(~flags)
        raise ValueError(f"{label} holds {values.reshape(-1)[row]} (row {row // _row_size(values)}); {what} must be "
                         "0 or 1 (or bool)")


def _check_finite(label: str, values: np.ndarray) -> None:
    finite = np.isfinite(values)
    if not finite.all():
        row = _first(~finite)
        raise ValueError(f"{label} holds {values.reshape(-1)[row]} (row {row // _row_size(values)}); learn refuses "
                         "values that are not finite: they would make the weights NaN")


def _host(value: Any) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else value.numpy()


def _first(mask: np.ndarray) -> int:
    """The flat index of the first true element of ``mask``."""
    return int(np.argmax(mask.reshape(-1)))


def _row_size(values: np.ndarray) -> int:
    return max(1, values.size // max(1, values.shape[0]))


def check_action_indices(owner: str, name: str, actions: Any, num_actions: int, *, column: bool = True) -> None:
    """Check that discrete ``actions`` are whole numbers in ``[0, num_actions)``.

    Called by an algorithm once its policy's output tells the number of actions, before its update.

    Args:
        owner: the algorithm's name, for messages.
        name: the argument's name, for messages.
        actions: a tensor (or numpy array) ``[N]`` (or ``[N, 1]`` with ``column``).
        num_actions: the number of actions of the policy or Q-network.
        column: ``[N, 1]`` is accepted too.

    Raises:
        ValueError: an action is negative, not below ``num_actions``, or not a whole number (a float
            action would be truncated), or ``[N, 1]`` without ``column``; the message names it.
    """
    label = f"{owner}.learn: {name}"
    if len(actions.shape) != 1 and not column:
        raise ValueError(f"{label} has shape {list(actions.shape)}; discrete actions must be [N] "
                         f"(pass {name}.reshape(-1))")
    values = _host(actions).reshape(-1)
    if values.size == 0:
        return
    if values.dtype.kind == "f":
        whole = values == np.floor(values)
        if not whole.all():
            row = _first(~whole)
            raise ValueError(f"{label} holds {values[row]:.7g} (row {row}); discrete actions must be whole numbers "
                             "(a float action would be truncated)")
    low, high = values.min(), values.max()
    if low < 0 or high >= num_actions:
        row = _first((values < 0) | (values >= num_actions))
        raise ValueError(f"{label} holds {values[row]} (row {row}); the model gives {num_actions} actions, so "
                         f"actions must be in [0, {num_actions - 1}]")


def check_action_width(owner: str, name: str, actions: Any, act_dim: int) -> None:
    """Check that continuous ``actions`` are ``[N, act_dim]``, ``act_dim`` the policy's.

    Raises:
        ValueError: another shape (an ``[N]`` array would be broadcast against ``[N, 1]``).
    """
    shape = list(actions.shape)
    if len(shape) != 2 or shape[1] != act_dim:
        raise ValueError(f"{owner}.learn: {name} has shape {shape}; the policy's actions have {act_dim} "
                         f"dimension(s), so {name} must be [N, {act_dim}]")
