"""PPO, SAC, TD3 and DDPG on MuJoCo at the RL Zoo's settings: ours against Stable-Baselines3's, paired
by seed, in one run.

    python scripts/bench/bench_mujoco_rl.py                                   # the issue's protocol (hours)
    python scripts/bench/bench_mujoco_rl.py --algos sac --tasks Hopper-v5 --seeds 1 --steps 5000 --eval-every 2500
    python scripts/bench/bench_mujoco_rl.py ... --plot curves.png
    python scripts/bench/bench_mujoco_rl.py --pairs seeds_1-3.jsonl seeds_4-6.jsonl   # the summary over both

Needs ``stable-baselines3`` (and torch, CPU build) beside parl_lite: a bench-only peer, not a
dependency of any extra. For each algorithm, task and seed, ours runs its script
(``scripts/examples/train_<algo>.py --env TASK``, the RL Zoo's table of the script for the task) and
SB3 runs the same settings (the same table translated to SB3's arguments; PPO's ``normalize`` as SB3's
``VecNormalize``), each in a fresh process on one thread, one after the other (which one goes first
alternates with the seed, so a change of load hits both). Both are evaluated at the same steps on the
same episodes: parl_lite's :class:`parl_lite.train.Evaluator` (``--eval-episodes`` greedy episodes
from the seeds the script uses), SB3's policy given the observations as SB3 normalises them.

Prints one JSON line per pair (both returns along the way, the final return, CPU-seconds per 1,000
training steps with evaluations left out, the process's peak RSS) and, per algorithm and task, one
line over the seeds: the mean final returns, the paired difference with its 95% t-interval, SB3's
own 95% interval, whether ours is inside it or above, and the CPU-per-step ratio. ``--plot`` draws
both learning curves per task and algorithm (mean over seeds) into one PNG. ``--pairs`` runs nothing and
prints the lines over the seeds of earlier runs' pair lines taken together (each pair came from one
run; the pairs of several runs may be pooled, the pairing is by seed).
"""
import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from intervals import mean_and_interval

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
STEPS = {"ppo": 100_000, "sac": 50_000, "td3": 50_000, "ddpg": 50_000}
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _settings(algo: str, task: str) -> dict:
    """The script's arguments for ``task``, as its RL Zoo table and defaults give them."""
    from importlib import util

    from parl_lite import train

    spec = util.spec_from_file_location(f"train_{algo}", EXAMPLES / f"train_{algo}.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = train.parse_args(module.Args, argv=["--env", task], env_defaults=module.RL_ZOO)
    return dataclasses.asdict(args)


# --- SB3's side (a child process) -------------------------------------------------------------------
def _sb3_model(algo: str, task: str, seed: int, s: dict):
    import numpy as np
    import torch
    from stable_baselines3 import DDPG, PPO, SAC, TD3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    if algo == "ppo":
        env = make_vec_env(task, n_envs=s["num_envs"], seed=seed)
        if s["normalize"] or s["normalize_reward"]:
            env = VecNormalize(env, norm_obs=s["normalize"], norm_reward=s["normalize_reward"], gamma=s["gamma"])
        arch = dict(pi=list(s["pi_arch"] or (s["hidden"],) * 2), vf=list(s["vf_arch"] or (s["hidden"],) * 2))
        activation = torch.nn.ReLU if s["activation"] == "relu" else torch.nn.Tanh
        return PPO("MlpPolicy", env, n_steps=s["rollout_steps"], batch_size=s["minibatch_size"],
                   n_epochs=s["epochs"], gamma=s["gamma"], gae_lambda=s["gae_lambda"],
                   learning_rate=s["initial_lr"], clip_range=s["clip_param"],
                   ent_coef=s["entropy_coef"], vf_coef=s["value_loss_coef"] / 2, max_grad_norm=s["max_grad_norm"],
                   policy_kwargs=dict(net_arch=arch, activation_fn=activation, ortho_init=s["ortho_init"],
                                      log_std_init=s["log_std_init"]), seed=seed, device="cpu", verbose=0)
    env = make_vec_env(task, n_envs=1, seed=seed)
    common = dict(buffer_size=s["buffer_size"] or STEPS[algo], learning_starts=s["learning_starts"],
                  batch_size=s["batch_size"], tau=s["tau"], gamma=s["gamma"], train_freq=s["train_freq"],
                  gradient_steps=s["gradient_steps"], seed=seed, device="cpu", verbose=0,
                  policy_kwargs=dict(net_arch=list(s["net_arch"])))
    if algo == "sac":
        return SAC("MlpPolicy", env, learning_rate=s["actor_lr"], ent_coef="auto", **common)
    dim = env.action_space.shape[0]
    noise_class = NormalActionNoise if s["noise_type"] == "normal" else OrnsteinUhlenbeckActionNoise
    noise = noise_class(np.zeros(dim), s["noise_std"] * np.ones(dim))
    cls = TD3 if algo == "td3" else DDPG
    return cls("MlpPolicy", env, learning_rate=s["actor_lr"], action_noise=noise, **common)


def run_sb3(algo: str, task: str, seed: int, steps: int, eval_every: int, eval_episodes: int) -> dict:
    """Train SB3's ``algo``, evaluated as ours is; returns the curve, CPU and peak RSS."""
    import numpy as np
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    from parl_lite.train import Evaluator

    s = _settings(algo, task)
    model = _sb3_model(algo, task, seed, s)
    normalizer = model.get_env() if isinstance(model.get_env(), VecNormalize) else None
    # the scripts' evaluation seeds: the off-policy ones pass theirs, PPO keeps the trainer's default
    evaluator = Evaluator(task, eval_episodes, 10_000_000 + 1000 * seed if algo != "ppo" else 10_000 + 100 * seed)

    def predict(obs: np.ndarray) -> np.ndarray:  # SB3's actions are in the task's bounds, as the evaluator steps them
        actions, _ = model.predict(normalizer.normalize_obs(obs) if normalizer is not None else obs, deterministic=True)
        return actions

    curve, eval_cpu, next_eval = [], [0.0], [eval_every]

    def evaluate(step: int) -> None:
        started = time.process_time()
        curve.append((step, evaluator(predict)))
        eval_cpu[0] += time.process_time() - started

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps >= next_eval[0]:
                evaluate(self.num_timesteps)
                next_eval[0] += eval_every
            return True

    started = time.process_time()
    model.learn(steps, callback=Evaluate())
    cpu = time.process_time() - started - eval_cpu[0]
    if not curve or curve[-1][0] < model.num_timesteps:
        evaluate(model.num_timesteps)
    evaluator.close()
    return {"curve": curve, "cpu_s_per_1k": round(cpu / steps * 1000, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


# --- ours (its script, a child process) ---------------------------------------------------------------
def run_ours(algo: str, task: str, seed: int, steps: int, eval_every: int, eval_episodes: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_mujoco_rl_") as folder:
        done = subprocess.run([sys.executable, str(EXAMPLES / f"train_{algo}.py"), "--env", task, "--seed", str(seed),
                               "--total-steps", str(steps), "--eval-every", str(eval_every), "--eval-episodes",
                               str(eval_episodes), "--target", "1e12", "--logdir", folder, "--save",
                               os.path.join(folder, "run.h5")], capture_output=True, text=True, cwd=folder,
                              env={**os.environ, **ONE_THREAD})
        if done.returncode != 0:
            raise RuntimeError(f"train_{algo}.py failed: {done.stderr[-2000:]}")
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        curve = []
        with open(os.path.join(folder, "scalars.csv")) as scalars:
            for line in scalars.readlines()[1:]:
                _, step, tag, value = line.strip().split(",")
                if tag == "eval/return":
                    curve.append((int(step), float(value)))
    return {"curve": curve, "cpu_s_per_1k": round(summary["train_cpu_seconds"] / summary["steps"] * 1000, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)}


def _child(system: str, algo: str, task: str, seed: int, steps: int, eval_every: int, eval_episodes: int) -> dict:
    """Run one side in a fresh process (the training process's peak RSS is its own)."""
    command = [sys.executable, __file__, "--child", system, algo, task, str(seed), str(steps), str(eval_every),
               str(eval_episodes)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    if done.returncode:
        raise RuntimeError(f"{system} {algo} {task} seed {seed} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["ppo", "sac", "td3", "ddpg"], choices=sorted(STEPS))
    parser.add_argument("--tasks", nargs="+", default=["Hopper-v5", "HalfCheetah-v5"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: 100k PPO, 50k the others)")
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--plot", default=None, help="write the learning curves to this PNG")
    parser.add_argument("--pairs", nargs="+", metavar="FILE",
                        help="run nothing: the summary lines (and --plot) over the pair lines of earlier runs' "
                             "output, e.g. more seeds run on another day")
    parser.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        system, algo, task, *numbers = args.child
        runner = run_ours if system == "parl_lite" else run_sb3
        print(json.dumps(runner(algo, task, *map(int, numbers))), flush=True)
        return
    if args.pairs:
        pairs = _read_pairs(args.pairs)
        groups: dict[tuple[str, str], list[dict]] = {}
        for pair in pairs:
            groups.setdefault((pair["algo"], pair["task"]), []).append(pair)
        for group in groups.values():
            print(json.dumps(summary(group)), flush=True)
    else:
        pairs = _run_pairs(args)
    if args.plot:
        curves: dict = {}
        for pair in pairs:
            for system in ("parl_lite", "sb3"):
                curves.setdefault((pair["algo"], pair["task"], system), []).append(pair[system]["curve"])
        _plot(curves, args.plot)


def _run_pairs(args: argparse.Namespace) -> list[dict]:
    """Run every algorithm, task and seed, ours and SB3's; print each pair line as it comes and each
    algorithm and task's summary after its seeds."""
    pairs = []
    for algo in args.algos:
        for task in args.tasks:
            group = []
            for seed in args.seeds:
                steps = args.steps or STEPS[algo]
                order = ("parl_lite", "sb3") if seed % 2 else ("sb3", "parl_lite")
                results = {system: _child(system, algo, task, seed, steps, args.eval_every, args.eval_episodes)
                           for system in order}
                pair = {"bench": "mujoco_rl", "algo": algo, "task": task, "seed": seed, "steps": steps,
                        **{system: results[system] for system in ("parl_lite", "sb3")}}
                print(json.dumps(pair), flush=True)
                group.append(pair)
            print(json.dumps(summary(group)), flush=True)
            pairs += group
    return pairs


def summary(pairs: list[dict]) -> dict:
    """The line over the seeds of one algorithm and task, from its pair lines."""
    finals = {system: [pair[system]["curve"][-1][1] for pair in pairs] for system in ("parl_lite", "sb3")}
    cpu = {system: [pair[system]["cpu_s_per_1k"] for pair in pairs] for system in ("parl_lite", "sb3")}
    ours_mean, _ = mean_and_interval(finals["parl_lite"])
    sb3_mean, sb3_half = mean_and_interval(finals["sb3"])
    diff_mean, diff_half = mean_and_interval([a - b for a, b in zip(finals["parl_lite"], finals["sb3"], strict=True)])
    return {"bench": "mujoco_rl_summary", "algo": pairs[0]["algo"], "task": pairs[0]["task"],
            "seeds": [pair["seed"] for pair in pairs],
            "parl_lite_mean": round(ours_mean, 1), "sb3_mean": round(sb3_mean, 1),
            "sb3_interval_95": None if sb3_half is None else [round(sb3_mean - sb3_half, 1),
                                                              round(sb3_mean + sb3_half, 1)],
            "ours_within_or_above_sb3_interval": None if sb3_half is None else ours_mean >= sb3_mean - sb3_half,
            "paired_difference": round(diff_mean, 1),
            "paired_difference_95": None if diff_half is None else round(diff_half, 1),
            "cpu_s_per_1k": {system: round(sum(values) / len(values), 2) for system, values in cpu.items()},
            "cpu_ratio_ours_to_sb3": round(sum(cpu["parl_lite"]) / sum(cpu["sb3"]), 3)}


def _read_pairs(paths: list[str]) -> list[dict]:
    """The pair lines of earlier runs' output files, in order; a seed given twice for one algorithm
    and task is an error (it would count twice)."""
    pairs, seen = [], set()
    for path in paths:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as error:
            raise SystemExit(f"--pairs: cannot read {path}: {error.strerror}") from None
        for number, line in enumerate(lines, 1):
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise SystemExit(f"--pairs: {path} line {number} is not JSON") from None
            if record.get("bench") != "mujoco_rl":
                continue
            key = (record["algo"], record["task"], record["seed"])
            if key in seen:
                raise SystemExit(f"--pairs: {path} line {number}: {key[0]} {key[1]} seed {key[2]} is given twice")
            seen.add(key)
            pairs.append(record)
    if not pairs:
        raise SystemExit(f"--pairs: no pair lines in {', '.join(paths)}")
    return pairs


def _plot(curves: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(algo, task) for algo, task, _ in curves})
    figure, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.5), squeeze=False)
    for axis, (algo, task) in zip(axes[0], panels, strict=True):
        for system, colour in (("parl_lite", "tab:blue"), ("sb3", "tab:orange")):
            runs = curves.get((algo, task, system), [])
            if not runs:
                continue
            steps = [step for step, _ in runs[0]]
            mean = [sum(run[i][1] for run in runs) / len(runs) for i in range(len(steps))]
            axis.plot(steps, mean, color=colour, label=f"{system} ({len(runs)} seeds)")
            for run in runs:
                axis.plot(steps, [value for _, value in run], color=colour, alpha=0.2)
        axis.set_title(f"{algo.upper()} {task}")
        axis.set_xlabel("steps")
        axis.set_ylabel("evaluation return")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
