"""Small pieces the algorithms share."""
import copy
from contextlib import contextmanager
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import paddle

from parl_lite.algorithms.optimizers import Adam
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.model import Model
from parl_lite.core.samples import Transitions

__all__ = ["frozen", "check_hyperparameter", "reduction_of", "SoftTargetActorCritic", "ActorCriticLosses", "column",
           "GlobalNormClip"]


class ActorCriticLosses(NamedTuple):
    """What DDPG's and SAC's ``learn`` return (a tuple, as PARL's): 0-D tensors."""

    critic_loss: paddle.Tensor
    actor_loss: paddle.Tensor


def column(values: paddle.Tensor) -> paddle.Tensor:
    """``values`` (a reward or terminal flag, ``[batch]`` or ``[batch, 1]``, any dtype) as a float32
    column ``[batch, 1]``."""
    return values.astype("float32").reshape([-1, 1])


@contextmanager
def frozen(parameters: Sequence[paddle.Tensor]) -> Iterator[None]:
    """Within the block, ``parameters`` record no gradient.

    The actor loss of DDPG, TD3 and SAC runs through the critic; freezing the critic's parameters
    spares their weight-gradient matmuls (a third of the actor update's backward pass) while the
    gradient still flows through the critic to the action.
    """
    previous = [parameter.stop_gradient for parameter in parameters]
    for parameter in parameters:
        parameter.stop_gradient = True
    try:
        yield
    finally:
        for parameter, stop in zip(parameters, previous, strict=True):
            parameter.stop_gradient = stop


def check_hyperparameter(name: str, value: float, low: float, high: float, low_open: bool = False) -> float:
    """Return ``value`` as a float if it is a number in [low, high] (``(low, high]`` with
    ``low_open``), else raise ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (low < value <= high if low_open else low <= value <= high):
        interval = f"{'(' if low_open else '['}{low}, {high}]"
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return float(value)


def reduction_of(reduction: str) -> Callable[[paddle.Tensor], paddle.Tensor]:
    """``paddle.sum`` for ``"sum"`` (PARL's A2C and IMPALA add their losses over the batch) or
    ``paddle.mean`` for ``"mean"``; ValueError naming ``reduction`` otherwise."""
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    return paddle.sum if reduction == "sum" else paddle.mean


class SoftTargetActorCritic(Algorithm):
    """What DDPG, TD3 and SAC share: an actor and a critic in one model, each with its own Adam
    optimizer, and a soft-updated deep copy of the model as ``target_model``.

    The model exposes ``get_actor_params()`` and ``get_critic_params()``. They learn from replay
    memory minibatches, ``learn(obs, action, reward, next_obs, terminal)``: the fields of
    :class:`parl_lite.core.samples.Transitions` by their names.
    """

    sample_type = Transitions

    def __init__(self, model: Model, gamma: float, tau: float, actor_lr: float, critic_lr: float) -> None:
        super().__init__(model)
        self.gamma = check_hyperparameter("gamma", gamma, 0.0, 1.0)
        self.tau = check_hyperparameter("tau", tau, 0.0, 1.0, low_open=True)
        check_hyperparameter("actor_lr", actor_lr, 0.0, float("inf"), low_open=True)
        check_hyperparameter("critic_lr", critic_lr, 0.0, float("inf"), low_open=True)
        self.target_model = copy.deepcopy(model)
        self.actor_optimizer = Adam(actor_lr, parameters=model.get_actor_params())
        self.critic_optimizer = Adam(critic_lr, parameters=model.get_critic_params())

    def sync_target(self, decay: float | None = None) -> None:
        """``target = decay * target + (1 - decay) * model``; ``decay`` defaults to ``1 - tau``."""
        self.model.sync_weights_to(self.target_model, decay=1.0 - self.tau if decay is None else decay)


class GlobalNormClip(paddle.nn.ClipGradByGlobalNorm):
    """``paddle.nn.ClipGradByGlobalNorm`` for float32 dense gradients on one device, with the same
    operations in the same order (so the same results to the bit) and without the per-parameter
    Python checks for half precision and distributed meshes that cost a tenth of a PPO minibatch
    step. When the norm is within the limit the gradients are left as they are rather than
    multiplied by 1 (the same bits; a pass over every gradient saved, 1.6M values in the Nature
    DQN). Anything else (other dtypes, 0-D or distributed gradients) goes through paddle's code.

    Args:
        clip_norm: the largest global L2 norm of the gradients.
    """

    def _dygraph_clip(self, params_grads):
        grads = [g for p, g in params_grads if g is not None and getattr(p, "need_clip", True)]
        if (not grads or self.auto_skip_clip or any(g.dtype != paddle.float32 or g.is_dist() or len(g.shape) == 0
                                                    or g.is_selected_rows() for g in grads)):
            return super()._dygraph_clip(params_grads)
        with paddle.no_grad():
            squares = paddle.stack([paddle._C_ops.squared_l2_norm(g) for g in grads]).sum()
            global_norm = paddle.sqrt(paddle.stack([squares]).sum())
            max_norm = paddle.full(shape=[1], dtype="float32", fill_value=self.clip_norm)
            scale = paddle.divide(x=max_norm, y=paddle.maximum(x=global_norm, y=max_norm))
            if scale.item() == 1.0:
                return params_grads
            for g in grads:
                g.multiply_(scale)
        return params_grads
