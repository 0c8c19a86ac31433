"""Layers with less per-call overhead than paddle's, for the small networks of RL.

paddle's CPU kernels add a bias through generic broadcast code and sum its gradient through a
generic reduction: adding a ``[400]`` bias to a ``[256, 400]`` product costs about 75 µs and
summing its gradient 115 µs (torch: 26 and 11 µs); a convolution's ``[1, C, 1, 1]`` bias costs
milliseconds on the Nature DQN's maps. These layers add their bias another way
(``scripts/bench/bench_layers.py``).
"""
import paddle
from paddle import _C_ops
from paddle.autograd import PyLayer

__all__ = ["Conv2D", "Linear"]


class _GemmAffine(PyLayer):
    """``input @ weight + bias``: the product starts from the bias (``addmm``), and the bias
    gradient is a product too (``ones[1, batch] @ grad``). paddle's own ``addmm`` backward cannot
    be used: it crashes when the bias is 1-D.
    """

    @staticmethod
    def forward(ctx, input, weight, bias):  # noqa: A002 - paddle's argument name
        ctx.save_for_backward(input, weight)
        ctx.needs_grad = (not input.stop_gradient, not weight.stop_gradient, not bias.stop_gradient)
        return _C_ops.addmm(bias, input, weight, 1.0, 1.0)

    @staticmethod
    def backward(ctx, grad):
        input, weight = ctx.saved_tensor()
        needs_input, needs_weight, needs_bias = ctx.needs_grad
        return (_C_ops.matmul(grad, weight, False, True) if needs_input else None,
                _C_ops.matmul(input, grad, True, False) if needs_weight else None,
                _C_ops.matmul(paddle.ones([1, grad.shape[0]], grad.dtype), grad, False, False).reshape([-1])
                if needs_bias else None)


class Linear(paddle.nn.Linear):
    """``paddle.nn.Linear`` with the same parameters and initialisation, and cheaper calls.

    In dygraph mode, for a 2-D input and a bias, ``forward`` adds the bias inside the matrix
    product (``addmm``; :class:`_GemmAffine` when a gradient is wanted): on the ``[256, 400]``
    layers of the RL Zoo's off-policy networks paddle's separate bias add and bias gradient cost
    about a sixth of a TD3 update. Other inputs go straight to paddle's fused ``linear`` kernel,
    skipping ``F.linear``'s read of a global flag through ``paddle.get_flags``, which costs about as
    much as the product itself for 64-unit layers. Both measured in
    ``scripts/bench/bench_layers.py``. Static graphs (``paddle.jit.to_static``, ONNX export) go
    through paddle's own code.
    """

    def forward(self, input: paddle.Tensor) -> paddle.Tensor:  # noqa: A002 - paddle's argument name
        if not paddle.in_dynamic_mode():
            return super().forward(input)
        if input.ndim != 2 or self.bias is None:
            return _C_ops.linear(input, self.weight, self.bias)
        wants_grad = not (input.stop_gradient and self.weight.stop_gradient and self.bias.stop_gradient)
        if wants_grad and paddle.is_grad_enabled():
            return _GemmAffine.apply(input, self.weight, self.bias)
        return _C_ops.addmm(self.bias, input, self.weight, 1.0, 1.0)


class Conv2D(paddle.nn.Conv2D):
    """``paddle.nn.Conv2D`` with the same parameters and initialisation, whose channel bias is
    added as a ``[C, 1, 1]`` tensor rather than paddle's ``[1, C, 1, 1]``: paddle's CPU broadcast
    takes a path several times faster for it, forward and backward (on the Nature DQN's
    ``[32, 64, 9, 9]`` maps 0.37 ms against 3.6 ms); the results are the same.

    In dygraph mode, for channel-first maps with zero padding and a bias, the convolution runs
    without its bias and the bias is added after; anything else (and static graphs, ONNX export)
    goes through paddle's own code.
    """

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        if (not paddle.in_dynamic_mode() or self.bias is None or self._padding_mode != "zeros"
                or self._data_format != "NCHW"):
            return super().forward(x)
        maps = paddle.nn.functional.conv2d(x, self.weight, None, self._stride, self._padding, self._dilation,
                                           self._groups, self._data_format)
        return maps + self.bias.reshape([-1, 1, 1])
