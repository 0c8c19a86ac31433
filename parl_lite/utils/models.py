"""Ready-made networks for the example scripts and tests (importable in actor processes too)."""
import math

import paddle
import paddle.nn.functional as F

from parl_lite.core.model import Model
from parl_lite.utils.layers import Linear

__all__ = ["orthogonal_linear", "mlp", "MLPActorCritic", "MLPQNetwork", "MLPActorQ"]


def orthogonal_linear(in_dim: int, out_dim: int, gain: float) -> Linear:
    """A linear layer with orthogonal weights scaled by ``gain`` and zero bias (the usual
    actor-critic initialisation)."""
    return Linear(
        in_dim, out_dim,
        weight_attr=paddle.ParamAttr(initializer=paddle.nn.initializer.Orthogonal(float(gain))),
        bias_attr=paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.0)))


def mlp(in_dim: int, hidden: int, out_dim: int) -> paddle.nn.Sequential:
    """Two hidden ReLU layers of ``hidden`` units (the continuous-control scripts' networks)."""
    return paddle.nn.Sequential(
        Linear(in_dim, hidden), paddle.nn.ReLU(),
        Linear(hidden, hidden), paddle.nn.ReLU(),
        Linear(hidden, out_dim),
    )


class MLPActorCritic(Model):
    """Two-layer tanh MLPs for the policy and the value (SB3's ``MlpPolicy``).

    ``policy(obs)`` returns logits, or ``(mean, std)`` with a state-independent ``std =
    exp(log_std)`` when ``continuous`` (PARL's PPO convention); ``value(obs)`` returns ``[batch, 1]``.

    Args:
        obs_dim: observation size.
        act_dim: number of actions (discrete) or action dimensions (continuous).
        hidden: units per hidden layer.
        continuous: Gaussian policy instead of categorical.
        shared: policy and value heads on one trunk instead of two MLPs.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 64, continuous: bool = False,
                 shared: bool = False) -> None:
        super().__init__()
        self.continuous, self.shared = continuous, shared
        self.pi1 = orthogonal_linear(obs_dim, hidden, math.sqrt(2))
        self.pi2 = orthogonal_linear(hidden, hidden, math.sqrt(2))
        self.pi_out = orthogonal_linear(hidden, act_dim, 0.01)
        if not shared:
            self.vf1 = orthogonal_linear(obs_dim, hidden, math.sqrt(2))
            self.vf2 = orthogonal_linear(hidden, hidden, math.sqrt(2))
        self.vf_out = orthogonal_linear(hidden, 1, 1.0)
        if continuous:
            self.log_std = self.create_parameter([act_dim], default_initializer=paddle.nn.initializer.Constant(0.0))

    def _trunk(self, obs: paddle.Tensor) -> paddle.Tensor:
        return F.tanh(self.pi2(F.tanh(self.pi1(obs))))

    def policy(self, obs: paddle.Tensor):
        out = self.pi_out(self._trunk(obs))
        return (out, paddle.exp(self.log_std)) if self.continuous else out

    def value(self, obs: paddle.Tensor) -> paddle.Tensor:
        hidden = self._trunk(obs) if self.shared else F.tanh(self.vf2(F.tanh(self.vf1(obs))))
        return self.vf_out(hidden)

    def forward(self, obs: paddle.Tensor):
        return self.policy(obs)


class MLPQNetwork(Model):
    """A two-hidden-layer ReLU MLP from observations to one Q-value per action (SB3's DQN
    ``MlpPolicy``).

    Args:
        obs_dim: observation size.
        act_dim: number of actions.
        hidden: units per hidden layer.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 256) -> None:
        super().__init__()
        self.fc1 = Linear(obs_dim, hidden)
        self.fc2 = Linear(hidden, hidden)
        self.fc3 = Linear(hidden, act_dim)

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(obs)))))


class MLPActorQ(Model):
    """An actor and one or two Q critics for DDPG, TD3 and SAC, each a two-hidden-layer ReLU
    :func:`mlp`, with PARL's roles.

    ``policy(obs)`` is ``tanh(actor(obs))`` in [-1, 1], or with ``gaussian`` the pair
    ``(mean, log_std)`` before SAC's tanh squash; ``value(obs, action)`` is ``Q`` ``[batch, 1]``,
    or ``(Q1, Q2)`` with ``twin_q``; ``get_actor_params()`` / ``get_critic_params()`` feed the
    two optimizers.

    Args:
        obs_dim: observation size.
        act_dim: action dimensions.
        hidden: units per hidden layer.
        twin_q: two critics (TD3, SAC) instead of one (DDPG).
        gaussian: a Gaussian policy head (SAC) instead of a deterministic one.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 64, twin_q: bool = False,
                 gaussian: bool = False) -> None:
        super().__init__()
        self.twin_q, self.gaussian = twin_q, gaussian
        self.actor = mlp(obs_dim, hidden, 2 * act_dim if gaussian else act_dim)
        if twin_q:
            self.critic1 = mlp(obs_dim + act_dim, hidden, 1)
            self.critic2 = mlp(obs_dim + act_dim, hidden, 1)
        else:
            self.critic = mlp(obs_dim + act_dim, hidden, 1)

    def policy(self, obs: paddle.Tensor):
        if self.gaussian:
            mean, log_std = self.actor(obs).chunk(2, axis=-1)
            return mean, log_std
        return paddle.tanh(self.actor(obs))

    def value(self, obs: paddle.Tensor, action: paddle.Tensor):
        obs_action = paddle.concat([obs, action], axis=-1)
        if self.twin_q:
            return self.critic1(obs_action), self.critic2(obs_action)
        return self.critic(obs_action)

    def forward(self, obs: paddle.Tensor):
        return self.policy(obs)

    def get_actor_params(self):
        return self.actor.parameters()

    def get_critic_params(self):
        critics = (self.critic1, self.critic2) if self.twin_q else (self.critic,)
        return [parameter for critic in critics for parameter in critic.parameters()]
