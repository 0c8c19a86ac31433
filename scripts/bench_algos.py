"""Throughput of every algorithm: environment steps/s while acting and learner updates/s.

    python scripts/bench_algos.py [--seconds 1.5]

Prints ONE JSON line. Measured side by side in this run:
- ``baseline``: the same vector environments stepped with random actions (the ceiling for acting);
- per algorithm, ``env_steps_per_s``: acting with the algorithm's policy as its script does
  (PPO/A2C: the vector rollout; DQN, DDPG, TD3, SAC: one environment, one action per step);
  ``updates_per_s``: gradient steps on a batch of the script's size; A3C and IMPALA run their
  whole pipeline (2 remote rollout actors + the learner here) and report both rates end to end.
"""
import argparse
import concurrent.futures
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict

import gymnasium as gym
import numpy as np
import paddle

sys.path.insert(0, str(Path(__file__).parent))  # the DDPG/TD3/SAC scripts' models

import parl_lite  # noqa: E402
from parl_lite.algorithms import A2C, DQN, IMPALA, PPO  # noqa: E402
from parl_lite.utils.models import MLPActorCritic, MLPQNetwork  # noqa: E402
from parl_lite.utils.rollout import RolloutWorker, VectorRollout  # noqa: E402


def rate(fn: Callable[[], int], seconds: float, warmup: int = 3) -> float:
    """Units per second of ``fn`` (which returns how many units one call did), timed for at least
    ``seconds`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    units, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        units += fn()
    return units / (time.perf_counter() - started)


def random_vector_steps(env_id: str, num_envs: int, seconds: float) -> float:
    rollout = VectorRollout(env_id, num_envs, seed=0)
    space = rollout.env.action_space
    return rate(lambda: (rollout.env.step(space.sample()), num_envs)[1], seconds)


def random_single_steps(env_id: str, seconds: float) -> float:
    env = gym.make(env_id)
    env.reset(seed=0)

    def step() -> int:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
        return 1
    return rate(step, seconds)


def sample_numpy(algorithm):
    def policy(obs):
        actions, log_probs = algorithm.sample(paddle.to_tensor(obs, dtype="float32"))
        return actions.numpy(), log_probs.numpy()
    return policy


def on_policy(name: str, algorithm, env_id: str, num_envs: int, steps: int, batch: int, seconds: float) -> Dict:
    """Acting rate of a vector rollout and update rate on a ``batch``-sized minibatch."""
    rollout = VectorRollout(env_id, num_envs, seed=0)
    policy = sample_numpy(algorithm)
    env_rate = rate(lambda: rollout.collect(policy, steps)["rewards"].size, seconds)
    data = rollout.collect(policy, max(1, batch // num_envs))
    obs = data["obs"].reshape(-1, data["obs"].shape[-1])[:batch]
    actions = data["actions"].reshape(-1, *data["actions"].shape[2:])[:batch]
    rng = np.random.default_rng(0)
    adv, ret = rng.normal(size=len(obs)).astype("float32"), rng.normal(size=len(obs)).astype("float32")
    if name.startswith("PPO"):
        algorithm.epochs, algorithm.batch_size = 1, len(obs)
        update = lambda: (algorithm.learn(obs, actions, data["log_probs"].reshape(-1)[:batch], adv, ret, ret), 1)[1]
    else:
        update = lambda: (algorithm.learn(obs, actions, adv, ret), 1)[1]
    return {"env_steps_per_s": round(env_rate), "updates_per_s": round(rate(update, seconds)), "batch": len(obs)}


def dqn(seconds: float) -> Dict:
    algorithm = DQN(MLPQNetwork(4, 2, 256), gamma=0.99, lr=2.3e-3, double=True)
    env = gym.make("CartPole-v1")
    state = {"obs": env.reset(seed=0)[0]}

    def act() -> int:
        with paddle.no_grad():
            action = int(algorithm.sample(paddle.to_tensor(state["obs"][None], dtype="float32")).numpy()[0])
        obs, _, terminated, truncated, _ = env.step(action)
        state["obs"] = env.reset()[0] if terminated or truncated else obs
        return 1
    rng = np.random.default_rng(0)
    batch = [paddle.to_tensor(x) for x in (rng.normal(size=(64, 4)).astype("float32"), rng.integers(0, 2, 64),
                                           np.ones(64, "float32"), rng.normal(size=(64, 4)).astype("float32"),
                                           np.zeros(64, bool))]
    return {"env_steps_per_s": round(rate(act, seconds)),
            "updates_per_s": round(rate(lambda: (algorithm.learn(*batch), 1)[1], seconds)), "batch": 64}


def remote_pipeline(name: str, seconds: float, actors: int = 2) -> Dict:
    """The A3C / IMPALA loop of the scripts, end to end, for ``seconds`` after a warm-up."""
    model_fn = functools.partial(MLPActorCritic, 4, 2, 64)
    if name == "A3C":
        algorithm, steps = A2C(model_fn()), 5
        from parl_lite.utils.gae import gae

        def learn(batch):
            T, N = batch["rewards"].shape
            with paddle.no_grad():
                both = algorithm.value(paddle.to_tensor(np.concatenate([batch["obs"], batch["next_obs"]]).reshape(2 * T * N, -1))).numpy().reshape(2 * T, N)
            adv, ret = gae(batch["rewards"], both[:T], both[T:], batch["terminated"], batch["ends"], 0.99, 1.0)
            algorithm.learn(batch["obs"].reshape(T * N, -1), batch["actions"].reshape(-1), adv.reshape(-1), ret.reshape(-1))
    else:
        algorithm, steps = IMPALA(model_fn()), 10

        def learn(batch):
            algorithm.learn(batch["obs"], batch["actions"], batch["log_probs"], batch["rewards"], batch["terminated"],
                            batch["ends"], batch["next_obs"])
    remote_worker = parl_lite.remote_class(RolloutWorker, wait=False)
    workers = [remote_worker(model_fn, "CartPole-v1", 8, seed=i) for i in range(actors)]
    pending = {worker.collect(algorithm.get_weights(), steps): worker for worker in workers}
    counts = {"steps": 0, "updates": 0}

    def one_update() -> int:
        done, _ = parl_lite.wait(list(pending), return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            worker = pending.pop(future)
            batch = future.result()
            learn(batch)
            counts["steps"] += batch["rewards"].size
            counts["updates"] += 1
            pending[worker.collect(algorithm.get_weights(), steps)] = worker
        return 1

    for _ in range(5):
        one_update()
    counts.update(steps=0, updates=0)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        one_update()
    elapsed = time.perf_counter() - started
    parl_lite.get(list(pending))
    for worker in workers:
        worker.close()
    return {"env_steps_per_s": round(counts["steps"] / elapsed), "updates_per_s": round(counts["updates"] / elapsed),
            "actors": actors, "batch": 8 * steps}


def continuous(name: str, seconds: float) -> Dict:
    """DDPG / TD3 / SAC as their scripts build them (scripts/<name>_pendulum.py)."""
    module = __import__(f"{name.lower()}_pendulum")
    agent = module.make_agent(3, 1, argparse.Namespace(seed=0, **module.HYPERPARAMETERS))
    env = gym.make("Pendulum-v1")
    state = {"obs": env.reset(seed=0)[0]}

    def act() -> int:
        obs, _, terminated, truncated, _ = env.step(agent.sample(state["obs"]) * 2.0)
        state["obs"] = env.reset()[0] if terminated or truncated else obs
        return 1
    rng = np.random.default_rng(0)
    batch = (rng.normal(size=(256, 3)).astype("float32"), rng.uniform(-1, 1, (256, 1)).astype("float32"),
             rng.normal(size=256).astype("float32"), rng.normal(size=(256, 3)).astype("float32"), np.zeros(256, bool))
    return {"env_steps_per_s": round(rate(act, seconds)),
            "updates_per_s": round(rate(lambda: (agent.learn(*batch), 1)[1], seconds)), "batch": 256}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.5, help="timing window of each measurement")
    args = parser.parse_args()
    s = args.seconds
    paddle.seed(0)
    load_before = os.getloadavg()[0]
    result = {
        "baseline": {
            "cartpole_8_envs_random_steps_per_s": round(random_vector_steps("CartPole-v1", 8, s)),
            "cartpole_1_env_random_steps_per_s": round(random_single_steps("CartPole-v1", s)),
            "pendulum_4_envs_random_steps_per_s": round(random_vector_steps("Pendulum-v1", 4, s)),
            "pendulum_1_env_random_steps_per_s": round(random_single_steps("Pendulum-v1", s)),
        },
        "PPO_CartPole": on_policy("PPO", PPO(MLPActorCritic(4, 2, 64)), "CartPole-v1", 8, 32, 256, s),
        "PPO_Pendulum": on_policy("PPO", PPO(MLPActorCritic(3, 1, 64, continuous=True)), "Pendulum-v1", 4, 32, 64, s),
        "A2C_CartPole": on_policy("A2C", A2C(MLPActorCritic(4, 2, 64)), "CartPole-v1", 8, 5, 40, s),
        "DQN_CartPole": dqn(s),
        "A3C_CartPole": remote_pipeline("A3C", 2 * s),
        "IMPALA_CartPole": remote_pipeline("IMPALA", 2 * s),
    }
    for name in ("DDPG", "TD3", "SAC"):
        result[f"{name}_Pendulum"] = continuous(name, s)
    result["machine"] = {"cpus": os.cpu_count(), "load_avg_1min_before": round(load_before, 2),
                         "load_avg_1min_after": round(os.getloadavg()[0], 2)}
    parl_lite.shutdown()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
