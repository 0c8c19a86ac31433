"""DQN / Double DQN on any Gymnasium environment with discrete actions (CartPole-v1 by default).

    python scripts/examples/train_dqn.py --seed 1            # Double DQN (default)
    python scripts/examples/train_dqn.py --seed 1 --no-double
    python scripts/examples/train_dqn.py --env Acrobot-v1 --seed 1    # RL-Zoo's Acrobot values: see RL_ZOO
    python scripts/examples/train_dqn.py --env PongNoFrameskip-v4     # Atari (pip install '.[atari]'): see ATARI

Hyperparameters follow RL-Zoo's DQN CartPole-v1 except ``gradient_steps``: every ``train_every``
(256) env steps the agent takes ``gradient_steps`` Adam steps on minibatches from the replay memory
(64 here, RL-Zoo 128: the same 3 of 3 seeds solve in about as many env steps at half the compute),
and the target network is copied every ``target_every`` env steps. Epsilon decays linearly. The
tasks of ``RL_ZOO`` take RL-Zoo's values for every option left at its default; another environment
takes CartPole-v1's values and, as its target, gymnasium's reward threshold for it. An Atari game
(``PongNoFrameskip-v4``, ``ALE/Pong-v5``) learns from DeepMind's preprocessed frames
(:mod:`parl_lite.env.atari`) with the Nature DQN (:class:`parl_lite.utils.models.CNNQNetwork`), a
replay memory that keeps each frame once, and the RL Zoo's Atari values (``ATARI``). Every
``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their mean
reaches ``--target`` or after ``--total-steps``. The last line is the run's JSON summary.
"""
import dataclasses

import paddle

from parl_lite import train
from parl_lite.algorithms import DDQN, DQN
from parl_lite.algorithms.onnx_target import TARGET_RUNTIMES
from parl_lite.train import arg
from parl_lite.utils.models import CNNQNetwork, MLPQNetwork


@dataclasses.dataclass
class Args(train.TrainArgs):
    env: str = arg("CartPole-v1", "gymnasium id")
    double: bool = arg(True, "Double DQN targets (--no-double: plain DQN)")
    lr: float = arg(2.3e-3, "Adam learning rate")
    gamma: float = arg(0.99, "discount")
    batch_size: int = arg(64, "minibatch size")
    memory_size: int = arg(100_000, "replay capacity")
    learning_starts: int = arg(1_000, "env steps before the first update")
    train_every: int = arg(256, "env steps between rounds of updates")
    gradient_steps: int = arg(64, "Adam steps per round")
    target_every: int = arg(256, "env steps between target-network copies")
    epsilon_start: float = arg(1.0, "initial exploration rate")
    epsilon_end: float = arg(0.04, "final exploration rate")
    epsilon_steps: int = arg(8_000, "env steps of the linear epsilon decay")
    max_grad_norm: float = arg(10.0, "global gradient-norm clip (of the Huber loss, as SB3)")
    hidden: int = arg(256, "units per hidden layer")
    target_runtime: str = arg("paddle", "where the target network runs (onnxruntime: its weights as constants, "
                              "rebuilt at each copy)", choices=TARGET_RUNTIMES)
    target: float | None = 475.0
    eval_every: int = 4_096
    save: str | None = "dqn.h5"


def main(args: Args) -> train.RunSummary:
    paddle.seed(args.seed)
    spaces = train.env_spaces(args.env)
    algorithm = DDQN if args.double else DQN
    model = (CNNQNetwork(spaces.obs_shape, spaces.act_dim) if spaces.image
             else MLPQNetwork(spaces.obs_dim, spaces.act_dim, args.hidden))
    dqn = algorithm(model, gamma=args.gamma, lr=args.lr, loss="huber", max_grad_norm=args.max_grad_norm,
                    target_runtime=args.target_runtime)
    exploration = train.EpsilonGreedy(spaces.act_dim, args.epsilon_start, args.epsilon_end, args.epsilon_steps,
                                      seed=args.seed)
    trainer = train.OffPolicyTrainer(dqn, args.env, exploration=exploration, learning_starts=args.learning_starts,
                                     train_every=args.train_every, gradient_steps=args.gradient_steps,
                                     batch_size=args.batch_size, memory_size=args.memory_size,
                                     target_every=args.target_every, name="DDQN" if args.double else "DQN",
                                     **args.run_options())
    return trainer.run(args.total_steps, progress_bar=args.progress_bar)


# RL-Zoo's DQN values; its gradient_steps -1 (as many as the env steps of a round) is train_every, its
# exploration_fraction times n_timesteps is epsilon_steps; the targets are gymnasium's reward thresholds
ACROBOT = dict(lr=6.3e-4, batch_size=128, memory_size=50_000, learning_starts=0, gamma=0.99, target_every=250,
               train_every=4, gradient_steps=4, epsilon_steps=12_000, epsilon_end=0.1, total_steps=100_000,
               target=-100.0)
RL_ZOO = {"Acrobot-v1": ACROBOT, "LunarLander-v3": {**ACROBOT, "target": 200.0},
          "MountainCar-v0": dict(lr=4e-3, batch_size=128, memory_size=10_000, learning_starts=1_000, gamma=0.98,
                                 target_every=600, train_every=16, gradient_steps=8, epsilon_steps=24_000,
                                 epsilon_end=0.07, total_steps=120_000, target=-110.0)}

# RL-Zoo's DQN atari block (hyperparams/dqn.yml of DLR-RM/rl-baselines3-zoo at 22e3ff24): 1e7 steps, its
# exploration_fraction 0.1 of them is epsilon_steps. The target network, copied every 1,000 steps, runs in
# onnxruntime: half paddle's CPU for its forward pass on 32 frames (benchmarks/2026-11-29-dqn-target-in-onnxruntime.md)
ATARI = dict(lr=1e-4, batch_size=32, memory_size=100_000, learning_starts=100_000, target_every=1_000, train_every=4,
             gradient_steps=1, epsilon_steps=1_000_000, epsilon_end=0.01, total_steps=10_000_000, target=None,
             eval_every=250_000, target_runtime="onnxruntime")


if __name__ == "__main__":
    main(train.parse_args(Args, __doc__, env_defaults=RL_ZOO, atari_defaults=ATARI))
