"""Layers with less per-call overhead than paddle's, for the small networks of RL."""
import paddle
from paddle import _C_ops
from paddle.autograd import PyLayer

__all__ = ["Linear"]


class _GemmAffine(PyLayer):
    """``input @ weight + bias`` with the bias inside matrix products, forward and backward.

    paddle's CPU kernels add a ``[out]`` bias to a ``[batch, out]`` product, and sum its gradient
    over the batch, through generic broadcast and reduce code: for a ``[256, 400]`` output that is
    about 75 µs and 115 µs, several times the cost in torch. ``addmm`` lets the matrix product
    start from the bias, and ``ones[1, batch] @ grad`` sums the gradient in one more product.
    paddle's own ``addmm`` backward cannot be used instead: it crashes when the bias is 1-D.
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
        ones = paddle.ones([1, grad.shape[0]], grad.dtype)
        return (_C_ops.matmul(grad, weight, False, True) if needs_input else None,
                _C_ops.matmul(input, grad, True, False) if needs_weight else None,
                _C_ops.matmul(ones, grad, False, False).reshape([-1]) if needs_bias else None)


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
