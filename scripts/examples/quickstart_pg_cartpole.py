"""PARL's QuickStart on Gymnasium: REINFORCE on CartPole-v1.

    python scripts/examples/quickstart_pg_cartpole.py --seed 1

Plays one episode at a time with the stochastic policy and takes one policy-gradient step on its
normalised discounted returns; evaluates the greedy policy every ``--eval-every`` env steps
(10 episodes) and stops once the evaluation mean reaches ``--target``. The last line is the run's
JSON summary.
"""
import dataclasses

import paddle

import parl_lite
from parl_lite import train
from parl_lite.algorithms import PolicyGradient
from parl_lite.train import arg


@dataclasses.dataclass
class Args(train.TrainArgs):
    env: str = arg("CartPole-v1", "gymnasium id")
    lr: float = arg(5e-3, "Adam learning rate")
    gamma: float = arg(0.99, "discount of the returns")
    hidden: int = arg(20, "hidden units (PARL: 10 * act_dim)")
    total_steps: int = 300_000
    target: float | None = 475.0
    save: str | None = "pg_cartpole.h5"


class CartpoleModel(parl_lite.Model):
    """Two-layer softmax policy, as in PARL's QuickStart."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(obs_dim, hidden)
        self.fc2 = paddle.nn.Linear(hidden, act_dim)

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        return paddle.nn.functional.softmax(self.fc2(paddle.tanh(self.fc1(obs))), axis=-1)


def main(args: Args) -> train.RunSummary:
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    pg = PolicyGradient(CartpoleModel(spaces.obs_dim, spaces.act_dim, args.hidden), lr=args.lr)
    trainer = train.EpisodicTrainer(pg, args.env, gamma=args.gamma, **args.run_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__))
