"""Every algorithm against Stable-Baselines3, side by side in one run, and raw throughputs.

    python scripts/bench_algos.py                          # time to threshold: PPO, A2C, DQN, seed 1
    python scripts/bench_algos.py --algos PPO --seeds 1 2 3
    python scripts/bench_algos.py --mode throughput        # env steps/s and updates/s of all nine

Prints ONE JSON line.

``--mode threshold``: for each seed, each algorithm runs its script (``scripts/train_*.py``, RL-Zoo
hyperparameters, greedy 10-episode evaluation every ``eval_every`` steps, stop at 475) and then,
when ``stable-baselines3`` is importable, SB3's implementation with RL-Zoo's hyperparameters for
CartPole-v1 under the same evaluation protocol (same evaluation seeds and frequency, evaluations
excluded from the time); the runs alternate so that a load change hits both. Each run is a fresh
process (start-up excluded from the figures). torch runs on one thread, as paddle does.

``--mode throughput``: the baseline (the same environments stepped with random actions), and per
algorithm environment steps/s while acting as the loops do and gradient updates/s on a batch of the
loop's size; A3C and IMPALA run their whole loop (2 remote actors + the learner).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

SCRIPTS = Path(__file__).resolve().parent
# script, evaluation interval, RL-Zoo's step budget for SB3
THRESHOLD_RUNS = {"PPO": ("train_ppo.py", 2_560, 100_000), "A2C": ("train_a2c.py", 5_000, 500_000),
                  "DQN": ("train_dqn.py", 4_096, 100_000)}
TARGET = 475.0


# ---------------------------------------------------------------------------------- threshold
def ours_to_threshold(algo: str, seed: int) -> Dict:
    """Run the script; its JSON summary gives steps and training seconds."""
    script = THRESHOLD_RUNS[algo][0]
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, str(SCRIPTS / script), "--seed", str(seed), "--progress-bar",
                               "--save", str(Path(folder) / "run.h5")],
                              capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"steps": summary["solved_at"], "train_s": round(summary["train_seconds"], 2),
            "cpu_s": round(summary["train_cpu_seconds"], 2), "eval_return": summary["eval_return"]}


def sb3_to_threshold(algo: str, seed: int) -> Dict:
    """SB3 with RL-Zoo's CartPole-v1 hyperparameters, in this process (run by a child)."""
    import numpy as np
    import torch
    from stable_baselines3 import A2C, DQN, PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    eval_every, budget = THRESHOLD_RUNS[algo][1:]
    linear = lambda start: (lambda remaining: remaining * start)  # noqa: E731 - SB3's schedule form
    if algo == "PPO":
        model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=seed), n_steps=32, batch_size=256,
                    gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3),
                    clip_range=linear(0.2), seed=seed, device="cpu")
    elif algo == "A2C":
        model = A2C("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=seed), ent_coef=0.0, seed=seed,
                    device="cpu")
    else:
        model = DQN("MlpPolicy", "CartPole-v1", learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                    learning_starts=1_000, gamma=0.99, target_update_interval=10, train_freq=256,
                    gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                    policy_kwargs=dict(net_arch=[256, 256]), seed=seed, device="cpu")

    import gymnasium as gym

    class Threshold(BaseCallback):
        """Our evaluation protocol: 10 greedy episodes from seeds 10_000 + 100 * seed + k."""

        def __init__(self) -> None:
            super().__init__()
            self.last_eval, self.solved_at, self.score = 0, None, float("nan")
            self.eval_seconds = self.eval_cpu_seconds = 0.0
            self.env = gym.make("CartPole-v1")

        def _on_step(self) -> bool:
            if self.num_timesteps - self.last_eval < eval_every:
                return True
            self.last_eval = self.num_timesteps
            started, cpu_started = time.perf_counter(), time.process_time()
            totals = []
            for k in range(10):
                obs, _ = self.env.reset(seed=10_000 + 100 * seed + k)
                total, done = 0.0, False
                while not done:
                    action, _ = self.model.predict(obs, deterministic=True)
                    obs, reward, terminated, truncated, _ = self.env.step(int(action))
                    total, done = total + float(reward), terminated or truncated
                totals.append(total)
            self.score = float(np.mean(totals))
            self.eval_seconds += time.perf_counter() - started
            self.eval_cpu_seconds += time.process_time() - cpu_started
            if self.score >= TARGET:
                self.solved_at = self.num_timesteps
                return False
            return True

    callback = Threshold()
    started, cpu_started = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=budget, callback=callback)
    wall = time.perf_counter() - started - callback.eval_seconds
    cpu = time.process_time() - cpu_started - callback.eval_cpu_seconds
    return {"steps": callback.solved_at, "train_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "eval_return": callback.score}


def threshold_mode(algos: List[str], seeds: List[int]) -> Dict:
    try:
        import stable_baselines3
        sb3_version: Optional[str] = stable_baselines3.__version__
    except ImportError:
        sb3_version = None
    result: Dict = {"sb3": sb3_version or "not installed: pip install stable-baselines3"}
    for seed in seeds:
        for algo in algos:
            row = result.setdefault(f"{algo}_CartPole", {})
            row[f"seed{seed}"] = entry = {"ours": ours_to_threshold(algo, seed)}
            if sb3_version:
                done = subprocess.run([sys.executable, __file__, "--sb3-run", algo, str(seed)],
                                      capture_output=True, text=True, check=True)
                entry["sb3"] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------------------- throughput
def rate(fn: Callable[[], int], seconds: float, warmup: int = 3) -> float:
    """Units per second of ``fn`` (which returns how many units one call did), timed for at least
    ``seconds`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    units, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        units += fn()
    return units / (time.perf_counter() - started)


def throughput_mode(seconds: float) -> Dict:
    import gymnasium as gym
    import numpy as np
    import paddle

    import parl_lite
    from parl_lite import train
    from parl_lite.algorithms import A2C, DDPG, DQN, IMPALA, PPO, SAC, TD3
    from parl_lite.utils.models import MLPActorCritic, MLPActorQ, MLPQNetwork
    from parl_lite.utils.rollout import VectorRollout

    paddle.seed(0)
    rng = np.random.default_rng(0)

    def random_steps(env_id: str, num_envs: int) -> int:
        rollout = VectorRollout(env_id, num_envs, seed=0)
        space = rollout.env.action_space
        return round(rate(lambda: (rollout.env.step(space.sample()), num_envs)[1], seconds))

    def on_policy(algorithm, env_id: str, num_envs: int, steps: int, batch: int) -> Dict:
        agent = parl_lite.Agent(algorithm)
        rollout = VectorRollout(env_id, num_envs, seed=0)
        env_rate = rate(lambda: rollout.collect(agent.sample, steps)["rewards"].size, seconds)
        data = train.advantage_batch(agent, rollout.collect(agent.sample, max(1, batch // num_envs)), 0.99, 0.95)
        if isinstance(algorithm, PPO):
            algorithm.epochs, algorithm.batch_size = 1, batch
        return {"env_steps_per_s": round(env_rate), "updates_per_s": round(rate(lambda: (agent.learn(data), 1)[1],
                                                                                  seconds)), "batch": batch}

    def off_policy(algorithm, env_id: str, exploration, batch: Dict) -> Dict:
        agent = parl_lite.Agent(algorithm)
        env = gym.make(env_id)
        scale = env.action_space.high if isinstance(env.action_space, gym.spaces.Box) else 1
        state = {"obs": env.reset(seed=0)[0], "step": 0}

        def act() -> int:
            state["step"] += 1
            obs, _, terminated, truncated, _ = env.step(exploration.act(agent, state["obs"], state["step"]) * scale)
            state["obs"] = env.reset()[0] if terminated or truncated else obs
            return 1
        size = len(batch["obs"])
        return {"env_steps_per_s": round(rate(act, seconds)),
                "updates_per_s": round(rate(lambda: (agent.learn(batch), 1)[1], seconds)), "batch": size}

    def replay_batch(size: int, obs_dim: int, act_dim: int) -> Dict:
        action = rng.integers(0, 2, size) if act_dim == 0 else rng.uniform(-1, 1, (size, act_dim)).astype("float32")
        return dict(obs=rng.normal(size=(size, obs_dim)).astype("float32"), action=action,
                    reward=np.ones(size, "float32"), next_obs=rng.normal(size=(size, obs_dim)).astype("float32"),
                    terminated=np.zeros(size, bool))

    def asynchronous(name: str) -> Dict:
        model = MLPActorCritic(4, 2, 64)
        if name == "A3C":
            trainer = train.AsyncTrainer(A2C(model), "CartPole-v1", rollout_steps=5, gae_lambda=1.0, eval_every=10**9)
        else:
            trainer = train.AsyncTrainer(IMPALA(model), "CartPole-v1", rollout_steps=10, eval_every=10**9)
        marks = {}

        class Timer(train.Callback):
            def on_step(self, t) -> bool:  # warm-up: the first 5 updates (and starting the actors)
                if t.updates >= 5 and "started" not in marks:
                    marks.update(started=time.perf_counter(), steps=t.steps, updates=t.updates)
                return "started" not in marks or time.perf_counter() - marks["started"] < 2 * seconds

        summary = trainer.learn(10**9, callback=Timer(), progress_bar=False)
        elapsed = time.perf_counter() - marks["started"]
        return {"env_steps_per_s": round((summary.steps - marks["steps"]) / elapsed),
                "updates_per_s": round((summary.updates - marks["updates"]) / elapsed), "actors": 2,
                "batch": trainer.num_envs * trainer.rollout_steps}

    return {
        "baseline": {"cartpole_8_envs_random_steps_per_s": random_steps("CartPole-v1", 8),
                     "cartpole_1_env_random_steps_per_s": random_steps("CartPole-v1", 1),
                     "pendulum_4_envs_random_steps_per_s": random_steps("Pendulum-v1", 4),
                     "pendulum_1_env_random_steps_per_s": random_steps("Pendulum-v1", 1)},
        "PPO_CartPole": on_policy(PPO(MLPActorCritic(4, 2, 64)), "CartPole-v1", 8, 32, 256),
        "PPO_Pendulum": on_policy(PPO(MLPActorCritic(3, 1, 64, continuous=True)), "Pendulum-v1", 4, 32, 64),
        "A2C_CartPole": on_policy(A2C(MLPActorCritic(4, 2, 64)), "CartPole-v1", 8, 5, 40),
        "DQN_CartPole": off_policy(DQN(MLPQNetwork(4, 2, 256), gamma=0.99, lr=2.3e-3, double=True), "CartPole-v1",
                                   train.EpsilonGreedy(2, 0.04, 0.04, 1, seed=0), replay_batch(64, 4, 0)),
        "A3C_CartPole": asynchronous("A3C"),
        "IMPALA_CartPole": asynchronous("IMPALA"),
        "DDPG_Pendulum": off_policy(DDPG(MLPActorQ(3, 1, 64)), "Pendulum-v1",
                                    train.ContinuousExploration(1, 0.1, 0, seed=0), replay_batch(256, 3, 1)),
        "TD3_Pendulum": off_policy(TD3(MLPActorQ(3, 1, 64, twin_q=True)), "Pendulum-v1",
                                   train.ContinuousExploration(1, 0.1, 0, seed=0), replay_batch(256, 3, 1)),
        "SAC_Pendulum": off_policy(SAC(MLPActorQ(3, 1, 64, twin_q=True, gaussian=True), alpha_lr=1e-3),
                                   "Pendulum-v1", train.ContinuousExploration(1, None, 0, seed=0),
                                   replay_batch(256, 3, 1)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["threshold", "throughput"], default="threshold")
    parser.add_argument("--algos", nargs="+", choices=sorted(THRESHOLD_RUNS), default=sorted(THRESHOLD_RUNS),
                        help="threshold mode: algorithms to run")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1], help="threshold mode: seeds")
    parser.add_argument("--seconds", type=float, default=1.5, help="throughput mode: timing window of each figure")
    parser.add_argument("--sb3-run", nargs=2, metavar=("ALGO", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sb3_run:
        print(json.dumps(sb3_to_threshold(args.sb3_run[0], int(args.sb3_run[1]))), flush=True)
        return
    load_before = os.getloadavg()
    if args.mode == "threshold":
        result = threshold_mode(args.algos, args.seeds)
    else:
        result = throughput_mode(args.seconds)
        import parl_lite

        parl_lite.shutdown()
    result["machine"] = {"cpus": os.cpu_count(), "load_avg_before": [round(x, 2) for x in load_before],
                         "load_avg_after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
