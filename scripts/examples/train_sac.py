"""SAC on a continuous-control task: Pendulum-v1 by default, MuJoCo with the RL Zoo's settings.

    python scripts/examples/train_sac.py --seed 1                   # Pendulum-v1
    python scripts/examples/train_sac.py --env Hopper-v5 --seed 1    # pip install '.[mujoco]'; see RL_ZOO

Uniform random actions for ``--learning-starts`` steps, then actions sampled from the squashed
Gaussian policy, ``--gradient-steps`` updates (critics, actor, temperature, soft target) every
``--train-freq`` steps; a 10-episode evaluation of the deterministic policy every ``--eval-every``
steps; stops at ``--target``. A task of ``RL_ZOO`` takes the RL Zoo's values for every option left
at its default; another task keeps Pendulum's and takes gymnasium's reward threshold as its target.
The last line is the run's JSON summary.
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import SAC
from parl_lite.train import arg
from parl_lite.utils.models import MLPActorQ


@dataclasses.dataclass
class Args(train.ContinuousOffPolicyArgs):
    alpha: float = arg(1.0, "initial entropy temperature (SB3's ent_coef 'auto' starts at 1)")
    alpha_lr: float = arg(1e-3, "learning rate of log(alpha)")
    log_std_min: float = arg(-5.0, "the policy's log std is clipped from below here (PARL's -5; SB3's -20)")
    log_std_max: float = arg(2.0, "... and from above here")
    save: str | None = "sac.h5"


def main(args: Args) -> train.RunSummary:
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    model = MLPActorQ(spaces.obs_dim, spaces.act_dim, twin_q=True, gaussian=True, **args.model_options())
    sac = SAC(model, gamma=args.gamma, tau=args.tau, actor_lr=args.actor_lr, critic_lr=args.critic_lr,
              alpha=args.alpha, alpha_lr=args.alpha_lr, log_std_bounds=(args.log_std_min, args.log_std_max))
    exploration = train.ContinuousExploration(spaces.act_dim, None, args.learning_starts, seed=args.seed)
    trainer = train.OffPolicyTrainer(sac, args.env, exploration=exploration, eval_seed=10_000_000 + 1000 * args.seed,
                                     **args.loop_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


# RL-Zoo's SAC MuJoCo block (hyperparams/sac.yml of DLR-RM/rl-baselines3-zoo at 22e3ff24, written for the
# -v4 tasks; the -v5 tasks are the same robots): SB3's SAC defaults (lr 3e-4 for the actor, the critics and the
# temperature, which starts at 1 and steers toward -act_dim; batch 256, tau 0.005, gamma 0.99, net_arch
# [256, 256], log std clipped to [-20, 2], torch's initialisation, a buffer of 1e6) and learning_starts 1e4;
# Swimmer gamma 0.999.
MUJOCO = dict(learning_starts=10_000, actor_lr=3e-4, critic_lr=3e-4, alpha=1.0, alpha_lr=3e-4, batch_size=256,
              net_arch=(256, 256), init="torch", log_std_min=-20.0, buffer_size=1_000_000, total_steps=1_000_000,
              eval_every=10_000, target=None)
RL_ZOO = {"HalfCheetah-v5": MUJOCO, "Hopper-v5": MUJOCO, "Walker2d-v5": MUJOCO, "Ant-v5": MUJOCO,
          "Swimmer-v5": {**MUJOCO, "gamma": 0.999}}


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__, env_defaults=RL_ZOO))
