"""The optimizers of parl_lite's algorithms: paddle's Adam in one fused kernel call per step, and
RMSprop as the RL literature defines it."""
from collections.abc import Sequence
from typing import Any

import paddle

__all__ = ["Adam", "RMSprop"]


class Adam(paddle.optimizer.Adam):
    """``paddle.optimizer.Adam`` that updates all of its parameters in one kernel call.

    paddle's default calls its Adam kernel once per parameter. Its multi-tensor kernel does the same
    arithmetic (equal to float32 rounding) for all of them at once: a step over the Nature DQN's
    1.7M parameters costs 2.4 ms instead of 8.6 ms (``scripts/bench/bench_layers.py``,
    ``adam_step_us``, one run at a load of 2). paddle's multi-tensor mode fixes its list of
    parameters at the first step and fails when a later step has gradients for another set (a
    branch of the model used only sometimes, a parameter frozen later): such a step goes through
    paddle's per-parameter update, on the same moments.

    Takes ``paddle.optimizer.Adam``'s arguments except ``use_multi_tensor``.
    """

    def __init__(self, learning_rate: Any = 0.001, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 parameters: Sequence[paddle.Tensor] | None = None, **options: Any) -> None:
        super().__init__(learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon,
                         parameters=parameters, use_multi_tensor=True, **options)

    def step(self) -> None:
        """One update of the parameters that have gradients (see the class docstring)."""
        fused = self._param_dict["FP32_DenseTensor"][0]
        if fused and not isinstance(self._parameter_list[0], dict):
            updated = [p for p in self._parameter_list if not p.stop_gradient and p._grad_ivar() is not None]
            self._use_multi_tensor = list(map(id, updated)) == list(map(id, fused))
        super().step()


class RMSprop(Adam):
    """RMSprop as torch, Stable-Baselines3 and the A2C/A3C baselines define it:
    ``v = rho * v + (1 - rho) * g**2``, ``p -= lr * g / (sqrt(v) + epsilon)``.

    ``paddle.optimizer.RMSProp`` adds epsilon *inside* the square root, ``g / sqrt(v + epsilon)``,
    which is not a change of constant: after A2C's gradient clipping most gradients are so small
    that epsilon dominates, and the two take different steps (an A2C update differed from SB3's by
    a quarter of a step; with this class it matches to float32 rounding). This runs on
    :class:`Adam`: with ``beta1 = 0`` the first moment is the gradient itself, and powers of the
    betas held at 0 turn off Adam's bias correction, which leaves exactly the update above (one
    kernel call for all the parameters).

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
