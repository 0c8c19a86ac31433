"""PPO on a Gymnasium environment (CartPole-v1: discrete; Pendulum-v1: diagonal Gaussian).

    python scripts/train_ppo.py --env CartPole-v1 --seed 1
    python scripts/train_ppo.py --env Pendulum-v1 --seed 1

Hyperparameters are RL-Zoo's for each environment (one dict below). Every ``--eval-every`` env
steps the greedy policy plays 10 episodes; training stops when their mean reaches ``--target``
(default: the environment's threshold) or after ``--total-steps``, then the agent is saved to an
HDF5 checkpoint. The last line is a JSON summary of the run.
"""
import argparse
import json
import time
from typing import Dict

import numpy as np
import paddle

import parl_lite
from parl_lite.algorithms import PPO
from parl_lite.utils.envs import evaluate
from parl_lite.utils.gae import gae
from parl_lite.utils.models import MLPActorCritic
from parl_lite.utils.rollout import VectorRollout
from parl_lite.utils.schedulers import LinearDecayScheduler
from parl_lite.utils.summary import SummaryWriter

HYPERPARAMS: Dict[str, dict] = {
    "CartPole-v1": dict(num_envs=8, rollout_steps=32, batch_size=256, epochs=20, gamma=0.98, gae_lambda=0.8,
                        lr=1e-3, clip_param=0.2, anneal=True, entropy_coef=0.0, value_coef=0.5,
                        max_grad_norm=0.5, hidden=64, total_steps=100_000, target=475.0, eval_every=2_560),
    "Pendulum-v1": dict(num_envs=4, rollout_steps=1024, batch_size=64, epochs=10, gamma=0.9, gae_lambda=0.95,
                        lr=1e-3, clip_param=0.2, anneal=False, entropy_coef=0.0, value_coef=0.5,
                        max_grad_norm=0.5, hidden=64, total_steps=300_000, target=-300.0, eval_every=20_480),
}


class PPOAgent(parl_lite.Agent):
    """Numpy in, numpy out around :class:`PPO`."""

    def sample(self, obs: np.ndarray):
        actions, log_probs = self.alg.sample(paddle.to_tensor(obs, dtype="float32"))
        return actions.numpy(), log_probs.numpy()

    def predict(self, obs: np.ndarray) -> np.ndarray:
        with paddle.no_grad():
            return self.alg.predict(paddle.to_tensor(obs[None], dtype="float32")).numpy()[0]

    def value(self, obs: np.ndarray) -> np.ndarray:
        with paddle.no_grad():
            return self.alg.value(paddle.to_tensor(obs, dtype="float32")).numpy()

    def learn(self, **batch: np.ndarray) -> Dict[str, float]:
        return self.alg.learn(**batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartPole-v1", choices=sorted(HYPERPARAMS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--total-steps", type=int, help="env steps at most (default: per environment)")
    parser.add_argument("--target", type=float, help="stop when the evaluation mean reaches this")
    parser.add_argument("--eval-every", type=int, help="env steps between evaluations")
    parser.add_argument("--rollout-steps", type=int, help="steps per environment between updates")
    parser.add_argument("--shared", action="store_true", help="one trunk for policy and value")
    parser.add_argument("--kl-target", type=float, help="add the adaptive KL penalty with this target")
    parser.add_argument("--logdir", help="write TensorBoard events and scalars.csv here")
    parser.add_argument("--save", default="ppo.h5", help="checkpoint written at the end")
    args = parser.parse_args()
    hp = dict(HYPERPARAMS[args.env])
    for key in ("total_steps", "target", "eval_every", "rollout_steps"):
        if getattr(args, key) is not None:
            hp[key] = getattr(args, key)

    paddle.seed(args.seed)
    writer = SummaryWriter(args.logdir) if args.logdir else None
    rollout = VectorRollout(args.env, hp["num_envs"], seed=args.seed)
    space = rollout.env.single_action_space
    obs_dim = rollout.env.single_observation_space.shape[0]
    act_dim = space.shape[0] if rollout.continuous else space.n
    model = MLPActorCritic(obs_dim, act_dim, hp["hidden"], rollout.continuous, args.shared)
    algorithm = PPO(model, clip_param=hp["clip_param"], lr=hp["lr"], epochs=hp["epochs"], batch_size=hp["batch_size"],
                    value_coef=hp["value_coef"], entropy_coef=hp["entropy_coef"], max_grad_norm=hp["max_grad_norm"],
                    kl_coef=0.2 if args.kl_target else 0.0, kl_target=args.kl_target, seed=args.seed)
    agent = PPOAgent(algorithm)

    T, N = hp["rollout_steps"], hp["num_envs"]
    num_updates = max(1, hp["total_steps"] // (T * N))
    schedule = LinearDecayScheduler(1.0, num_updates, end_value=0.0 if hp["anneal"] else 1.0)
    train_seconds, last_eval, score, solved_at = 0.0, 0, float("nan"), None
    for update in range(num_updates):
        started = time.perf_counter()
        fraction = schedule.value_at(update)
        algorithm.optimizer.set_lr(hp["lr"] * fraction)
        algorithm.clip_param = hp["clip_param"] * max(fraction, 1e-3)
        batch = rollout.collect(agent.sample, T)
        values = agent.value(batch["obs"].reshape(T * N, -1)).reshape(T, N)
        next_values = agent.value(batch["next_obs"].reshape(T * N, -1)).reshape(T, N)
        advantages, returns = gae(batch["rewards"], values, next_values, batch["terminated"], batch["ends"],
                                  hp["gamma"], hp["gae_lambda"])
        stats = agent.learn(obs=batch["obs"].reshape(T * N, -1), actions=batch["actions"].reshape(T * N, *batch["actions"].shape[2:]),
                            log_probs=batch["log_probs"].reshape(-1), advantages=advantages.reshape(-1),
                            returns=returns.reshape(-1), values=values.reshape(-1))
        steps = rollout.steps
        train_seconds += time.perf_counter() - started

        if steps - last_eval >= hp["eval_every"] or update == num_updates - 1:
            last_eval = steps
            score = float(np.mean(evaluate(args.env, agent.predict, episodes=10, seed=10_000 + 100 * args.seed)))
            if writer:
                writer.add_scalar("eval/return", score, steps)
                writer.add_scalar("train/return", rollout.returns.recent_mean, steps)
            print(f"steps {steps:7d}  {steps / train_seconds:6.0f} steps/s  train return {rollout.returns.recent_mean:7.1f}  "
                  f"eval {score:7.1f}  kl {stats['kl']:.4f}  clip {stats['clip_fraction']:.2f}  {train_seconds:6.1f}s", flush=True)
            if score >= hp["target"]:
                solved_at = steps
                break
    if writer:
        writer.close()
    agent.save(args.save)
    print(json.dumps({"algo": "PPO", "env": args.env, "seed": args.seed, "steps": steps, "solved_at": solved_at,
                      "train_seconds": round(train_seconds, 2), "eval_return": score, "checkpoint": args.save}), flush=True)


if __name__ == "__main__":
    main()
