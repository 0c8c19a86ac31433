"""parl_lite.utils.layers: paddle's Linear and Conv2D, the same results, less overhead."""
import numpy as np
import paddle
import pytest

from parl_lite.utils.layers import Conv2D, Linear


def _pair(in_features: int = 5, out_features: int = 3):
    paddle.seed(0)
    theirs, ours = paddle.nn.Linear(in_features, out_features), Linear(in_features, out_features)
    ours.set_state_dict(theirs.state_dict())
    return theirs, ours


def _input(*shape: int) -> paddle.Tensor:
    x = paddle.randn(list(shape))
    x.stop_gradient = False
    return x


def _conv_pair(**options):
    paddle.seed(0)
    theirs, ours = paddle.nn.Conv2D(3, 4, 3, **options), Conv2D(3, 4, 3, **options)
    ours.set_state_dict(theirs.state_dict())
    return theirs, ours


CASES = {
    "linear_batch": (_pair, (7, 5)), "linear_one_row": (_pair, (1, 5)), "linear_3d": (_pair, (2, 7, 5)),
    "conv_stride": (lambda: _conv_pair(stride=2), (2, 3, 9, 9)),
    "conv_padding": (lambda: _conv_pair(padding=1), (2, 3, 9, 9)),
    "conv_reflect_padding": (lambda: _conv_pair(padding=1, padding_mode="reflect"), (2, 3, 9, 9)),
}


@pytest.mark.parametrize("case", CASES)
def test_layers_match_paddles_in_values_and_gradients(case):
    make_pair, shape = CASES[case]
    theirs, ours = make_pair()
    x = _input(*shape)
    (theirs(x) ** 2).sum().backward()
    their_input_grad = x.grad.numpy().copy()
    x.clear_gradient()
    (ours(x) ** 2).sum().backward()
    np.testing.assert_allclose(ours(x).numpy(), theirs(x).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), their_input_grad, rtol=1e-4, atol=1e-5)
    for name in ("weight", "bias"):
        np.testing.assert_allclose(getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(),
                                   rtol=1e-4, atol=1e-4, err_msg=name)


def test_frozen_weights_pass_the_gradient_to_the_input_alone():
    """The actor step of DDPG, TD3 and SAC: the critic's parameters are frozen, the action is not."""
    theirs, ours = _pair()
    for parameter in ours.parameters():
        parameter.stop_gradient = True
    x = _input(4, 5)
    (ours(x) ** 2).sum().backward()
    expected = 2 * (x.numpy() @ theirs.weight.numpy() + theirs.bias.numpy()) @ theirs.weight.numpy().T
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert ours.weight.grad is None and ours.bias.grad is None


def test_under_no_grad_the_output_carries_no_graph():
    _, ours = _pair()
    with paddle.no_grad():
        y = ours(_input(4, 5))
    assert y.stop_gradient


def test_linear_traces_into_a_static_graph():
    paddle.seed(0)
    layer = Linear(4, 2)
    x = paddle.randn([3, 4])
    static = paddle.jit.to_static(layer.forward, full_graph=True)
    np.testing.assert_allclose(static(x).numpy(), layer(x).numpy(), rtol=1e-6)


def test_conv2d_with_a_frozen_bias_passes_the_gradient_to_the_maps():
    theirs, ours = _conv_pair()
    ours.bias.stop_gradient = theirs.bias.stop_gradient = True
    x = _input(2, 3, 6, 6)
    (theirs(x) ** 2).sum().backward()
    their_weight_grad = theirs.weight.grad.numpy()
    (ours(x) ** 2).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), their_weight_grad, rtol=1e-4, atol=1e-4)
    assert ours.bias.grad is None


def test_conv2d_traces_into_a_static_graph():
    _, layer = _conv_pair()
    x = paddle.randn([2, 3, 6, 6])
    static = paddle.jit.to_static(layer.forward, full_graph=True)
    np.testing.assert_allclose(static(x).numpy(), layer(x).numpy(), rtol=1e-5, atol=1e-6)
