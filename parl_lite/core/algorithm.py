"""``parl_lite.Algorithm``: how a model is updated (``learn``) and used (``predict``/``sample``).

One contract for every algorithm:

* ``learn(batch) -> dict[str, float]``: ``batch`` maps names (``obs``, ``action``, ...) to numpy
  arrays or paddle tensors; the result maps statistic names to plain floats.
* ``predict(obs)`` / ``sample(obs)``: numpy in, numpy out (run without gradients); tensors in,
  tensors out (inside an update, gradients flow as usual).

The numpy <-> tensor conversion is written once, here: every subclass's ``learn``, ``predict`` and
``sample`` are wrapped when the subclass is defined, so a subclass only ever sees tensors.
"""
import functools
from typing import Any
from collections.abc import Callable, Mapping

import numpy as np
import paddle

from parl_lite.core.model import Model

__all__ = ["Algorithm", "to_tensor", "to_numpy"]

Batch = Mapping[str, Any]
_WRAPPED_MARK = "__wrapped_by_algorithm__"  # set on the methods __init_subclass__ already wrapped


def to_tensor(value: Any) -> Any:
    """A paddle tensor of ``value`` (a tensor passes through unchanged): floating and boolean
    arrays become float32, integer arrays int64; anything else is returned as it is."""
    if isinstance(value, paddle.Tensor) or value is None:
        return value
    if isinstance(value, (np.ndarray, np.generic, list, float, int, bool)):
        array = np.asarray(value)
        if array.dtype.kind in "fb":
            array = array.astype(np.float32, copy=False)
        elif array.dtype.kind in "iu":
            array = array.astype(np.int64, copy=False)
        return paddle.to_tensor(array)
    return value


def to_numpy(value: Any) -> Any:
    """Tensors (also inside tuples and lists) as numpy arrays; other values unchanged."""
    if isinstance(value, paddle.Tensor):
        return value.numpy()
    if isinstance(value, (tuple, list)):
        return type(value)(to_numpy(item) for item in value)
    return value


def _as_float(value: Any) -> float:
    if isinstance(value, paddle.Tensor):
        return float(value.item())
    return float("nan") if value is None else float(value)


def _wrap_learn(learn: Callable[..., Any]) -> Callable[..., dict[str, float]]:
    @functools.wraps(learn)
    def wrapper(self: "Algorithm", batch: Batch) -> dict[str, float]:
        if not isinstance(batch, Mapping):
            raise TypeError(f"{type(self).__name__}.learn takes one batch mapping names to arrays, "
                            f"got {type(batch).__name__}")
        stats = learn(self, {key: to_tensor(value) for key, value in batch.items()})
        return {key: _as_float(value) for key, value in stats.items()}

    setattr(wrapper, _WRAPPED_MARK, True)
    return wrapper


def _wrap_acting(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: "Algorithm", obs: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(obs, paddle.Tensor):
            return method(self, obs, *args, **kwargs)
        with paddle.no_grad():
            return to_numpy(method(self, to_tensor(obs), *args, **kwargs))

    setattr(wrapper, _WRAPPED_MARK, True)
    return wrapper


class Algorithm:
    """Base class of the update rules (PolicyGradient, DQN, PPO, ...).

    Subclasses keep their networks as :class:`Model` attributes (``self.model``,
    ``self.target_model``, ...) and their optimizers as ``paddle.optimizer.Optimizer`` attributes;
    :meth:`models` and :meth:`optimizers` find them, so checkpoints need no per-algorithm code.

    Subclasses write ``learn(self, batch)`` on a dict of tensors returning a dict of scalars
    (tensors or floats), and ``predict(self, obs)`` / ``sample(self, obs)`` (and ``value(self, obs)``
    where there is one) on tensors; the base
    class turns numpy input into tensors and the results back (see the module docstring).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrappers = {"learn": _wrap_learn, "predict": _wrap_acting, "sample": _wrap_acting, "value": _wrap_acting}
        for name, wrap in wrappers.items():
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, _WRAPPED_MARK, False):
                setattr(cls, name, wrap(method))

    def __init__(self, model: Model | None = None) -> None:
        if model is not None and not isinstance(model, Model):
            raise TypeError(f"model must be a parl_lite.Model, got {type(model).__name__}")
        # Any: the roles a subclass calls (policy, value, get_critic_params, ...) are its model's own.
        self.model: Any = model

    def learn(self, batch: Batch) -> dict[str, float]:
        """Update the model(s) from a batch of experience.

        Args:
            batch: names (``obs``, ``action``, ...) to numpy arrays or tensors.

        Returns:
            Training statistics (losses, ...) as floats.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement learn()")

    def predict(self, obs: Any) -> Any:
        """Return the greedy (evaluation) action for a batch of observations."""
        raise NotImplementedError(f"{type(self).__name__} does not implement predict()")

    def sample(self, obs: Any) -> Any:
        """Return an exploratory output (e.g. an action drawn from the policy)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample()")

    def models(self) -> dict[str, Model]:
        """Every :class:`Model` attribute of this algorithm, by attribute name."""
        return {name: value for name, value in vars(self).items() if isinstance(value, Model)}

    def optimizers(self) -> dict[str, paddle.optimizer.Optimizer]:
        """Every optimizer attribute of this algorithm, by attribute name."""
        return {
            name: value
            for name, value in vars(self).items()
            if isinstance(value, paddle.optimizer.Optimizer)
        }

    def get_weights(self) -> dict[str, np.ndarray]:
        """Weights of ``self.model`` (see :meth:`Model.get_weights`)."""
        return self.model.get_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights into ``self.model`` (see :meth:`Model.set_weights`)."""
        self.model.set_weights(weights)
