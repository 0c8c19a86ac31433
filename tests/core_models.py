"""Small models and agents shared by the foundation tests (importable from subprocesses too)."""
import numpy as np
import paddle

import parl_lite
from parl_lite.algorithms import PolicyGradient


class CartpoleModel(parl_lite.Model):
    def __init__(self, obs_dim: int = 4, act_dim: int = 2) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(obs_dim, 10 * act_dim)
        self.fc2 = paddle.nn.Linear(10 * act_dim, act_dim)

    def forward(self, obs):
        return paddle.nn.functional.softmax(self.fc2(paddle.tanh(self.fc1(obs))), axis=-1)


class NormModel(parl_lite.Model):
    """A model with batch-norm buffers and dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(3, 5)
        self.bn = paddle.nn.BatchNorm1D(5)
        self.drop = paddle.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(self.fc(x)))


class SharedActorCritic(parl_lite.Model):
    """One trunk, two roles: ``policy(obs)`` and ``value(obs)``."""

    def __init__(self, obs_dim: int = 4, act_dim: int = 2) -> None:
        super().__init__()
        self.trunk = paddle.nn.Linear(obs_dim, 16)
        self.policy_head = paddle.nn.Linear(16, act_dim)
        self.value_head = paddle.nn.Linear(16, 1)

    def policy(self, obs):
        return paddle.nn.functional.softmax(self.policy_head(paddle.tanh(self.trunk(obs))), axis=-1)

    def value(self, obs):
        return self.value_head(paddle.tanh(self.trunk(obs)))

    def forward(self, obs):
        return self.policy(obs)


class CartpoleAgent(parl_lite.Agent):
    """``predict`` gives the action probabilities (PolicyGradient's); ``learn`` the loss as a float."""

    def predict(self, obs: np.ndarray) -> np.ndarray:
        return self.alg.predict(obs)

    def learn(self, obs, action, reward) -> float:
        return float(self.alg.learn(obs, action, reward))


def make_agent(seed: int, lr: float = 1e-2, model_cls=CartpoleModel) -> CartpoleAgent:
    paddle.seed(seed)
    return CartpoleAgent(PolicyGradient(model_cls(), lr=lr))


def fixed_batch(seed: int = 0, size: int = 16):
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((size, 4)).astype("float32")
    action = rng.integers(0, 2, size)
    returns = rng.standard_normal(size).astype("float32")
    return obs, action, returns
