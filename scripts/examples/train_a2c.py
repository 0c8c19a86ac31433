"""A2C on CartPole-v1 or an Atari game: 8 environments stepped in this process (or in remote actors:
``--actors``), one update per 5 steps.

    python scripts/examples/train_a2c.py --seed 1
    python scripts/examples/train_a2c.py --seed 1 --actors 2 --num-envs 4   # PARL's A2C: actors on the pool
    python scripts/examples/train_a2c.py --actors 4 --address HOST:8010     # ... or on a cluster
    python scripts/examples/train_a2c.py --env PongNoFrameskip-v4     # pip install '.[atari]'; see ATARI

Hyperparameters are RL-Zoo's A2C CartPole-v1 (SB3 defaults: RMSprop, n-step returns). Every
``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their mean
reaches ``--target`` or after ``--total-steps``. The last line is the run's JSON summary.
``--env`` takes any Gymnasium id: another environment keeps these values and takes gymnasium's
reward threshold for it as its target. An Atari game learns from DeepMind's preprocessed frames with
the Nature CNN (:class:`parl_lite.utils.models.CNNActorCritic`) and the RL Zoo's Atari values
(``ATARI``; the Zoo's RMSprop keeps epsilon inside the square root, TensorFlow's way, ours outside).
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import A2C
from parl_lite.train import arg
from parl_lite.utils.models import CNNActorCritic, MLPActorCritic


@dataclasses.dataclass
class Args(train.RemoteArgs):
    env: str = arg("CartPole-v1", "gymnasium id")
    actors: int = arg(0, "0: the environments step here; more: remote rollout actors of --num-envs each, every one "
                         "playing each round with the latest weights (PARL's A2C)")
    num_envs: int = arg(8, "environments stepped together (per actor with --actors)")
    rollout_steps: int = arg(5, "steps per environment between updates (n of the n-step returns)")
    gamma: float = arg(0.99, "discount")
    gae_lambda: float = arg(1.0, "GAE lambda (1: n-step returns)")
    lr: float = arg(7e-4, "RMSprop learning rate")
    vf_loss_coeff: float = arg(1.0, "weight of the value loss 0.5 (V - R)^2 (1.0: RL-Zoo's vf_coef 0.5)")
    entropy_coeff: float = arg(0.0, "weight of the entropy term (negative: a bonus)")
    max_grad_norm: float = arg(0.5, "global gradient-norm clip")
    hidden: int = arg(64, "units per hidden layer")
    total_steps: int = 500_000
    target: float | None = 475.0
    save: str | None = "a2c.h5"


def main(args: Args) -> train.RunSummary:
    args.connect()
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    model = (CNNActorCritic(spaces.obs_shape, spaces.act_dim) if spaces.image
             else MLPActorCritic(spaces.obs_dim, spaces.act_dim, args.hidden, spaces.continuous))
    a2c = A2C(model, args.vf_loss_coeff, lr=args.lr, optimizer="rmsprop", max_grad_norm=args.max_grad_norm,
              reduction="mean", entropy_coeff=args.entropy_coeff)
    trainer = train.OnPolicyTrainer(a2c, args.env, num_envs=args.num_envs, rollout_steps=args.rollout_steps,
                                    gamma=args.gamma, gae_lambda=args.gae_lambda, actors=args.actors,
                                    **args.run_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


# RL-Zoo's A2C atari block (hyperparams/a2c.yml of DLR-RM/rl-baselines3-zoo at 22e3ff24): 16 environments,
# ent_coef 0.01, vf_coef 0.25; SB3's n_steps 5, lr 7e-4, gamma 0.99, gae_lambda 1, max_grad_norm 0.5
ATARI = dict(num_envs=16, entropy_coeff=-0.01, vf_loss_coeff=0.5, total_steps=10_000_000, target=None,
             eval_every=250_000)


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__, atari_defaults=ATARI))
