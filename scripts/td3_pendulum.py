"""TD3 on Pendulum-v1 (gymnasium).

    python scripts/td3_pendulum.py --seed 1

Uniform random actions for ``--learning-starts`` steps, then the deterministic policy plus Gaussian
noise, one critic update per environment step (the actor every ``--policy-freq``); a 10-episode
evaluation every ``--eval-every`` steps; stops at ``--target`` (eval mean >= -200) and saves the
agent to an HDF5 checkpoint.
"""
import argparse

import paddle

import parl_lite
from parl_lite.algorithms import TD3
from continuous_control import ContinuousAgent, main, make_parser, mlp

HYPERPARAMETERS = dict(total_steps=30_000, learning_starts=500, batch_size=256, hidden=64, gamma=0.99,
                       tau=0.005, actor_lr=1e-3, critic_lr=1e-3, exploration_noise=0.1,
                       policy_noise=0.2, noise_clip=0.5, policy_freq=2)


class PendulumModel(parl_lite.Model):
    """Actor ``policy(obs)`` in [-1, 1] and twin critics ``value(obs, action) -> (Q1, Q2)``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int) -> None:
        super().__init__()
        self.actor = mlp(obs_dim, hidden, act_dim)
        self.critic1 = mlp(obs_dim + act_dim, hidden, 1)
        self.critic2 = mlp(obs_dim + act_dim, hidden, 1)

    def policy(self, obs: paddle.Tensor) -> paddle.Tensor:
        return paddle.tanh(self.actor(obs))

    def value(self, obs: paddle.Tensor, action: paddle.Tensor):
        obs_action = paddle.concat([obs, action], axis=-1)
        return self.critic1(obs_action), self.critic2(obs_action)

    def get_actor_params(self):
        return self.actor.parameters()

    def get_critic_params(self):
        return self.critic1.parameters() + self.critic2.parameters()


def make_agent(obs_dim: int, act_dim: int, args: argparse.Namespace) -> ContinuousAgent:
    model = PendulumModel(obs_dim, act_dim, args.hidden)
    algorithm = TD3(model, gamma=args.gamma, tau=args.tau, actor_lr=args.actor_lr, critic_lr=args.critic_lr,
                    policy_noise=args.policy_noise, noise_clip=args.noise_clip, policy_freq=args.policy_freq)
    return ContinuousAgent(algorithm, act_dim, exploration_noise=args.exploration_noise, seed=args.seed)


if __name__ == "__main__":
    parser = make_parser(__doc__, HYPERPARAMETERS)
    parser.add_argument("--policy-noise", type=float, help="target policy smoothing noise")
    parser.add_argument("--noise-clip", type=float, help="clip of the smoothing noise")
    parser.add_argument("--policy-freq", type=int, help="critic updates per actor update")
    main("TD3", parser.parse_args(), make_agent)
