"""SAC on Pendulum-v1 (gymnasium).

    python scripts/sac_pendulum.py --seed 1

Uniform random actions for ``--learning-starts`` steps, then the squashed Gaussian policy, one
update per environment step with automatic entropy tuning; a 10-episode evaluation (deterministic
``tanh(mean)``) every ``--eval-every`` steps; stops at ``--target`` (eval mean >= -200) and saves
the agent to an HDF5 checkpoint.
"""
import argparse

import paddle

import parl_lite
from parl_lite.algorithms import SAC
from continuous_control import ContinuousAgent, main, make_parser, mlp

HYPERPARAMETERS = dict(total_steps=30_000, learning_starts=500, batch_size=256, hidden=64, gamma=0.99,
                       tau=0.005, actor_lr=1e-3, critic_lr=1e-3, alpha=1.0, alpha_lr=1e-3)


class PendulumModel(parl_lite.Model):
    """Gaussian actor ``policy(obs) -> (mean, log_std)`` and twin critics ``value -> (Q1, Q2)``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int) -> None:
        super().__init__()
        self.actor = mlp(obs_dim, hidden, 2 * act_dim)
        self.critic1 = mlp(obs_dim + act_dim, hidden, 1)
        self.critic2 = mlp(obs_dim + act_dim, hidden, 1)

    def policy(self, obs: paddle.Tensor):
        mean, log_std = self.actor(obs).chunk(2, axis=-1)
        return mean, log_std

    def value(self, obs: paddle.Tensor, action: paddle.Tensor):
        obs_action = paddle.concat([obs, action], axis=-1)
        return self.critic1(obs_action), self.critic2(obs_action)

    def get_actor_params(self):
        return self.actor.parameters()

    def get_critic_params(self):
        return self.critic1.parameters() + self.critic2.parameters()


def make_agent(obs_dim: int, act_dim: int, args: argparse.Namespace) -> ContinuousAgent:
    model = PendulumModel(obs_dim, act_dim, args.hidden)
    algorithm = SAC(model, gamma=args.gamma, tau=args.tau, actor_lr=args.actor_lr, critic_lr=args.critic_lr,
                    alpha=args.alpha, alpha_lr=args.alpha_lr)
    return ContinuousAgent(algorithm, act_dim, exploration_noise=None, seed=args.seed)


if __name__ == "__main__":
    parser = make_parser(__doc__, HYPERPARAMETERS)
    parser.add_argument("--alpha", type=float, help="initial entropy temperature")
    parser.add_argument("--alpha-lr", type=float, help="learning rate of log(alpha)")
    main("SAC", parser.parse_args(), make_agent)
