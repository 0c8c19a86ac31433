"""DDPG on Pendulum-v1 (gymnasium).

    python scripts/ddpg_pendulum.py --seed 1

Uniform random actions for ``--learning-starts`` steps, then the deterministic policy plus Gaussian
noise, one update per environment step; a 10-episode evaluation every ``--eval-every`` steps; stops
at ``--target`` (eval mean >= -200) and saves the agent to an HDF5 checkpoint.
"""
import argparse

import paddle

import parl_lite
from parl_lite.algorithms import DDPG
from continuous_control import ContinuousAgent, main, make_parser, mlp

HYPERPARAMETERS = dict(total_steps=30_000, learning_starts=500, batch_size=256, hidden=64, gamma=0.99,
                       tau=0.005, actor_lr=1e-3, critic_lr=1e-3, exploration_noise=0.1)


class PendulumModel(parl_lite.Model):
    """Actor ``policy(obs)`` in [-1, 1] and critic ``value(obs, action)``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int) -> None:
        super().__init__()
        self.actor = mlp(obs_dim, hidden, act_dim)
        self.critic = mlp(obs_dim + act_dim, hidden, 1)

    def policy(self, obs: paddle.Tensor) -> paddle.Tensor:
        return paddle.tanh(self.actor(obs))

    def value(self, obs: paddle.Tensor, action: paddle.Tensor) -> paddle.Tensor:
        return self.critic(paddle.concat([obs, action], axis=-1))

    def get_actor_params(self):
        return self.actor.parameters()

    def get_critic_params(self):
        return self.critic.parameters()


def make_agent(obs_dim: int, act_dim: int, args: argparse.Namespace) -> ContinuousAgent:
    model = PendulumModel(obs_dim, act_dim, args.hidden)
    algorithm = DDPG(model, gamma=args.gamma, tau=args.tau, actor_lr=args.actor_lr, critic_lr=args.critic_lr)
    return ContinuousAgent(algorithm, act_dim, exploration_noise=args.exploration_noise, seed=args.seed)


if __name__ == "__main__":
    parser = make_parser(__doc__, HYPERPARAMETERS)
    main("DDPG", parser.parse_args(), make_agent)
