"""IMPALA on CartPole-v1 or an Atari game: V-trace learner here, rollout actors on the process pool.

    python scripts/examples/train_impala.py --seed 1 --actors 2
    python scripts/examples/train_impala.py --env PongNoFrameskip-v4 --actors 2 --target 18   # see ATARI

Actors (``@remote_class`` :class:`RolloutWorker`) play ``unroll`` steps in ``num_envs``
environments with the weights they were last sent and return the trajectories with their
behaviour log-probabilities. The learner takes whichever trajectory arrives first, corrects for the
policy lag with V-trace, takes one gradient step and pushes the new weights to that actor with its
next request. Update order depends on timing, so a seed does not repeat a run exactly.

Every ``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their
mean reaches ``--target`` or after ``--total-steps``. The last line is the run's JSON summary.
``--env`` takes any Gymnasium id: another environment keeps these values and takes gymnasium's
reward threshold for it as its target. An Atari game (``PongNoFrameskip-v4``, ``ALE/Pong-v5``;
``pip install '.[atari]'``) takes the values of PARL's IMPALA example (``ATARI``): 42×42 frames,
PARL's small network (:class:`parl_lite.utils.models.CompactCNN`), 50-row trajectories, summed
losses clipped at a gradient norm of 40, an entropy bonus of 0.01.
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import IMPALA
from parl_lite.env.atari import is_atari
from parl_lite.train import arg
from parl_lite.utils.models import CNNActorCritic, MLPActorCritic


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
    reduction: str = arg("mean", "losses summed over the batch (PARL's) or averaged", choices=("sum", "mean"))
    screen_size: int = arg(84, "Atari frames are this many pixels square")
    torso: str = arg("compact", "the convolutional network of Atari games", choices=("nature", "compact"))
    total_steps: int = 500_000
    target: float | None = 475.0
    save: str | None = "impala.h5"


def main(args: Args) -> train.RunSummary:
    args.connect()
    paddle.seed(args.seed)
    env_kwargs = {"screen_size": args.screen_size} if is_atari(args.env) else {}
    spaces = train.env_spaces(args.env, env_kwargs)
    model = (CNNActorCritic(spaces.obs_shape, spaces.act_dim, args.torso) if spaces.image
             else MLPActorCritic(spaces.obs_dim, spaces.act_dim, args.hidden))
    impala = IMPALA(model, sample_batch_steps=args.unroll + 1,
                    gamma=args.gamma, vf_loss_coeff=args.vf_loss_coeff, clip_rho_threshold=args.clip_rho,
                    clip_pg_rho_threshold=args.clip_rho, lr=args.lr, max_grad_norm=args.max_grad_norm,
                    clip_c_threshold=args.clip_c, reduction=args.reduction, entropy_coeff=args.entropy_coeff)
    trainer = train.AsyncTrainer(impala, args.env, **args.actor_options(), num_envs=args.num_envs,
                                 rollout_steps=args.unroll, gamma=args.gamma, env_kwargs=env_kwargs,
                                 **args.run_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


# PARL's examples/IMPALA/impala_config.py (PARL 2.2.1): env_dim 42, sample_batch_steps 50 (49 steps and the
# bootstrap), gamma 0.99, lr 0.001, entropy_coeff -0.01, vf_loss_coeff 0.5, both rho clips 1, its IMPALA's
# summed losses and gradient clip 40; PARL's 32 actors of 5 environments are --actors and --num-envs here
ATARI = dict(screen_size=42, torso="compact", unroll=49, num_envs=10, lr=1e-3, entropy_coeff=-0.01, vf_loss_coeff=0.5,
             clip_rho=1.0, clip_c=1.0, max_grad_norm=40.0, reduction="sum", total_steps=10_000_000, target=None,
             eval_every=250_000)


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__, atari_defaults=ATARI))
