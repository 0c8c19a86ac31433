"""DDPG on a continuous-control task: Pendulum-v1 by default, MuJoCo with the RL Zoo's settings.

    python scripts/examples/train_ddpg.py --seed 1                       # Pendulum-v1
    python scripts/examples/train_ddpg.py --env HalfCheetah-v5 --seed 1   # pip install '.[mujoco]'; see RL_ZOO

Uniform random actions for ``--learning-starts`` steps, then the deterministic policy plus action
noise (``--noise-type``, ``--noise-std``), ``--gradient-steps`` updates every ``--train-freq``
steps; a 10-episode evaluation every ``--eval-every`` steps; stops at ``--target``. A task of
``RL_ZOO`` takes the RL Zoo's values for every option left at its default; another task keeps
Pendulum's and takes gymnasium's reward threshold as its target. The last line is the run's JSON
summary.
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import DDPG
from parl_lite.train import arg
from parl_lite.train.exploration import NOISE_TYPES
from parl_lite.utils.models import MLPActorQ


@dataclasses.dataclass
class Args(train.ContinuousOffPolicyArgs):
    noise_type: str = arg("normal", "action noise: independent Gaussian or Ornstein-Uhlenbeck", choices=NOISE_TYPES)
    noise_std: float = arg(0.1, "standard deviation of the action noise, in units of the action range")
    save: str | None = "ddpg.h5"


def main(args: Args) -> train.RunSummary:
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    ddpg = DDPG(MLPActorQ(spaces.obs_dim, spaces.act_dim, **args.model_options()), gamma=args.gamma, tau=args.tau,
                actor_lr=args.actor_lr, critic_lr=args.critic_lr)
    exploration = train.ContinuousExploration(spaces.act_dim, args.noise_std, args.learning_starts, seed=args.seed,
                                              noise_type=args.noise_type)
    trainer = train.OffPolicyTrainer(ddpg, args.env, exploration=exploration, eval_seed=10_000_000 + 1000 * args.seed,
                                     **args.loop_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


# RL-Zoo's DDPG MuJoCo block (hyperparams/ddpg.yml of DLR-RM/rl-baselines3-zoo at 22e3ff24, written for the
# -v4 tasks; the -v5 tasks are the same robots): SB3's defaults (tau 0.005, gamma 0.99, a buffer of 1e6) and
# learning_starts 1e4, normal noise 0.1, lr 1e-3 (both networks), batch 256, net_arch [400, 300], torch's
# initialisation; Swimmer gamma 0.9999. Targets: gymnasium's reward thresholds where it has one.
MUJOCO = dict(learning_starts=10_000, noise_type="normal", noise_std=0.1, actor_lr=1e-3, critic_lr=1e-3, batch_size=256,
              net_arch=(400, 300), init="torch", buffer_size=1_000_000, total_steps=1_000_000, eval_every=10_000,
              target=None)
RL_ZOO = {"HalfCheetah-v5": MUJOCO, "Hopper-v5": MUJOCO, "Walker2d-v5": MUJOCO, "Ant-v5": MUJOCO,
          "Swimmer-v5": {**MUJOCO, "gamma": 0.9999}}


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__, env_defaults=RL_ZOO))
