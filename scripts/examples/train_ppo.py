"""PPO on any Gymnasium environment (discrete actions: categorical; continuous: diagonal Gaussian).

    python scripts/examples/train_ppo.py --env CartPole-v1 --seed 1
    python scripts/examples/train_ppo.py --env Pendulum-v1 --seed 1       # RL-Zoo's Pendulum values: see PENDULUM
    python scripts/examples/train_ppo.py --env LunarLander-v3 --seed 1    # needs gymnasium[box2d]
    python scripts/examples/train_ppo.py --env HalfCheetah-v5 --seed 1    # pip install '.[mujoco]'; RL Zoo's values
    python scripts/examples/train_ppo.py --env PongNoFrameskip-v4         # pip install '.[atari]'; see ATARI

Hyperparameters are RL-Zoo's: CartPole-v1's below, and those of the tasks in ``RL_ZOO`` for every
option left at its default; another environment takes CartPole-v1's values and, as its target,
gymnasium's reward threshold for it. An Atari game learns from DeepMind's preprocessed frames with
the Nature CNN (:class:`parl_lite.utils.models.CNNActorCritic`) and the RL Zoo's Atari values.
Every ``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their
mean reaches ``--target`` or after ``--total-steps``. The last line is the run's JSON summary.
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import PPO
from parl_lite.train import arg
from parl_lite.utils.models import CNNActorCritic, MLPActorCritic


@dataclasses.dataclass
class Args(train.TrainArgs):
    env: str = arg("CartPole-v1", "gymnasium id")
    num_envs: int = arg(8, "environments stepped together (SB3's n_envs)")
    rollout_steps: int = arg(32, "steps per environment between updates (n_steps)")
    minibatch_size: int = arg(256, "rows per PPO step (batch_size)")
    epochs: int = arg(20, "passes over each rollout (n_epochs)")
    gamma: float = arg(0.98, "discount")
    gae_lambda: float = arg(0.8, "GAE lambda")
    initial_lr: float = arg(1e-3, "Adam learning rate (learning_rate)")
    clip_param: float = arg(0.2, "surrogate clip range (clip_range)")
    anneal: bool = arg(True, "decay the learning rate and the clip range linearly to 0 (the RL Zoo's lin_ values)")
    entropy_coef: float = arg(0.0, "weight of the entropy bonus (ent_coef)")
    value_loss_coef: float = arg(1.0, "weight of the value loss 0.5 (V - R)^2: twice SB3's vf_coef")
    use_clipped_value_loss: bool = arg(False, "clip the value change to the clip range")
    max_grad_norm: float = arg(0.5, "global gradient-norm clip")
    hidden: int = arg(64, "units of each of the two hidden layers, unless --pi-arch / --vf-arch say otherwise")
    pi_arch: tuple[int, ...] | None = arg(None, "units of each hidden layer of the policy (net_arch pi)")
    vf_arch: tuple[int, ...] | None = arg(None, "units of each hidden layer of the value (net_arch vf)")
    activation: str = arg("tanh", "activation of the hidden layers (activation_fn)", choices=("tanh", "relu"))
    ortho_init: bool = arg(True, "orthogonal initialisation (--no-ortho-init: torch's, as SB3's ortho_init=False)")
    log_std_init: float = arg(0.0, "initial log std of a continuous policy")
    shared: bool = arg(False, "one trunk for policy and value")
    normalize: bool = arg(False, "standardise observations by running statistics (in the model: saved with its "
                                 "weights and in the exported ONNX policy)")
    normalize_reward: bool = arg(False, "scale the learning rewards by the running std of the discounted return")
    target: float | None = 475.0
    eval_every: int = 2_560
    save: str | None = "ppo.h5"


# RL-Zoo's Pendulum-v1 values, used with --env Pendulum-v1 for every option left at its default
PENDULUM = dict(num_envs=4, rollout_steps=1024, minibatch_size=64, epochs=10, gamma=0.9, gae_lambda=0.95, anneal=False,
                total_steps=300_000, target=-300.0, eval_every=20_480)
# RL-Zoo's LunarLander-v3 values (also its LunarLanderContinuous-v3's): SB3's learning rate and clip
# range, constant; the target is gymnasium's reward threshold
LUNAR_LANDER = dict(num_envs=16, rollout_steps=1024, minibatch_size=64, epochs=4, gamma=0.999, gae_lambda=0.98,
                    entropy_coef=0.01, initial_lr=3e-4, anneal=False, total_steps=1_000_000, target=200.0,
                    eval_every=16_384)
# RL-Zoo's PPO MuJoCo values (hyperparams/ppo.yml of DLR-RM/rl-baselines3-zoo at 22e3ff24, written for the
# -v4 tasks; the -v5 tasks are the same robots): `normalize: true` is observations and rewards; SB3's
# defaults (n_steps 2048, batch 64, 10 epochs, lr 3e-4, clip 0.2, gamma 0.99, GAE 0.95, vf_coef 0.5,
# max_grad_norm 0.5, tanh 64x64, orthogonal) where a task leaves them; constant learning rate and clip range
SB3_MUJOCO = dict(num_envs=1, rollout_steps=2048, minibatch_size=64, epochs=10, initial_lr=3e-4, clip_param=0.2,
                  gamma=0.99, gae_lambda=0.95, entropy_coef=0.0, value_loss_coef=1.0, max_grad_norm=0.5,
                  anneal=False, normalize=True, normalize_reward=True, total_steps=1_000_000, eval_every=10_240,
                  target=None)
_TUNED = dict(pi_arch=(256, 256), vf_arch=(256, 256), activation="relu", ortho_init=False, log_std_init=-2.0)
RL_ZOO = {
    "Pendulum-v1": PENDULUM, "LunarLander-v3": LUNAR_LANDER, "LunarLanderContinuous-v3": LUNAR_LANDER,
    "HalfCheetah-v5": {**SB3_MUJOCO, **_TUNED, "minibatch_size": 64, "rollout_steps": 512, "gamma": 0.98,
                       "initial_lr": 2.0633e-05, "entropy_coef": 0.000401762, "clip_param": 0.1, "epochs": 20,
                       "gae_lambda": 0.92, "max_grad_norm": 0.8, "value_loss_coef": 2 * 0.58096},
    "Hopper-v5": {**SB3_MUJOCO, **_TUNED, "minibatch_size": 32, "rollout_steps": 512, "gamma": 0.999,
                  "initial_lr": 9.80828e-05, "entropy_coef": 0.00229519, "clip_param": 0.2, "epochs": 5,
                  "gae_lambda": 0.99, "max_grad_norm": 0.7, "value_loss_coef": 2 * 0.835671},
    "Walker2d-v5": {**SB3_MUJOCO, "minibatch_size": 32, "rollout_steps": 512, "gamma": 0.99,
                    "initial_lr": 5.05041e-05, "entropy_coef": 0.000585045, "clip_param": 0.1, "epochs": 20,
                    "gae_lambda": 0.95, "max_grad_norm": 1.0, "value_loss_coef": 2 * 0.871923},
    "Ant-v5": SB3_MUJOCO,
    "Swimmer-v5": {**SB3_MUJOCO, "gamma": 0.9999, "num_envs": 4, "rollout_steps": 1024, "minibatch_size": 256,
                   "initial_lr": 6e-4, "gae_lambda": 0.98},
}
# RL-Zoo's PPO atari block (hyperparams/ppo.yml of DLR-RM/rl-baselines3-zoo at 22e3ff24): learning rate
# lin_2.5e-4 and clip range lin_0.1 (both annealed to 0), vf_coef 0.5, ent_coef 0.01
ATARI = dict(num_envs=8, rollout_steps=128, minibatch_size=256, epochs=4, gamma=0.99, gae_lambda=0.95,
             initial_lr=2.5e-4, clip_param=0.1, anneal=True, entropy_coef=0.01, value_loss_coef=1.0,
             total_steps=10_000_000, target=None, eval_every=250_000)


def main(args: Args) -> train.RunSummary:
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    if spaces.image:
        model = CNNActorCritic(spaces.obs_shape, spaces.act_dim)
    else:
        model = MLPActorCritic(spaces.obs_dim, spaces.act_dim, args.hidden, spaces.continuous, args.shared,
                               pi_arch=args.pi_arch, vf_arch=args.vf_arch, activation=args.activation,
                               ortho_init=args.ortho_init, log_std_init=args.log_std_init,
                               normalize_obs=args.normalize)
    ppo = PPO(model, clip_param=args.clip_param, value_loss_coef=args.value_loss_coef,
              entropy_coef=args.entropy_coef, initial_lr=args.initial_lr, max_grad_norm=args.max_grad_norm,
              use_clipped_value_loss=args.use_clipped_value_loss, continuous_action=spaces.continuous)
    trainer = train.OnPolicyTrainer(ppo, args.env, num_envs=args.num_envs, rollout_steps=args.rollout_steps,
                                    gamma=args.gamma, gae_lambda=args.gae_lambda, epochs=args.epochs,
                                    minibatch_size=args.minibatch_size, anneal=args.anneal,
                                    normalize_reward=args.normalize_reward, **args.run_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__, env_defaults=RL_ZOO, atari_defaults=ATARI))
