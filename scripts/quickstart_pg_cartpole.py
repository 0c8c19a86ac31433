"""PARL's QuickStart on Gymnasium: REINFORCE on CartPole-v1.

    python scripts/quickstart_pg_cartpole.py --seed 1

Trains for up to ``--episodes`` episodes, evaluates the greedy policy every ``--eval-every``
episodes (10 episodes), stops once the evaluation mean reaches ``--target``, and saves the agent
to an HDF5 checkpoint.
"""
import argparse
import time
from typing import List, Tuple

import gymnasium as gym
import numpy as np
import paddle

import parl_lite
from parl_lite.algorithms import PolicyGradient
from parl_lite.utils.returns import discounted_returns


class CartpoleModel(parl_lite.Model):
    """Two-layer softmax policy, as in PARL's QuickStart."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(obs_dim, hidden)
        self.fc2 = paddle.nn.Linear(hidden, act_dim)

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        return paddle.nn.functional.softmax(self.fc2(paddle.tanh(self.fc1(obs))), axis=-1)


class CartpoleAgent(parl_lite.Agent):
    """Numpy in, numpy out around :class:`PolicyGradient`."""

    def __init__(self, algorithm: PolicyGradient, seed: int) -> None:
        super().__init__(algorithm)
        self.rng = np.random.default_rng(seed)

    def _probs(self, obs: np.ndarray) -> np.ndarray:
        with paddle.no_grad():
            return self.alg.predict(paddle.to_tensor(obs[None], dtype="float32")).numpy()[0]

    def sample(self, obs: np.ndarray) -> int:
        probs = self._probs(obs).astype(np.float64)
        return int(self.rng.choice(len(probs), p=probs / probs.sum()))

    def predict(self, obs: np.ndarray) -> int:
        return int(np.argmax(self._probs(obs)))

    def learn(self, obs: np.ndarray, action: np.ndarray, returns: np.ndarray) -> float:
        loss = self.alg.learn(
            paddle.to_tensor(obs, dtype="float32"),
            paddle.to_tensor(action, dtype="int64"),
            paddle.to_tensor(returns, dtype="float32"),
        )
        return float(loss)


def run_episode(env: gym.Env, agent: CartpoleAgent, seed: int) -> Tuple[List, List, List]:
    """Play one episode with exploration; return its observations, actions and rewards."""
    observations, actions, rewards = [], [], []
    obs, _ = env.reset(seed=seed)
    while True:
        action = agent.sample(obs)
        observations.append(obs)
        actions.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        if terminated or truncated:
            return observations, actions, rewards


def evaluate(env: gym.Env, agent: CartpoleAgent, episodes: int, seed: int) -> float:
    """Mean return of the greedy policy over ``episodes`` episodes."""
    totals = []
    for index in range(episodes):
        obs, _ = env.reset(seed=seed + index)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.predict(obs))
            total += reward
            done = terminated or truncated
        totals.append(total)
    return float(np.mean(totals))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--episodes", type=int, default=1000, help="training episodes at most")
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--hidden", type=int, default=20, help="hidden units (PARL: 10 * act_dim)")
    parser.add_argument("--eval-every", type=int, default=20, help="episodes between evaluations")
    parser.add_argument("--target", type=float, default=475.0, help="stop at this evaluation mean")
    parser.add_argument("--save", default="pg_cartpole.h5", help="checkpoint written at the end")
    args = parser.parse_args()

    paddle.seed(args.seed)
    env, eval_env = gym.make("CartPole-v1"), gym.make("CartPole-v1")
    model = CartpoleModel(env.observation_space.shape[0], env.action_space.n, args.hidden)
    agent = CartpoleAgent(PolicyGradient(model, lr=args.lr), seed=args.seed)

    start, steps, recent = time.perf_counter(), 0, []
    for episode in range(1, args.episodes + 1):
        observations, actions, rewards = run_episode(env, agent, seed=args.seed * 100_000 + episode)
        steps += len(rewards)
        recent.append(sum(rewards))
        returns = discounted_returns(rewards, args.gamma, normalize=True)
        agent.learn(np.array(observations), np.array(actions), returns)
        if episode % args.eval_every == 0:
            score = evaluate(eval_env, agent, episodes=10, seed=10_000_000 + args.seed * 1000)
            elapsed = time.perf_counter() - start
            print(f"episode {episode:5d}  steps {steps:7d}  train return {np.mean(recent):6.1f}  "
                  f"eval {score:6.1f}  {steps / elapsed:7.0f} steps/s  {elapsed:6.1f}s", flush=True)
            recent.clear()
            if score >= args.target:
                print(f"solved: seed {args.seed}, episode {episode}, {steps} steps, {elapsed:.1f}s", flush=True)
                break
    agent.save(args.save)
    print(f"saved {args.save}")


if __name__ == "__main__":
    main()
