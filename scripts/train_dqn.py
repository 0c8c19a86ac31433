"""DQN / Double DQN on CartPole-v1.

    python scripts/train_dqn.py --seed 1            # Double DQN (default)
    python scripts/train_dqn.py --seed 1 --no-double

Hyperparameters follow RL-Zoo's DQN CartPole-v1 (one dict below) except ``gradient_steps``: every
``train_every`` (256) env steps the agent takes ``gradient_steps`` Adam steps on minibatches from the
replay memory (64 here, RL-Zoo 128: the same 3 of 3 seeds solve in about as many env steps at half
the compute), and the target network is copied every ``target_every`` env steps. Epsilon decays linearly. Every
``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their mean
reaches ``--target`` or after ``--total-steps``, then the agent is saved to an HDF5 checkpoint.
The last line is a JSON summary of the run.
"""
import argparse
import json
import time

import gymnasium as gym
import numpy as np
import paddle

import parl_lite
from parl_lite.algorithms import DQN
from parl_lite.utils.envs import EpisodeReturns, evaluate
from parl_lite.utils.models import MLPQNetwork
from parl_lite.utils.replay_memory import ReplayMemory
from parl_lite.utils.schedulers import LinearDecayScheduler
from parl_lite.utils.summary import SummaryWriter

ENV_ID = "CartPole-v1"
HP = dict(lr=2.3e-3, gamma=0.99, batch_size=64, memory_size=100_000, learning_starts=1_000, train_every=256,
          gradient_steps=64, target_every=256, epsilon_start=1.0, epsilon_end=0.04, epsilon_steps=8_000,
          hidden=256, total_steps=100_000, target=475.0, eval_every=4_096)


class DQNAgent(parl_lite.Agent):
    """Epsilon-greedy acting and numpy-to-tensor learning around :class:`DQN`."""

    def __init__(self, algorithm: DQN, act_dim: int, seed: int) -> None:
        super().__init__(algorithm)
        self.act_dim = act_dim
        self.rng = np.random.default_rng(seed)

    def predict(self, obs: np.ndarray) -> int:
        with paddle.no_grad():
            return int(self.alg.sample(paddle.to_tensor(obs[None], dtype="float32")).numpy()[0])

    def sample(self, obs: np.ndarray, epsilon: float) -> int:
        if self.rng.random() < epsilon:
            return int(self.rng.integers(self.act_dim))
        return self.predict(obs)

    def learn(self, obs, action, reward, next_obs, terminated) -> float:
        loss = self.alg.learn(paddle.to_tensor(obs), paddle.to_tensor(action), paddle.to_tensor(reward),
                              paddle.to_tensor(next_obs), paddle.to_tensor(terminated))
        return float(loss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--total-steps", type=int, default=HP["total_steps"], help="env steps at most")
    parser.add_argument("--target", type=float, default=HP["target"], help="stop when the evaluation mean reaches this")
    parser.add_argument("--eval-every", type=int, default=HP["eval_every"], help="env steps between evaluations")
    parser.add_argument("--hidden", type=int, default=HP["hidden"], help="units per hidden layer")
    parser.add_argument("--gradient-steps", type=int, default=HP["gradient_steps"], help="Adam steps per training round")
    parser.add_argument("--no-double", dest="double", action="store_false", help="plain DQN targets")
    parser.add_argument("--logdir", help="write TensorBoard events and scalars.csv here")
    parser.add_argument("--save", default="dqn.h5", help="checkpoint written at the end")
    args = parser.parse_args()

    paddle.seed(args.seed)
    writer = SummaryWriter(args.logdir) if args.logdir else None
    env = gym.make(ENV_ID)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.n
    algorithm = DQN(MLPQNetwork(obs_dim, act_dim, args.hidden), gamma=HP["gamma"], lr=HP["lr"], double=args.double)
    agent = DQNAgent(algorithm, act_dim, seed=args.seed)
    memory = ReplayMemory(HP["memory_size"], obs_dim=obs_dim, act_dim=0, seed=args.seed)
    epsilon = LinearDecayScheduler(HP["epsilon_start"], HP["epsilon_steps"], end_value=HP["epsilon_end"])
    returns_log = EpisodeReturns(1)

    obs, _ = env.reset(seed=args.seed)
    train_seconds, score, solved_at, loss = 0.0, float("nan"), None, float("nan")
    started = time.perf_counter()
    for step in range(1, args.total_steps + 1):
        action = agent.sample(obs, epsilon.value_at(step))
        next_obs, reward, terminated, truncated, _ = env.step(action)
        memory.append(obs, action, reward, next_obs, terminated)
        returns_log.update(np.array([reward]), np.array([terminated or truncated]))
        obs = env.reset()[0] if terminated or truncated else next_obs

        if step >= HP["learning_starts"] and step % HP["train_every"] == 0:
            for _ in range(args.gradient_steps):
                loss = agent.learn(*memory.sample_batch(HP["batch_size"]))
        if step % HP["target_every"] == 0:
            algorithm.sync_target()

        if step % args.eval_every == 0 or step == args.total_steps:
            train_seconds += time.perf_counter() - started
            score = float(np.mean(evaluate(ENV_ID, agent.predict, episodes=10, seed=10_000 + 100 * args.seed)))
            if writer:
                writer.add_scalar("eval/return", score, step)
                writer.add_scalar("train/return", returns_log.recent_mean, step)
            print(f"steps {step:7d}  {step / train_seconds:6.0f} steps/s  train return {returns_log.recent_mean:7.1f}  "
                  f"eval {score:7.1f}  loss {loss:.4f}  epsilon {epsilon.value_at(step):.3f}  {train_seconds:6.1f}s", flush=True)
            started = time.perf_counter()
            if score >= args.target:
                solved_at = step
                break
    if writer:
        writer.close()
    agent.save(args.save)
    print(json.dumps({"algo": "DDQN" if args.double else "DQN", "env": ENV_ID, "seed": args.seed, "steps": step,
                      "solved_at": solved_at, "train_seconds": round(train_seconds, 2), "eval_return": score,
                      "checkpoint": args.save}), flush=True)


if __name__ == "__main__":
    main()
