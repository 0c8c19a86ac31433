"""``parl_lite.Algorithm``: how a model is updated (``learn``) and used (``predict``/``sample``).

PARL's contract, on tensors or numpy arrays alike:

* ``learn(obs, action, ...)`` takes the algorithm's arrays by PARL's names, positionally or by
  keyword, and returns what PARL's algorithm returns (e.g. DQN the loss tensor, DDPG
  ``(critic_loss, actor_loss)``). Numpy arrays (also in a tuple) become tensors on the way in
  (floating and boolean arrays float32, integer arrays int64); tensors and other values (a
  learning rate) pass through. An algorithm that declares its arrays (``learn_inputs``, see
  :mod:`parl_lite.core.learn_inputs`; every shipped algorithm does) has them checked first, numpy
  and tensors alike (dtype, shape, one batch size, finite values, 0/1 terminals), and gets its
  observations and per-step values as float32.
* ``predict(obs)`` / ``sample(obs)`` / ``value(obs)``: numpy in, numpy out (run without gradients);
  tensors in, tensors out (inside an update, gradients flow as usual).

parl_lite adds two methods that turn an algorithm's outputs into actions for a batch of
observations, which the default :class:`parl_lite.Agent` and the training loops use:
``greedy_actions(obs)`` and ``sample_actions(obs) -> (actions, log_probs)``.

The numpy <-> tensor conversion is written once, here: every subclass's own ``learn``, ``predict``,
``sample``, ``value``, ``greedy_actions`` and ``sample_actions`` are wrapped when the subclass is
defined, so a subclass only ever sees tensors.

The training loops hand an algorithm one sample type per regime (:mod:`parl_lite.core.samples`):
the algorithm names the one it learns from (``sample_type``) and maps it to its ``learn``'s
arguments (``learn_arguments``).
"""
import dataclasses
import functools
import inspect
from typing import Any, ClassVar
from collections.abc import Callable, Mapping

import numpy as np
import paddle

from parl_lite.core.algorithm_base import AlgorithmBase
from parl_lite.core.learn_inputs import LearnInputs
from parl_lite.core.model import Model
from parl_lite.core.samples import Sample

__all__ = ["Algorithm", "to_tensor", "to_numpy"]

_WRAPPED_MARK = "__wrapped_by_algorithm__"  # set on the methods __init_subclass__ already wrapped


def to_tensor(value: Any) -> Any:
    """A paddle tensor of ``value`` (a tensor passes through unchanged): floating and boolean
    arrays become float32, ``uint8`` arrays (images) stay ``uint8`` (the network scales them), other
    integer arrays become int64; a :class:`parl_lite.core.samples.Sample` becomes the same sample
    of tensors; anything else is returned as it is."""
    if isinstance(value, paddle.Tensor) or value is None:
        return value
    if isinstance(value, Sample):
        return dataclasses.replace(value, **{name: to_tensor(array) for name, array in value.arrays().items()})
    if isinstance(value, (np.ndarray, np.generic, list, float, int, bool)):
        array = np.asarray(value)
        if array.dtype.kind in "fb":
            array = array.astype(np.float32, copy=False)
        elif array.dtype.kind in "iu" and array.dtype != np.uint8:
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


def _learn_input(value: Any) -> Any:
    """A numpy array as a tensor (see :func:`to_tensor`), also inside a tuple (a policy's
    ``(mean, std)``); anything else unchanged."""
    if isinstance(value, np.ndarray):
        return to_tensor(value)
    if isinstance(value, tuple):
        return tuple(map(_learn_input, value))
    return value


def _wrap_learn(learn: Callable[..., Any], inputs: LearnInputs | None) -> Callable[..., Any]:
    """``learn`` taking numpy arrays too, its arrays first checked against ``inputs`` when declared."""
    bound = inputs.bind(learn) if inputs is not None else None

    @functools.wraps(learn)
    def wrapper(self: "Algorithm", *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], Mapping):
            raise TypeError(f"{type(self).__name__}.learn takes its arrays as arguments, by PARL's names "
                            "(e.g. learn(obs, action, reward, next_obs, terminal)), not one dict: "
                            "call learn(**batch)")
        if bound is not None:
            args, kwargs = bound.check(type(self).__name__, args, kwargs)
        return learn(self, *map(_learn_input, args), **{key: _learn_input(value) for key, value in kwargs.items()})

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


_ACTING = ("predict", "sample", "value", "greedy_actions", "sample_actions")


_LEARN_TAKES: dict[type, frozenset[str] | None] = {}  # a class -> its learn's argument names (None: any)


def _not_taken_by_learn(cls: type[AlgorithmBase], names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` that ``cls.learn`` takes no argument of."""
    if cls not in _LEARN_TAKES:
        parameters = inspect.signature(cls.learn).parameters.values()
        any_name = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters)
        _LEARN_TAKES[cls] = None if any_name else frozenset(parameter.name for parameter in parameters)
    taken = _LEARN_TAKES[cls]
    return [] if taken is None else [name for name in names if name not in taken]


class Algorithm(AlgorithmBase):
    """Base class of the update rules (PolicyGradient, DQN, PPO, ...).

    Subclasses keep their networks as :class:`Model` attributes (``self.model``,
    ``self.target_model``, ...) and their optimizers as ``paddle.optimizer.Optimizer`` attributes;
    :meth:`models` and :meth:`optimizers` find them, so checkpoints need no per-algorithm code.

    Subclasses write ``learn``, ``predict`` and ``sample`` (and ``value`` where there is one) on
    tensors; the base class turns numpy input into tensors and the results of the acting methods
    back (see the module docstring). A class that defines ``learn`` may declare its array arguments
    beside it, ``learn_inputs = LearnInputs(obs=OBSERVATIONS, ...)``
    (:mod:`parl_lite.core.learn_inputs`): every call is then checked against them.

    A class says which sample of :mod:`parl_lite.core.samples` the training loops hand it
    (``sample_type = AdvantageBatch``, ...) and, where its ``learn`` names the arrays otherwise than
    the sample's fields, overrides :meth:`learn_arguments`.

    Args:
        model: the algorithm's main network (``self.model``).
    """

    #: the sample the training loops build for this algorithm (None: the loop's own)
    sample_type: ClassVar[type[Sample] | None] = None
    #: whether ``sample_actions`` draws from the model's policy distribution and nothing else
    #: (:func:`parl_lite.core.distributions.policy_distribution`): a loop may then draw the actions
    #: from the policy's ONNX graph in onnxruntime instead (the actor-critic algorithms)
    samples_from_policy: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _ACTING:
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, _WRAPPED_MARK, False):
                setattr(cls, name, _wrap_acting(method))
        learn = cls.__dict__.get("learn")
        if callable(learn) and not getattr(learn, _WRAPPED_MARK, False):
            cls.learn = _wrap_learn(learn, cls.__dict__.get("learn_inputs"))  # type: ignore[method-assign]

    def __init__(self, model: Model | None = None) -> None:
        if model is not None and not isinstance(model, Model):
            raise TypeError(f"model must be a parl_lite.Model, got {type(model).__name__}")
        # Any: the roles a subclass calls (policy, value, get_critic_params, ...) are its model's own.
        self.model: Any = model

    def greedy_actions(self, obs: Any) -> Any:
        """The actions to take when evaluating, for a batch of observations: ``predict(obs)``
        unless the algorithm's ``predict`` returns something else (Q-values, probabilities)."""
        return self.predict(obs)

    def sample_actions(self, obs: Any) -> tuple[Any, Any]:
        """Exploratory actions for a batch of observations and their log-probabilities, for
        algorithms with a stochastic policy.

        Raises:
            NotImplementedError: the algorithm has no stochastic policy; its training loop explores
                (epsilon-greedy for DQN, Gaussian noise for DDPG and TD3).
        """
        raise NotImplementedError(f"{type(self).__name__} has no stochastic policy to sample actions from")

    def learn_arguments(self, sample: Any) -> dict[str, Any]:
        """The keyword arguments of :meth:`learn` for a training loop's ``sample`` (a
        :class:`parl_lite.core.samples.Sample` of ``sample_type``): by default the
        sample's arrays under their field names; an algorithm whose ``learn`` names them otherwise
        (PARL's names) overrides this.

        Raises:
            TypeError: ``learn`` does not take those names (the message says what to define).
        """
        arguments = sample.arrays()
        unknown = _not_taken_by_learn(type(self), tuple(arguments))
        if unknown:
            raise TypeError(f"{type(self).__name__}.learn takes no {', '.join(unknown)}: to learn from "
                            f"{type(sample).__name__} samples ({', '.join(arguments)}) it must define "
                            "learn_arguments(sample), which names the learn argument of each array")
        return arguments

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
