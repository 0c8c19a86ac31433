"""parl_lite.algorithms.optimizers.Adam: paddle's Adam in one kernel call, the same steps as paddle's
per-parameter Adam, whichever parameters have gradients."""
from collections.abc import Callable

import numpy as np
import paddle
import pytest

import parl_lite.core.model  # noqa: F401 - the MKL setting parl_lite's networks run under
from parl_lite.algorithms.common import GlobalNormClip
from parl_lite.algorithms.optimizers import Adam

pytestmark = pytest.mark.quick

Losses = Callable[[paddle.nn.Layer, paddle.nn.Layer, paddle.Tensor], paddle.Tensor]


def _train(optimizer_cls: type, losses: list[Losses], freeze_second_after: int | None = None,
           **options) -> list[np.ndarray]:
    """The two layers' weights after one step on each loss of ``losses``."""
    paddle.seed(0)
    first, second = paddle.nn.Linear(5, 7), paddle.nn.Linear(7, 3)
    optimizer = optimizer_cls(parameters=first.parameters() + second.parameters(), **options)
    x = paddle.to_tensor(np.random.default_rng(0).normal(size=(16, 5)).astype("float32"))
    for step, loss in enumerate(losses):
        if step == freeze_second_after:
            for parameter in second.parameters():
                parameter.stop_gradient = True
        loss(first, second, x).backward()
        optimizer.step()
        optimizer.clear_grad()
        if step == 2:
            optimizer.set_lr(3e-3)
    return [parameter.numpy() for parameter in first.parameters() + second.parameters()]


def _both(first, second, x):
    return (second(paddle.nn.functional.relu(first(x))) ** 2).mean()


def _first_only(first, second, x):
    return (first(x) ** 2).mean()


def _assert_same_steps(ours: list[np.ndarray], paddles: list[np.ndarray]) -> None:
    for mine, theirs in zip(ours, paddles, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("options", [{"learning_rate": 1e-3},
                                     {"learning_rate": 1e-3, "epsilon": 1e-5, "grad_clip": GlobalNormClip(0.1)}],
                         ids=["plain", "epsilon-and-clip"])
def test_adam_steps_as_paddles_per_parameter_adam(options):
    losses = [_both] * 6
    ours = _train(Adam, losses, **options)
    _assert_same_steps(ours, _train(paddle.optimizer.Adam, losses, **options))
    assert not np.array_equal(ours[0], _train(Adam, [], **options)[0])  # the steps moved the weights


def test_adam_steps_when_later_gradients_reach_parameters_the_first_step_did_not():
    # paddle's own multi-tensor Adam raised ValueError on the second step: its list of parameters
    # was fixed by the first, which had no gradient for the second layer
    losses = [_first_only, _both, _both, _first_only, _both]
    ours = _train(Adam, losses, learning_rate=1e-2)
    _assert_same_steps(ours, _train(paddle.optimizer.Adam, losses, learning_rate=1e-2))


def test_adam_steps_when_a_parameter_is_frozen_after_the_first_step():
    losses = [_both, _both, _first_only, _first_only]
    ours = _train(Adam, losses, freeze_second_after=2, learning_rate=1e-2)
    _assert_same_steps(ours, _train(paddle.optimizer.Adam, losses, freeze_second_after=2, learning_rate=1e-2))
