"""Layers with less per-call overhead than paddle's, for the small networks of RL."""
import paddle
from paddle import _C_ops

__all__ = ["Linear"]


class Linear(paddle.nn.Linear):
    """``paddle.nn.Linear`` with the same parameters, initialisation and kernel.

    In dygraph mode ``forward`` calls paddle's fused ``linear`` kernel directly: paddle's
    ``F.linear`` first reads a global flag through ``paddle.get_flags`` on every call, which costs
    about as much as the matmul itself for the 64-unit layers of RL policies (measured in
    ``scripts/bench/bench_layers.py``). Static graphs (``paddle.jit.to_static``, ONNX
    export) go through paddle's own code.
    """

    def forward(self, input: paddle.Tensor) -> paddle.Tensor:  # noqa: A002 - paddle's argument name
        if paddle.in_dynamic_mode():
            return _C_ops.linear(input, self.weight, self.bias)
        return super().forward(input)
