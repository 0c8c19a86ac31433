"""The off-policy training loop shared by ``ddpg_pendulum.py``, ``td3_pendulum.py`` and
``sac_pendulum.py``: environment, exploration, replay, evaluation, progress and checkpoint.

Each script only defines its model and its algorithm's hyperparameters and calls :func:`main`.
Algorithms act in [-1, 1]; this loop scales actions to the environment's bounds.
"""
import argparse
import json
import time
from typing import Callable, List, Optional

import gymnasium as gym
import numpy as np
import paddle

import parl_lite
from parl_lite.utils.replay_memory import ReplayMemory


def mlp(in_dim: int, hidden: int, out_dim: int) -> paddle.nn.Sequential:
    """Two hidden ReLU layers."""
    return paddle.nn.Sequential(
        paddle.nn.Linear(in_dim, hidden), paddle.nn.ReLU(),
        paddle.nn.Linear(hidden, hidden), paddle.nn.ReLU(),
        paddle.nn.Linear(hidden, out_dim),
    )


class ContinuousAgent(parl_lite.Agent):
    """Numpy in, numpy out around DDPG / TD3 / SAC.

    Args:
        algorithm: the algorithm.
        act_dim: action dimension.
        exploration_noise: standard deviation of the Gaussian noise added to the deterministic
            action in ``sample`` (DDPG, TD3); ``None`` samples from the algorithm's own stochastic
            policy instead (SAC).
        seed: seed of the exploration noise.
    """

    def __init__(self, algorithm: parl_lite.Algorithm, act_dim: int, exploration_noise: Optional[float],
                 seed: int) -> None:
        super().__init__(algorithm)
        self.act_dim = act_dim
        self.exploration_noise = exploration_noise
        self.rng = np.random.default_rng(seed)

    def predict(self, obs: np.ndarray) -> np.ndarray:
        with paddle.no_grad():
            return self.alg.predict(paddle.to_tensor(obs[None], dtype="float32")).numpy()[0]

    def sample(self, obs: np.ndarray) -> np.ndarray:
        if self.exploration_noise is None:
            with paddle.no_grad():
                action, _ = self.alg.sample(paddle.to_tensor(obs[None], dtype="float32"))
            return action.numpy()[0]
        noise = self.rng.normal(0.0, self.exploration_noise, self.act_dim)
        return np.clip(self.predict(obs) + noise, -1.0, 1.0).astype(np.float32)

    def learn(self, obs, action, reward, next_obs, terminated) -> paddle.Tensor:
        """One update from a replay batch (numpy, as ``ReplayMemory.sample_batch`` returns it);
        returns the critic loss."""
        critic_loss, _ = self.alg.learn(
            paddle.to_tensor(obs), paddle.to_tensor(action),
            paddle.to_tensor(reward[:, None]), paddle.to_tensor(next_obs),
            paddle.to_tensor(terminated[:, None].astype(np.float32)),
        )
        return critic_loss


def make_parser(description: str, defaults: dict) -> argparse.ArgumentParser:
    """Command-line options shared by the three scripts, with each algorithm's ``defaults``;
    a script adds its own options to the returned parser."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--total-steps", type=int, default=30_000, help="environment steps at most")
    parser.add_argument("--learning-starts", type=int, default=500, help="uniform random steps before learning")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64, help="units of each of the two hidden layers")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--tau", type=float, default=0.005)
    parser.add_argument("--actor-lr", type=float, default=1e-3)
    parser.add_argument("--critic-lr", type=float, default=1e-3)
    parser.add_argument("--exploration-noise", type=float, default=0.1,
                        help="Gaussian action noise, in units of the action range (DDPG, TD3)")
    parser.add_argument("--eval-every", type=int, default=500, help="environment steps between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--target", type=float, default=-200.0, help="stop once the evaluation mean reaches it")
    parser.add_argument("--log-every", type=int, default=1000, help="environment steps between progress lines")
    parser.add_argument("--save", default=None, help="checkpoint written at the end (default: <algo>_pendulum.h5)")
    parser.set_defaults(**defaults)
    return parser


def evaluate(env: gym.Env, agent: ContinuousAgent, episodes: int, seed: int) -> float:
    """Mean return of the deterministic policy over ``episodes`` episodes (seeds seed, seed+1, ...)."""
    high = env.action_space.high
    totals = []
    for index in range(episodes):
        obs, _ = env.reset(seed=seed + index)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.predict(obs) * high)
            total += float(reward)
            done = terminated or truncated
        totals.append(total)
    return float(np.mean(totals))


def main(name: str, args: argparse.Namespace,
         make_agent: Callable[[int, int, argparse.Namespace], ContinuousAgent]) -> dict:
    """Train ``make_agent(obs_dim, act_dim, args)`` on ``args.env``; print progress, evaluate every
    ``args.eval_every`` steps, stop at ``args.target``, save the agent, print one JSON summary.

    Returns:
        the summary: algorithm, seed, steps, training wall-clock and CPU seconds (evaluations
        excluded; CPU time is the fairer figure on a shared machine), last evaluation mean,
        whether the target was reached, updates per second (wall-clock).
    """
    paddle.seed(args.seed)
    env, eval_env = gym.make(args.env), gym.make(args.env)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    high = env.action_space.high
    agent = make_agent(obs_dim, act_dim, args)
    memory = ReplayMemory(args.total_steps, obs_dim, act_dim, seed=args.seed)
    rng = np.random.default_rng(args.seed)

    eval_seconds, eval_cpu_seconds, update_seconds, updates = 0.0, 0.0, 0.0, 0
    returns: List[float] = []
    episode_return, eval_return, solved, step = 0.0, float("nan"), False, 0
    obs, _ = env.reset(seed=args.seed)
    started, cpu_started = time.perf_counter(), time.process_time()
    for step in range(1, args.total_steps + 1):
        if step <= args.learning_starts:
            action = rng.uniform(-1.0, 1.0, act_dim).astype(np.float32)
        else:
            action = agent.sample(obs)
        next_obs, reward, terminated, truncated, _ = env.step(action * high)
        memory.append(obs, action, reward, next_obs, terminated)
        obs, episode_return = next_obs, episode_return + float(reward)
        if terminated or truncated:
            returns.append(episode_return)
            obs, _ = env.reset()
            episode_return = 0.0

        if step > args.learning_starts:
            update_started = time.perf_counter()
            agent.learn(*memory.sample_batch(args.batch_size))
            update_seconds += time.perf_counter() - update_started
            updates += 1

        if step % args.eval_every == 0:
            eval_started, eval_cpu_started = time.perf_counter(), time.process_time()
            eval_return = evaluate(eval_env, agent, args.eval_episodes, seed=10_000_000 + args.seed * 1000)
            eval_seconds += time.perf_counter() - eval_started
            eval_cpu_seconds += time.process_time() - eval_cpu_started
            solved = eval_return >= args.target
        if step % args.log_every == 0 or solved:
            train_seconds = time.perf_counter() - started - eval_seconds
            recent = np.mean(returns[-5:]) if returns else float("nan")
            rate = updates / update_seconds if update_seconds else float("nan")
            print(f"{name} step {step:6d}  recent return {recent:8.1f}  eval {eval_return:8.1f}  "
                  f"{step / train_seconds:6.0f} steps/s  {rate:5.0f} updates/s  train {train_seconds:6.1f}s  "
                  f"ETA {(args.total_steps - step) * train_seconds / step:5.0f}s", flush=True)
        if solved:
            break
    train_seconds = time.perf_counter() - started - eval_seconds
    train_cpu_seconds = time.process_time() - cpu_started - eval_cpu_seconds

    save_path = args.save or f"{name.lower()}_pendulum.h5"
    agent.save(save_path)
    summary = {"algorithm": name, "env": args.env, "seed": args.seed, "steps": step,
               "train_seconds": round(train_seconds, 1),
               "train_cpu_seconds": round(train_cpu_seconds, 1), "eval_return": round(eval_return, 1),
               "solved": bool(solved), "updates_per_second": round(updates / update_seconds, 1) if updates else None,
               "checkpoint": save_path}
    print(json.dumps(summary), flush=True)
    return summary
