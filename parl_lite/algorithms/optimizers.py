"""Optimizers whose update paddle does not ship in the form the RL literature uses."""
from collections.abc import Sequence
from typing import Any

import paddle

__all__ = ["RMSprop"]


class RMSprop(paddle.optimizer.Adam):
    """RMSprop as torch, Stable-Baselines3 and the A2C/A3C baselines define it:
    ``v = rho * v + (1 - rho) * g**2``, ``p -= lr * g / (sqrt(v) + epsilon)``.

    ``paddle.optimizer.RMSProp`` adds epsilon *inside* the square root, ``g / sqrt(v + epsilon)``,
    which is not a change of constant: after A2C's gradient clipping most gradients are so small
    that epsilon dominates, and the two take different steps (an A2C update differed from SB3's by
    a quarter of a step; with this class it matches to float32 rounding). This runs on paddle's
    fused Adam kernel: with ``beta1 = 0`` the first moment is the gradient itself, and powers of the
    betas held at 0 turn off Adam's bias correction, which leaves exactly the update above (one
    fused operation per parameter, as fast as paddle's RMSProp).

    Args:
        learning_rate: the step size (a float or a paddle LR scheduler).
        rho: decay of the mean square (torch's ``alpha``).
        epsilon: added to the root mean square.
        parameters: the parameters to optimise.
        grad_clip: a paddle gradient clip, applied before the update.
    """

    def __init__(self, learning_rate: Any, rho: float = 0.99, epsilon: float = 1e-5,
                 parameters: Sequence[paddle.Tensor] | None = None,
                 grad_clip: "paddle.nn.clip.ClipGradBase | None" = None) -> None:
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"rho must be in [0, 1), got {rho}")
        if epsilon <= 0:
            raise ValueError(f"epsilon must be positive, got {epsilon}")
        super().__init__(learning_rate=learning_rate, beta1=0.0, beta2=rho, epsilon=epsilon,
                         parameters=parameters, grad_clip=grad_clip)

    def _add_accumulator(self, name: str, param: paddle.Tensor, *args: Any, **kwargs: Any) -> Any:
        if name in (self._beta1_pow_acc_str, self._beta2_pow_acc_str):
            kwargs["fill_value"] = 0.0  # 1 - 0 = 1: no bias correction, see the class docstring
        return super()._add_accumulator(name, param, *args, **kwargs)
