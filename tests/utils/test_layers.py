"""parl_lite.utils.layers.Linear: paddle's Linear, same results, less overhead."""
import numpy as np
import paddle

from parl_lite.utils.layers import Linear


def test_linear_matches_paddle_in_values_and_gradients():
    paddle.seed(0)
    theirs, ours = paddle.nn.Linear(5, 3), Linear(5, 3)
    ours.set_state_dict(theirs.state_dict())
    x = paddle.randn([7, 5])
    (theirs(x) ** 2).sum().backward()
    (ours(x) ** 2).sum().backward()
    np.testing.assert_array_equal(ours(x).numpy(), theirs(x).numpy())
    np.testing.assert_array_equal(ours.weight.grad.numpy(), theirs.weight.grad.numpy())
    np.testing.assert_array_equal(ours.bias.grad.numpy(), theirs.bias.grad.numpy())


def test_linear_traces_into_a_static_graph():
    paddle.seed(0)
    layer = Linear(4, 2)
    x = paddle.randn([3, 4])
    static = paddle.jit.to_static(layer.forward, full_graph=True)
    np.testing.assert_allclose(static(x).numpy(), layer(x).numpy(), rtol=1e-6)
