"""IMPALA on CartPole-v1: V-trace learner here, rollout actors on the process pool.

    python scripts/examples/train_impala.py --seed 1 --actors 2

Actors (``@remote_class`` :class:`RolloutWorker`) play ``unroll`` steps in ``num_envs``
environments with the weights they were last sent and return the trajectories with their
behaviour log-probabilities. The learner takes whichever trajectory arrives first, corrects for the
policy lag with V-trace, takes one gradient step and pushes the new weights to that actor with its
next request. Update order depends on timing, so a seed does not repeat a run exactly.

Every ``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their
mean reaches ``--target`` or after ``--total-steps``. The last line is the run's JSON summary.
``--env`` takes any Gymnasium id: another environment keeps these values and takes gymnasium's
reward threshold for it as its target.
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import IMPALA
from parl_lite.train import arg
from parl_lite.utils.models import MLPActorCritic


@dataclasses.dataclass
class Args(train.AsyncTrainArgs):
    env: str = arg("CartPole-v1", "gymnasium id")
    num_envs: int = arg(8, "environments per actor")
    unroll: int = arg(10, "steps per environment in one trajectory")
    gamma: float = arg(0.99, "discount")
    lr: float = arg(1e-3, "Adam learning rate")
    vf_loss_coeff: float = arg(0.5, "weight of the value loss 0.5 (v_s - V)^2")
    entropy_coeff: float = arg(0.0, "weight of the entropy term (negative: a bonus)")
    max_grad_norm: float = arg(0.5, "global gradient-norm clip")
    clip_rho: float = arg(1.0, "V-trace rho_bar (and the policy-gradient clip)")
    clip_c: float = arg(1.0, "V-trace c_bar")
    hidden: int = arg(64, "units per hidden layer")
    total_steps: int = 500_000
    target: float | None = 475.0
    save: str | None = "impala.h5"


def main(args: Args) -> train.RunSummary:
    args.connect()
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    impala = IMPALA(MLPActorCritic(spaces.obs_dim, spaces.act_dim, args.hidden), sample_batch_steps=args.unroll + 1,
                    gamma=args.gamma, vf_loss_coeff=args.vf_loss_coeff, clip_rho_threshold=args.clip_rho,
                    clip_pg_rho_threshold=args.clip_rho, lr=args.lr, max_grad_norm=args.max_grad_norm,
                    clip_c_threshold=args.clip_c, reduction="mean", entropy_coeff=args.entropy_coeff)
    trainer = train.AsyncTrainer(impala, args.env, **args.actor_options(), num_envs=args.num_envs,
                                 rollout_steps=args.unroll, gamma=args.gamma, **args.run_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__))
