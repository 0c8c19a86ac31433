"""A2C on CartPole-v1: 8 environments stepped in this process, one update per 5 steps.

    python scripts/train_a2c.py --seed 1

Hyperparameters are RL-Zoo's A2C CartPole-v1 (SB3 defaults: RMSprop, n-step returns). Every
``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their mean
reaches ``--target`` or after ``--total-steps``, then the agent is saved to an HDF5 checkpoint.
The last line is a JSON summary of the run.
"""
import argparse
import json
import time
from typing import Dict

import numpy as np
import paddle

import parl_lite
from parl_lite.algorithms import A2C
from parl_lite.utils.envs import evaluate
from parl_lite.utils.gae import gae
from parl_lite.utils.models import MLPActorCritic
from parl_lite.utils.rollout import VectorRollout
from parl_lite.utils.summary import SummaryWriter

ENV_ID = "CartPole-v1"
HP = dict(num_envs=8, rollout_steps=5, gamma=0.99, gae_lambda=1.0, lr=7e-4, value_coef=0.5, entropy_coef=0.0,
          max_grad_norm=0.5, hidden=64, total_steps=500_000, target=475.0, eval_every=5_000)


class A2CAgent(parl_lite.Agent):
    """Numpy in, numpy out around :class:`A2C`."""

    def sample(self, obs: np.ndarray):
        actions, log_probs = self.alg.sample(paddle.to_tensor(obs, dtype="float32"))
        return actions.numpy(), log_probs.numpy()

    def predict(self, obs: np.ndarray) -> int:
        with paddle.no_grad():
            return int(self.alg.predict(paddle.to_tensor(obs[None], dtype="float32")).numpy()[0])

    def value(self, obs: np.ndarray) -> np.ndarray:
        with paddle.no_grad():
            return self.alg.value(paddle.to_tensor(obs, dtype="float32")).numpy()

    def learn(self, **batch: np.ndarray) -> Dict[str, float]:
        return self.alg.learn(**batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--total-steps", type=int, default=HP["total_steps"], help="env steps at most")
    parser.add_argument("--target", type=float, default=HP["target"], help="stop when the evaluation mean reaches this")
    parser.add_argument("--eval-every", type=int, default=HP["eval_every"], help="env steps between evaluations")
    parser.add_argument("--logdir", help="write TensorBoard events and scalars.csv here")
    parser.add_argument("--save", default="a2c.h5", help="checkpoint written at the end")
    args = parser.parse_args()

    paddle.seed(args.seed)
    writer = SummaryWriter(args.logdir) if args.logdir else None
    rollout = VectorRollout(ENV_ID, HP["num_envs"], seed=args.seed)
    obs_dim, act_dim = rollout.env.single_observation_space.shape[0], rollout.env.single_action_space.n
    algorithm = A2C(MLPActorCritic(obs_dim, act_dim, HP["hidden"]), lr=HP["lr"], value_coef=HP["value_coef"],
                    entropy_coef=HP["entropy_coef"], max_grad_norm=HP["max_grad_norm"])
    agent = A2CAgent(algorithm)

    T, N = HP["rollout_steps"], HP["num_envs"]
    train_seconds, last_eval, score, solved_at = 0.0, 0, float("nan"), None
    while rollout.steps < args.total_steps:
        started = time.perf_counter()
        batch = rollout.collect(agent.sample, T)
        # one forward for V(s_t) and V(s_{t+1}): rows 0..T*N-1 are obs, the rest next_obs
        both = agent.value(np.concatenate([batch["obs"], batch["next_obs"]]).reshape(2 * T * N, -1)).reshape(2 * T, N)
        values, next_values = both[:T], both[T:]
        advantages, returns = gae(batch["rewards"], values, next_values, batch["terminated"], batch["ends"],
                                  HP["gamma"], HP["gae_lambda"])
        stats = agent.learn(obs=batch["obs"].reshape(T * N, -1), actions=batch["actions"].reshape(-1),
                            advantages=advantages.reshape(-1), returns=returns.reshape(-1))
        train_seconds += time.perf_counter() - started

        steps = rollout.steps
        if steps - last_eval >= args.eval_every or steps >= args.total_steps:
            last_eval = steps
            score = float(np.mean(evaluate(ENV_ID, agent.predict, episodes=10, seed=10_000 + 100 * args.seed)))
            if writer:
                writer.add_scalar("eval/return", score, steps)
                writer.add_scalar("train/return", rollout.returns.recent_mean, steps)
            print(f"steps {steps:7d}  {steps / train_seconds:6.0f} steps/s  train return {rollout.returns.recent_mean:7.1f}  "
                  f"eval {score:7.1f}  entropy {stats['entropy']:.3f}  {train_seconds:6.1f}s", flush=True)
            if score >= args.target:
                solved_at = steps
                break
    if writer:
        writer.close()
    agent.save(args.save)
    print(json.dumps({"algo": "A2C", "env": ENV_ID, "seed": args.seed, "steps": rollout.steps, "solved_at": solved_at,
                      "train_seconds": round(train_seconds, 2), "eval_return": score, "checkpoint": args.save}), flush=True)


if __name__ == "__main__":
    main()
