"""A3C on CartPole-v1: rollout actors are ``@remote_class`` actors on the process pool.

    python scripts/train_a3c.py --seed 1 --actors 2

Each actor owns ``num_envs`` environments and a copy of the policy. The learner (this process)
takes whichever rollout arrives first, takes one A2C step on it (values and n-step returns from
its current critic), and sends the new weights back with that actor's next request -- so actors
play with weights up to ``actors - 1`` updates old, as in asynchronous A3C. Update order depends on
timing, so unlike the single-process scripts a seed does not repeat a run exactly.

Every ``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their
mean reaches ``--target`` or after ``--total-steps``; the agent is saved to an HDF5 checkpoint.
The last line is a JSON summary of the run.
"""
import argparse
import concurrent.futures
import functools
import json
import time

import numpy as np
import paddle

import parl_lite
from parl_lite.algorithms import A2C
from parl_lite.utils.envs import evaluate
from parl_lite.utils.gae import gae
from parl_lite.utils.models import MLPActorCritic
from parl_lite.utils.rollout import RolloutWorker
from parl_lite.utils.summary import SummaryWriter

ENV_ID = "CartPole-v1"
HP = dict(num_envs=8, rollout_steps=5, gamma=0.99, gae_lambda=1.0, lr=7e-4, value_coef=0.5, entropy_coef=0.0,
          max_grad_norm=0.5, hidden=64, total_steps=500_000, target=475.0, eval_every=5_000)

RemoteRolloutWorker = parl_lite.remote_class(RolloutWorker, wait=False)


class A3CAgent(parl_lite.Agent):
    """The learner's side: values for the returns, greedy actions for evaluation, updates."""

    def predict(self, obs: np.ndarray) -> int:
        with paddle.no_grad():
            return int(self.alg.predict(paddle.to_tensor(obs[None], dtype="float32")).numpy()[0])

    def value(self, obs: np.ndarray) -> np.ndarray:
        with paddle.no_grad():
            return self.alg.value(paddle.to_tensor(obs, dtype="float32")).numpy()

    def learn(self, batch: dict) -> dict:
        """One A2C step on a ``[T, N]`` rollout from an actor."""
        T, N = batch["rewards"].shape
        both = self.value(np.concatenate([batch["obs"], batch["next_obs"]]).reshape(2 * T * N, -1)).reshape(2 * T, N)
        advantages, returns = gae(batch["rewards"], both[:T], both[T:], batch["terminated"], batch["ends"],
                                  HP["gamma"], HP["gae_lambda"])
        return self.alg.learn(batch["obs"].reshape(T * N, -1), batch["actions"].reshape(-1),
                              advantages.reshape(-1), returns.reshape(-1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--actors", type=int, default=2, help="remote rollout actors")
    parser.add_argument("--total-steps", type=int, default=HP["total_steps"], help="env steps at most")
    parser.add_argument("--target", type=float, default=HP["target"], help="stop when the evaluation mean reaches this")
    parser.add_argument("--eval-every", type=int, default=HP["eval_every"], help="env steps between evaluations")
    parser.add_argument("--logdir", help="write TensorBoard events and scalars.csv here")
    parser.add_argument("--save", default="a3c.h5", help="checkpoint written at the end")
    args = parser.parse_args()
    if args.actors <= 0:
        parser.error(f"--actors must be positive, got {args.actors}")

    paddle.seed(args.seed)
    writer = SummaryWriter(args.logdir) if args.logdir else None
    obs_dim, act_dim = 4, 2
    model_fn = functools.partial(MLPActorCritic, obs_dim, act_dim, HP["hidden"])
    algorithm = A2C(model_fn(), lr=HP["lr"], value_coef=HP["value_coef"], entropy_coef=HP["entropy_coef"],
                    max_grad_norm=HP["max_grad_norm"])
    agent = A3CAgent(algorithm)

    started = time.perf_counter()
    actors = [RemoteRolloutWorker(model_fn, ENV_ID, HP["num_envs"], seed=args.seed * 1000 + 100 * i)
              for i in range(args.actors)]
    weights = agent.get_weights()
    pending = {actor.collect(weights, HP["rollout_steps"]): actor for actor in actors}
    steps, updates, last_eval, score, solved_at, recent = 0, 0, 0, float("nan"), None, []
    train_seconds = 0.0
    while steps < args.total_steps:
        done, _ = parl_lite.wait(list(pending), return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            actor = pending.pop(future)
            batch = future.result()
            agent.learn(batch)
            updates += 1
            steps += batch["rewards"].size
            recent = (recent + batch["episode_returns"].tolist())[-20:]
            pending[actor.collect(agent.get_weights(), HP["rollout_steps"])] = actor

        if steps - last_eval >= args.eval_every or steps >= args.total_steps:
            train_seconds += time.perf_counter() - started
            last_eval = steps
            score = float(np.mean(evaluate(ENV_ID, agent.predict, episodes=10, seed=10_000 + 100 * args.seed)))
            if writer:
                writer.add_scalar("eval/return", score, steps)
                writer.add_scalar("train/return", np.mean(recent) if recent else float("nan"), steps)
            print(f"steps {steps:7d}  {steps / train_seconds:6.0f} steps/s  {updates / train_seconds:5.0f} updates/s  "
                  f"train return {np.mean(recent) if recent else float('nan'):7.1f}  eval {score:7.1f}  "
                  f"{train_seconds:6.1f}s", flush=True)
            started = time.perf_counter()
            if score >= args.target:
                solved_at = steps
                break
    parl_lite.get(list(pending))  # let in-flight rollouts finish before the actors stop
    for actor in actors:
        actor.close()
    if writer:
        writer.close()
    agent.save(args.save)
    print(json.dumps({"algo": "A3C", "env": ENV_ID, "seed": args.seed, "actors": args.actors, "steps": steps,
                      "solved_at": solved_at, "train_seconds": round(train_seconds, 2), "eval_return": score,
                      "checkpoint": args.save}), flush=True)
    parl_lite.shutdown()


if __name__ == "__main__":
    main()
