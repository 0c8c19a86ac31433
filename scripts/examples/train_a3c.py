"""A3C on CartPole-v1: rollout actors are ``@remote_class`` actors on the process pool.

    python scripts/examples/train_a3c.py --seed 1 --actors 2

Each actor owns ``num_envs`` environments and a copy of the policy. The learner (this process)
takes whichever rollout arrives first, takes one A2C step on it (values and n-step returns from
its current critic), and sends the new weights back with that actor's next request -- so actors
play with weights up to ``actors - 1`` updates old, as in asynchronous A3C. Update order depends on
timing, so unlike the single-process scripts a seed does not repeat a run exactly.

Every ``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their
mean reaches ``--target`` or after ``--total-steps``. The last line is the run's JSON summary.
``--env`` takes any Gymnasium id: another environment keeps these values and takes gymnasium's
reward threshold for it as its target.
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import A2C
from parl_lite.train import arg
from parl_lite.utils.models import MLPActorCritic


@dataclasses.dataclass
class Args(train.AsyncTrainArgs):
    env: str = arg("CartPole-v1", "gymnasium id")
    num_envs: int = arg(8, "environments per actor")
    rollout_steps: int = arg(5, "steps per environment in one rollout (n of the n-step returns)")
    gamma: float = arg(0.99, "discount")
    gae_lambda: float = arg(1.0, "GAE lambda (1: n-step returns)")
    lr: float = arg(7e-4, "RMSprop learning rate")
    vf_loss_coeff: float = arg(1.0, "weight of the value loss 0.5 (V - R)^2 (1.0: RL-Zoo's vf_coef 0.5)")
    entropy_coeff: float = arg(0.0, "weight of the entropy term (negative: a bonus)")
    max_grad_norm: float = arg(0.5, "global gradient-norm clip")
    hidden: int = arg(64, "units per hidden layer")
    total_steps: int = 500_000
    target: float | None = 475.0
    save: str | None = "a3c.h5"


def main(args: Args) -> train.RunSummary:
    args.connect()
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    a2c = A2C(MLPActorCritic(spaces.obs_dim, spaces.act_dim, args.hidden), args.vf_loss_coeff, lr=args.lr,
              optimizer="rmsprop", max_grad_norm=args.max_grad_norm, reduction="mean", entropy_coeff=args.entropy_coeff)
    trainer = train.AsyncTrainer(a2c, args.env, **args.actor_options(), num_envs=args.num_envs,
                                 rollout_steps=args.rollout_steps, gamma=args.gamma, gae_lambda=args.gae_lambda,
                                 name="A3C", **args.run_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__))
