"""The asynchronous learner loop shared by ``train_a3c.py`` and ``train_impala.py``.

Rollout actors (``@remote_class`` :class:`RolloutWorker`) play with the weights they were last
sent; the learner (this process) takes whichever rollout arrives first, learns from it and sends
the new weights back with that actor's next request. Each script defines its agent and algorithm
and calls :func:`main`.
"""
import argparse
import concurrent.futures
import json
import time
from typing import Callable

import numpy as np

import parl_lite
from parl_lite.utils.envs import evaluate
from parl_lite.utils.rollout import RolloutWorker
from parl_lite.utils.summary import SummaryWriter

ENV_ID = "CartPole-v1"
RemoteRolloutWorker = parl_lite.remote_class(RolloutWorker, wait=False)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def make_parser(doc: str, defaults: dict, save: str) -> argparse.ArgumentParser:
    """The command line both scripts take."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--actors", type=_positive_int, default=2, help="remote rollout actors")
    parser.add_argument("--total-steps", type=int, default=defaults["total_steps"], help="env steps at most")
    parser.add_argument("--target", type=float, default=defaults["target"],
                        help="stop when the evaluation mean reaches this")
    parser.add_argument("--eval-every", type=int, default=defaults["eval_every"], help="env steps between evaluations")
    parser.add_argument("--logdir", help="write TensorBoard events and scalars.csv here")
    parser.add_argument("--save", default=save, help="checkpoint written at the end")
    return parser


def main(name: str, args: argparse.Namespace, agent: parl_lite.Agent, model_fn: Callable[[], parl_lite.Model],
         num_envs: int, unroll: int, describe: Callable[[dict], str] = lambda stats: "") -> None:
    """Train ``agent`` from ``args.actors`` remote rollout actors until the target or the step budget.

    Args:
        name: the algorithm's name in the summary line.
        agent: its ``learn(batch)`` takes one actor's ``[unroll, num_envs]`` rollout and returns stats.
        model_fn: builds the actors' copies of the model.
        describe: extra text for the progress line from the last ``learn`` stats.
    """
    writer = SummaryWriter(args.logdir) if args.logdir else None
    started = time.perf_counter()
    actors = [RemoteRolloutWorker(model_fn, ENV_ID, num_envs, seed=args.seed * 1000 + 100 * i)
              for i in range(args.actors)]
    weights = agent.get_weights()
    pending = {actor.collect(weights, unroll): actor for actor in actors}
    steps, updates, last_eval, score, solved_at, recent, stats = 0, 0, 0, float("nan"), None, [], {}
    train_seconds = 0.0
    while steps < args.total_steps:
        done, _ = parl_lite.wait(list(pending), return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            actor = pending.pop(future)
            batch = future.result()
            stats = agent.learn(batch)
            updates += 1
            steps += batch["rewards"].size
            recent = (recent + batch["episode_returns"].tolist())[-20:]
            pending[actor.collect(agent.get_weights(), unroll)] = actor

        if steps - last_eval >= args.eval_every or steps >= args.total_steps:
            train_seconds += time.perf_counter() - started
            last_eval = steps
            score = float(np.mean(evaluate(ENV_ID, agent.predict, episodes=10, seed=10_000 + 100 * args.seed)))
            train_return = np.mean(recent) if recent else float("nan")
            if writer:
                writer.add_scalar("eval/return", score, steps)
                writer.add_scalar("train/return", train_return, steps)
            print(f"steps {steps:7d}  {steps / train_seconds:6.0f} steps/s  {updates / train_seconds:5.0f} updates/s  "
                  f"train return {train_return:7.1f}  eval {score:7.1f}  {describe(stats)}{train_seconds:6.1f}s",
                  flush=True)
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
    print(json.dumps({"algo": name, "env": ENV_ID, "seed": args.seed, "actors": args.actors, "steps": steps,
                      "solved_at": solved_at, "train_seconds": round(train_seconds, 2), "eval_return": score,
                      "checkpoint": args.save}), flush=True)
    parl_lite.shutdown()
