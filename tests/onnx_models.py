"""Models for the ONNX export tests (importable by the `parl-lite export` subprocess too)."""
import paddle
import paddle.nn.functional as F

import parl_lite


class CnnPolicy(parl_lite.Model):
    """Atari-style: two convolutions, flatten, a linear head with softmax; input [N, 3, 16, 16]."""

    def __init__(self, act_dim: int = 4) -> None:
        super().__init__()
        self.conv1 = paddle.nn.Conv2D(3, 8, kernel_size=3, stride=2, padding=1)
        self.conv2 = paddle.nn.Conv2D(8, 8, kernel_size=3)
        self.fc = paddle.nn.Linear(8 * 6 * 6, act_dim)

    def forward(self, image):
        hidden = F.relu(self.conv2(F.relu(self.conv1(image))))
        return F.softmax(self.fc(paddle.flatten(hidden, start_axis=1)), axis=-1)


class TwoHeadModel(parl_lite.Model):
    """A shared trunk whose forward returns (policy, value)."""

    def __init__(self, obs_dim: int = 4, act_dim: int = 2, hidden: int = 32) -> None:
        super().__init__()
        self.trunk = paddle.nn.Linear(obs_dim, hidden)
        self.policy_head = paddle.nn.Linear(hidden, act_dim)
        self.value_head = paddle.nn.Linear(hidden, 1)

    def forward(self, obs):
        hidden = paddle.tanh(self.trunk(obs))
        return F.softmax(self.policy_head(hidden), axis=-1), self.value_head(hidden)


class LgammaModel(parl_lite.Model):
    """Uses an operator paddle2onnx 2.1 cannot convert (it aborts its process on it)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 2)

    def forward(self, obs):
        return paddle.lgamma(self.fc(obs))


class NotSelfModel(parl_lite.Model):
    def __init__(this) -> None:
        super().__init__()
        this.fc = paddle.nn.Linear(4, 2)

    def forward(this, obs):
        return this.fc(obs)


class NoisyModel(parl_lite.Model):
    """Draws fresh noise in forward: an exported graph cannot match paddle on it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 2)

    def forward(self, obs):
        return self.fc(obs) + paddle.rand([2])


class ManyOpsModel(parl_lite.Model):
    """Two inputs, eight outputs: every operator parl_lite translates itself, in one forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 6)
        self.bn = paddle.nn.BatchNorm1D(6)
        self.drop = paddle.nn.Dropout(0.3)

    def forward(self, obs, mask):
        hidden = self.fc(obs) * 2.0 + 1.0                                       # scale
        hidden = paddle.concat([hidden, obs], axis=-1).reshape([-1, 2, 5])      # concat, reshape
        flat = paddle.flatten(hidden, 1) - mask.mean() / (mask.abs().max() + 1.0)
        advantage = flat - flat.mean(axis=1, keepdim=True)                      # dueling-style reduction
        gated = paddle.maximum(flat, mask) * F.sigmoid(mask) + paddle.minimum(flat, mask)
        return (F.log_softmax(advantage, -1), self.bn(F.leaky_relu(self.fc(obs), 0.1)), self.drop(gated),
                flat.T, paddle.clip(flat, -0.5, 0.5).sum(axis=1), paddle.matmul(flat, mask, transpose_y=True),
                paddle.flatten(hidden, 0), paddle.sqrt(paddle.exp(mask)) - paddle.log(mask.abs() + 1.0))


def mlp_sequential(obs_dim: int = 4, act_dim: int = 2) -> paddle.nn.Sequential:
    return paddle.nn.Sequential(
        paddle.nn.Linear(obs_dim, 64), paddle.nn.Tanh(),
        paddle.nn.Linear(64, 64), paddle.nn.ReLU(),
        paddle.nn.Linear(64, act_dim), paddle.nn.Softmax(),
    )


def cnn_sequential(act_dim: int = 3) -> paddle.nn.Sequential:
    return paddle.nn.Sequential(
        paddle.nn.Conv2D(3, 8, kernel_size=3, stride=2, padding=[1, 0, 2, 1]),  # asymmetric padding
        paddle.nn.ReLU(),
        paddle.nn.Sequential(paddle.nn.Conv2D(8, 4, kernel_size=2, padding="SAME"), paddle.nn.Sigmoid()),
        paddle.nn.Flatten(),
        paddle.nn.Linear(4 * 8 * 9, act_dim),
        paddle.nn.Softmax(),
    )
