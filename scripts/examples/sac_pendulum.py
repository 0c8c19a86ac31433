"""SAC on Pendulum-v1 (gymnasium).

    python scripts/examples/sac_pendulum.py --seed 1

Uniform random actions for ``--learning-starts`` steps, then actions sampled from the squashed
Gaussian policy, one update per environment step (critics, actor, temperature, soft target); a
10-episode evaluation of the deterministic policy every ``--eval-every`` steps; stops at ``--target``
(eval mean >= -200). The last line is the run's JSON summary.
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import SAC
from parl_lite.train import arg
from parl_lite.utils.models import MLPActorQ


@dataclasses.dataclass
class Args(train.TrainArgs):
    env: str = arg("Pendulum-v1", "gymnasium id (a continuous action space)")
    learning_starts: int = arg(500, "uniform random steps before learning")
    batch_size: int = arg(256, "minibatch size")
    hidden: int = arg(64, "units of each of the two hidden layers")
    gamma: float = arg(0.99, "discount")
    tau: float = arg(0.005, "soft target update rate")
    actor_lr: float = arg(1e-3, "Adam learning rate of the actor")
    critic_lr: float = arg(1e-3, "Adam learning rate of the critics")
    alpha: float = arg(1.0, "initial entropy temperature")
    alpha_lr: float = arg(1e-3, "learning rate of log(alpha)")
    total_steps: int = 30_000
    target: float | None = -200.0
    eval_every: int = 500
    save: str | None = "sac_pendulum.h5"


def main(args: Args) -> train.RunSummary:
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    model = MLPActorQ(spaces.obs_dim, spaces.act_dim, args.hidden, twin_q=True, gaussian=True)
    sac = SAC(model, gamma=args.gamma, tau=args.tau, actor_lr=args.actor_lr, critic_lr=args.critic_lr,
              alpha=args.alpha, alpha_lr=args.alpha_lr)
    exploration = train.ContinuousExploration(spaces.act_dim, None, args.learning_starts, seed=args.seed)
    trainer = train.OffPolicyTrainer(sac, args.env, exploration=exploration, learning_starts=args.learning_starts,
                                     batch_size=args.batch_size, eval_seed=10_000_000 + 1000 * args.seed,
                                     **args.run_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__))
