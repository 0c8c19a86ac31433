"""evokit_py's ARS against sb3-contrib's ARS on MuJoCo, side by side in one run; and where the time of
a generation goes.

    python scripts/bench/bench_es_mujoco.py                                   # Swimmer, Hopper, HalfCheetah; seeds 0-4
    python scripts/bench/bench_es_mujoco.py --tasks swimmer --seeds 0 1 --only ours
    python scripts/bench/bench_es_mujoco.py --tasks walker2d                  # hours
    python scripts/bench/bench_es_mujoco.py --tasks hopper --only ours --set solver.optimizer.base_lr=0.02
    python scripts/bench/bench_es_mujoco.py --tasks swimmer --only sb3 --peer-set delta_std=0.03
    python scripts/bench/bench_es_mujoco.py --only profile                    # one HalfCheetah generation, per step

Prints ONE JSON line. Needs MuJoCo (``pip install '.[mujoco]'`` in the clone) and, for the peer,
sb3-contrib (``pip install sb3-contrib``: it brings stable-baselines3 and torch, bench-only
dependencies; on a machine without a GPU, ``pip install torch --index-url
https://download.pytorch.org/whl/cpu`` first keeps torch to its CPU build).

Per task and seed, ours then the peer's, alternating so that a change of load hits both:

- **ours**: ``parl-lite es-train --config scripts/examples/es_<task>.yaml`` (ARS V2-t with the paper's
  hyperparameters, but a noise std of 0.03 on Swimmer) with ``seed`` S and noise seed S + 7, as a fresh process;
- **sb3-contrib**: ``sb3_contrib.ARS`` with RL-Zoo's hyperparameters for the task (``ars.yml``:
  "params closest to original paper"; Swimmer without observation normalisation, as RL-Zoo has it),
  a linear policy without bias, its candidates evaluated by ``AsyncEval`` on as many worker
  processes as ours, seeded with S (``--peer-set`` overrides one of RL-Zoo's values).

Both train for the same budget of episodes (``--budget-factor`` times the paper's V2-t figure) under
the same protocol: every ``eval_every`` generations of the config (the same number of training
episodes for the peer), the current policy plays ``eval_episodes`` episodes; a mean at the threshold
is confirmed on ``confirm_episodes`` fresh episodes before the run stops (``train.confirm_episodes``).
Episodes to the threshold count training episodes only. CPU-seconds are those of every process
of the run (the trainer, its workers, the peer's forkserver; the bench makes itself the subreaper
of the orphans and reaps them), start-up and evaluations included, for both. Each final policy (the
best evaluated one: ours from the exported ``policy.onnx``, run by onnxruntime; the peer's
weights with its observation statistics) then plays ``--final-episodes`` episodes seeded apart from
training and evaluation (seeds from 10**9).

Figures per task: ``median_episodes`` (over seeds; a seed that missed counts as more than any, so
null when half or more missed), ``success_rate`` within the budget and within the paper's figure,
``cpu_seconds_per_episode`` (all runs' CPU over all their training episodes), ``env_steps_per_cpu_second``,
``env_steps_per_s_per_worker`` (training steps over the wall-clock of training, evaluations and
start-up excluded, and the workers) and the final returns. With both sides, ``paired`` compares them
seed by seed: the difference of their success rates within the paper's figure with a 95% bootstrap
interval, and on how many seeds each reached the threshold first, with a sign test.

``--only profile``: one generation of ``es_halfcheetah.yaml`` (64 candidates around a random policy,
random observation statistics) in one sampler, CPU time per environment step, then each part alone
on the same steps: the environment (gymnasium and MuJoCo), the policy (numpy's linear policy that
workers run, and onnxruntime on the same graph), the normalisation and the action map; what is left
is the episode loop.
"""
import argparse
import ctypes
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"  # the shipped configs
FINAL_SEED = 10**9  # the final evaluations' first episode seed, apart from training and evaluation


@dataclass(frozen=True)
class Task:
    """One MuJoCo task: its config, the paper's threshold and V2-t episodes, RL-Zoo's ARS values."""
    env_id: str
    config: str
    threshold: float
    paper_episodes: int
    zoo: dict


TASKS = {
    "swimmer": Task("Swimmer-v5", "es_swimmer.yaml", 325.0, 427,
                    dict(n_delta=1, n_top=1, learning_rate=0.02, delta_std=0.01, alive_bonus_offset=0.0,
                         normalize=False)),
    "hopper": Task("Hopper-v5", "es_hopper.yaml", 3120.0, 1973,
                   dict(n_delta=8, n_top=4, learning_rate=0.01, delta_std=0.025, alive_bonus_offset=-1.0,
                        normalize=True)),
    "halfcheetah": Task("HalfCheetah-v5", "es_halfcheetah.yaml", 3430.0, 1707,
                        dict(n_delta=32, n_top=4, learning_rate=0.02, delta_std=0.03, alive_bonus_offset=0.0,
                             normalize=True)),
    "walker2d": Task("Walker2d-v5", "es_walker2d.yaml", 4390.0, 24000,
                     dict(n_delta=40, n_top=30, learning_rate=0.03, delta_std=0.025, alive_bonus_offset=-1.0,
                          normalize=True)),
}


# ------------------------------------------------------------------------------ CPU of every process
def _become_subreaper() -> None:
    """Orphans of the runs (a pool's workers, a forkserver) become this process's children, so that
    reaping them adds their CPU time to ``RUSAGE_CHILDREN`` (Linux)."""
    PR_SET_CHILD_SUBREAPER = 36
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _reap_all(timeout: float = 60.0) -> None:
    """Wait for every child left (orphans reparented here) to end and reap it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("processes of a finished run are still alive after "
                                   f"{timeout:.0f} s: {_children()}")
            time.sleep(0.05)


def _children() -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                found.append(int(entry.name))
    return found


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_measured(command: list[str], env: dict | None = None) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``command`` to its end and reap whatever it left: (result, CPU seconds of every process, wall seconds).

    Stopped meanwhile (Ctrl-C, or the SIGTERM that :func:`main` turns into one), it sends the run SIGTERM
    (es-train then ends its generation and exits; SIGKILL after 30 s) and reaps the run's processes
    before the stop goes on."""
    cpu, wall = _children_cpu(), time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as run:
        try:
            stdout, stderr = run.communicate()
        except BaseException:
            run.terminate()
            try:
                run.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                run.kill()
            _reap_all()
            raise
    _reap_all()
    return subprocess.CompletedProcess(command, run.returncode, stdout, stderr), _children_cpu() - cpu, \
        time.perf_counter() - wall


def _stop_like_ctrl_c(signum: int, frame) -> None:
    raise KeyboardInterrupt


def _single_threaded_env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


# ------------------------------------------------------------------------------------------- ours
def _our_config(task: Task):
    """The task's shipped config with ``--set``'s overrides: our hyperparameters, and the evaluation
    protocol both sides follow."""
    from evokit_py.config import resolve_config

    return resolve_config(EXAMPLES / task.config, ARGS.set)


def run_ours(task: Task, seed: int, budget: int, workers: int, folder: Path) -> dict:
    """``es-train`` with the task's config: episodes to the threshold, CPU of every process, the final
    policy's returns on fresh episodes (from the exported ONNX file)."""
    config = _our_config(task)
    per_generation = config.solver.population_size * config.env.episodes_per_candidate
    generations = math.ceil(budget / per_generation)
    command = [sys.executable, "-m", "parl_lite.cli", "es-train", "--config", str(EXAMPLES / task.config),
               "--set", f"seed={seed}", "--set", f"solver.sampling.gaussian_sampling.seed={seed + 7}",
               "--set", f"train.generations={generations}", "--set", f"train.workers={workers}",
               "--set", f"train.log_dir={folder}", "--set", f"train.checkpoint_dir={folder}/checkpoints"]
    for override in ARGS.set:
        command += ["--set", override]
    done, cpu, wall = _run_measured(command, _single_threaded_env())
    if done.returncode != 0:
        raise RuntimeError(f"es-train failed ({done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    episodes = summary["updates"] * per_generation
    policy = _onnx_policy(folder / "policy.onnx")
    return {"seed": seed, "solved": summary["solved"], "episodes": episodes,
            "episodes_to_threshold": episodes if summary["solved"] else None, "steps": summary["steps"],
            "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
            "train_seconds": summary["train_seconds"], "summary_cpu_seconds": summary["train_cpu_seconds"],
            "workers": workers, "final_return": final_return(task, policy, config.env.max_steps)}


def _onnx_policy(path: Path):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda obs: session.run(None, {name: obs[None].astype(np.float32)})[0][0]


# -------------------------------------------------------------------------------------------- peer
def run_sb3(task: Task, seed: int, budget: int, workers: int, folder: Path) -> dict:
    """sb3-contrib's ARS in a fresh process (``--sb3-run``), then its best policy on fresh episodes."""
    config = _our_config(task)
    eval_episodes = config.solver.population_size * config.env.episodes_per_candidate * config.train.eval_every
    name = [name for name, t in TASKS.items() if t == task][0]
    command = [sys.executable, str(Path(__file__).resolve()), "--sb3-run", json.dumps({
        "task": name, "seed": seed, "budget": budget,
        "workers": workers, "eval_every_episodes": eval_episodes, "eval_episodes": config.train.eval_episodes,
        "confirm_episodes": config.train.confirm_episodes, "max_steps": config.env.max_steps,
        "out": str(folder / "sb3_best.npz"), "zoo_overrides": PEER_OVERRIDES[name]})]
    done, cpu, wall = _run_measured(command, _single_threaded_env())
    if done.returncode != 0:
        raise RuntimeError(f"sb3-contrib ARS failed ({done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    best = np.load(folder / "sb3_best.npz")
    policy = sb3_policy(best["weights"], best["mean"], best["var"])
    return {**result, "seed": seed, "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
            "workers": workers, "final_return": final_return(task, policy, config.env.max_steps)}


def _peer_overrides(task: Task) -> dict:
    """``--peer-set``'s ``key=value`` pairs as sb3-contrib ARS keyword arguments, each value read as
    YAML as ``--set`` reads ours; a key that is not one of the task's RL-Zoo values, or a value of
    another type, is refused by name."""
    import yaml

    overrides = {}
    for item in ARGS.peer_set:
        key, separator, text = item.partition("=")
        if not separator or key not in task.zoo:
            raise SystemExit(f"--peer-set {item!r}: expected KEY=VALUE with KEY one of {sorted(task.zoo)}")
        default = task.zoo[key]
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        if isinstance(default, float) and type(value) is int:
            value = float(value)
        if type(value) is not type(default):
            raise SystemExit(f"--peer-set {item!r}: {key} takes {type(default).__name__} values, like {default!r}")
        overrides[key] = value
    return overrides


def sb3_policy(weights: np.ndarray, mean: np.ndarray, var: np.ndarray):
    """sb3-contrib's linear policy (no bias) behind VecNormalize's observation normalisation (none
    when ``mean`` is empty)."""
    def policy(obs):
        if mean.size:
            obs = np.clip((obs - mean) / np.sqrt(var + 1e-8), -10.0, 10.0)
        return weights @ obs

    return policy


def sb3_run(spec: dict) -> None:
    """One sb3-contrib ARS run (in its own process): train until the confirmed threshold or the
    budget, evaluate as es-train does, print one JSON line; save the best evaluated policy."""
    import gymnasium as gym
    import torch
    from sb3_contrib import ARS
    from sb3_contrib.common.vec_env import AsyncEval
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    task, seed = TASKS[spec["task"]], spec["seed"]
    zoo = {**task.zoo, **spec["zoo_overrides"]}
    normalize = zoo.pop("normalize")
    env_kwargs = {"max_episode_steps": spec["max_steps"]} if spec["max_steps"] else {}

    def make_env():
        env = make_vec_env(task.env_id, n_envs=1, seed=seed, env_kwargs=env_kwargs)
        return VecNormalize(env, norm_obs=True, norm_reward=False) if normalize else env

    model = ARS("LinearPolicy", make_env(), seed=seed, **zoo)
    model.set_logger(Logger(folder=None, output_formats=[]))  # the default one makes a folder per run in $TMPDIR
    async_eval = AsyncEval([make_env for _ in range(spec["workers"])], model.policy)
    async_eval.seed(seed)
    _, callback = model._setup_learn(10**12, None, True, "ARS", False)
    eval_env = gym.make(task.env_id, **env_kwargs)

    def current_policy():
        weights = model.weights.cpu().numpy().reshape(eval_env.action_space.shape[0], -1).astype(np.float64)
        vec_normalize = model.get_vec_normalize_env()
        if vec_normalize is None:
            return weights, np.zeros(0), np.zeros(0)
        return weights, vec_normalize.obs_rms.mean.copy(), vec_normalize.obs_rms.var.copy()

    def play(policy, first, count):
        return float(np.mean(returns(eval_env, sb3_policy(*policy), range(first, first + count))))

    episodes, evaluations, best, best_value = 0, 0, current_policy(), -np.inf
    solved, confirmation, train_seconds = False, None, 0.0
    per_update = 2 * model.n_delta
    while episodes < spec["budget"] and not solved:
        tick = time.perf_counter()
        model._do_one_update(callback, async_eval)
        train_seconds += time.perf_counter() - tick
        episodes += per_update
        if episodes % spec["eval_every_episodes"] and episodes < spec["budget"]:
            continue
        policy = current_policy()
        first = 10**6 * (seed + 1) + 1000 * evaluations
        value = play(policy, first, spec["eval_episodes"])
        evaluations += 1
        if value >= task.threshold and spec["confirm_episodes"]:
            confirmation = value = play(policy, first + spec["eval_episodes"], spec["confirm_episodes"])
        if value > best_value:
            best, best_value = policy, value
        solved = value >= task.threshold
    async_eval.close()
    np.savez(spec["out"], weights=best[0], mean=best[1], var=best[2])
    print(json.dumps({"solved": solved, "episodes": episodes, "episodes_to_threshold": episodes if solved else None,
                      "steps": int(model.num_timesteps), "train_seconds": round(train_seconds, 2),
                      "best_eval_return": best_value, "confirmation": confirmation}))


# ---------------------------------------------------------------------------------- final evaluation
def final_return(task: Task, policy, max_steps: int | None) -> list[float]:
    """The returns of ``policy`` on ``--final-episodes`` episodes seeded from :data:`FINAL_SEED`."""
    import gymnasium as gym

    env = gym.make(task.env_id, **({"max_episode_steps": max_steps} if max_steps else {}))
    try:
        return [round(value, 1) for value in returns(env, policy, range(FINAL_SEED, FINAL_SEED + ARGS.final_episodes))]
    finally:
        env.close()


def returns(env, policy, seeds) -> list[float]:
    """The return of one episode of ``policy`` (raw observation -> output, clipped here to the action
    bounds) per reset seed."""
    low, high = env.action_space.low, env.action_space.high
    totals = []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        total, ended = 0.0, False
        while not ended:
            obs, reward, terminated, truncated, _ = env.step(np.clip(policy(obs), low, high))
            total += float(reward)
            ended = terminated or truncated
        totals.append(total)
    return totals


# ------------------------------------------------------------------------------------------ figures
def figures(task: Task, runs: list[dict], budget: int) -> dict:
    """One side's figures over its runs (see the module docstring)."""
    reached = [run["episodes_to_threshold"] for run in runs]
    ordered = sorted(math.inf if value is None else value for value in reached)
    median = float(np.median(ordered)) if ordered else math.nan
    episodes = sum(run["episodes"] for run in runs)
    cpu = sum(run["cpu_seconds"] for run in runs)
    steps = sum(run["steps"] for run in runs)
    finals = [np.mean(run["final_return"]) for run in runs]
    return {"episodes_to_threshold": reached, "median_episodes": None if math.isinf(median) else median,
            "success_rate": sum(value is not None for value in reached) / len(runs),
            "success_rate_at_paper_budget": sum(value is not None and value <= task.paper_episodes
                                                for value in reached) / len(runs),
            "cpu_seconds": [run["cpu_seconds"] for run in runs],
            "cpu_seconds_per_episode": round(cpu / episodes, 4),
            "env_steps_per_cpu_second": round(steps / cpu),
            "env_steps_per_s_per_worker": round(steps / sum(run["train_seconds"] * run["workers"] for run in runs)),
            "final_return_mean": [round(float(value), 1) for value in finals],
            "final_solved": [bool(value >= task.threshold) for value in finals]}


def paired(task: Task, ours: list[dict], peer: list[dict], resamples: int = 10_000) -> dict:
    """Ours against the peer seed by seed (the runs of one seed pair up): the difference of the
    success rates within the paper's figure, with a 95% percentile-bootstrap interval over seeds, and
    which side reached the threshold first on how many seeds, with a two-sided sign test (a seed that
    missed counts as later than any that reached it; both missing is a tie)."""
    def reached(run: dict) -> float:
        return math.inf if run["episodes_to_threshold"] is None else run["episodes_to_threshold"]

    pairs = [(reached(a), reached(b)) for a, b in zip(ours, peer, strict=True)]
    within = np.array(pairs).T <= task.paper_episodes
    difference = within[0].astype(float) - within[1]
    drawn = np.random.default_rng(0).integers(0, difference.size, (resamples, difference.size))
    low, high = np.percentile(difference[drawn].mean(axis=1), [2.5, 97.5])
    ours_first = sum(a < b for a, b in pairs)
    peer_first = sum(b < a for a, b in pairs)
    decided = ours_first + peer_first
    tail = sum(math.comb(decided, k) for k in range(min(ours_first, peer_first) + 1)) / 2 ** decided
    return {"seeds": difference.size, "success_at_paper_budget_difference": round(float(difference.mean()), 3),
            "success_difference_interval_95": [round(float(low), 3), round(float(high), 3)],
            "ours_first": ours_first, "peer_first": peer_first, "ties": difference.size - decided,
            "sign_test_p": round(min(1.0, 2 * tail), 4)}


def compare(names: list[str], seeds: list[int], sides: list[str]) -> dict:
    _become_subreaper()
    results = {}
    for name in names:
        task = TASKS[name]
        budget = math.ceil(ARGS.budget_factor * task.paper_episodes)
        runs: dict[str, list[dict]] = {side: [] for side in sides}
        for seed in seeds:
            for side in sides:
                with tempfile.TemporaryDirectory(prefix=f"bench_es_mujoco_{name}_") as folder:
                    run = (run_ours if side == "ours" else run_sb3)(task, seed, budget, ARGS.workers, Path(folder))
                runs[side].append(run)
                print(f"{name} seed {seed} {side}: {json.dumps(run)}", file=sys.stderr, flush=True)
        results[name] = {"env": task.env_id, "threshold": task.threshold, "paper_v2t_episodes": task.paper_episodes,
                         "budget_episodes": budget,
                         **{side: figures(task, side_runs, budget) for side, side_runs in runs.items()}}
        if len(sides) == 2:
            results[name]["paired"] = paired(task, runs["ours"], runs["sb3"])
    return results


# ------------------------------------------------------------------------------------------- profile
def profile(repeats: int = 3) -> dict:
    """Where the CPU time of one HalfCheetah generation goes, per environment step (best of ``repeats``)."""
    from evokit_py.basis import Basis
    from evokit_py.config import load_config, resolve_config
    from evokit_py.noise import SamplingInfo
    from evokit_py.obs_stats import normalise
    from evokit_py.policy import OnnxPolicy
    from evokit_py.sampler import Sampler
    from evokit_py.seeds import candidate_seeds
    from evokit_py.training.setup import setup_run

    path = EXAMPLES / TASKS["halfcheetah"].config
    config = resolve_config(path, [f"train.log_dir={tempfile.gettempdir()}"])
    assert load_config(path).solver.population_size == config.solver.population_size
    best: dict[str, float] = {}
    with setup_run(config) as run:
        sampler = Sampler(config, run.policy.to_bytes(), run.noise_spec())
        onnx_policy = OnnxPolicy.from_bytes(run.policy.to_bytes())
        rng = np.random.default_rng(0)
        dim = sampler.env.observation_space.shape[0]
        mean, std = rng.standard_normal(dim).astype(np.float32), rng.uniform(0.5, 2, dim).astype(np.float32)
        clip = config.observation_stats.clip
        infos = [info.to_list() for info in run.solver.ask()]
        basis = run.solver.basis().to_dict()
        seeds = candidate_seeds(config, 0, len(infos))
        for _ in range(repeats):
            tick = time.process_time()
            steps = int(sampler.evaluate(basis, mean, std, infos, seeds)["steps"].sum())
            per_step = (time.process_time() - tick) / steps
            params = Basis.from_dict(basis).candidate(SamplingInfo.from_list(infos[0]), sampler.noise)
            sampler.policy.set_parameters(params)
            onnx_policy.set_parameters(params)
            observations, actions, outputs = [], [], []
            obs, _ = sampler.env.reset(seed=int(seeds[0][0]))
            while True:
                observations.append(obs)
                outputs.append(sampler.policy(normalise(obs, mean, std, clip))[0])
                actions.append(sampler.action_map(outputs[-1]))
                obs, _, terminated, truncated, _ = sampler.env.step(actions[-1])
                if terminated or truncated:
                    break
            inputs = [normalise(o, mean, std, clip) for o in observations]
            parts = {"env": (sampler.env.step, actions),
                     "normalise": (lambda o: normalise(o, mean, std, clip), observations),
                     "action_map": (sampler.action_map, outputs),
                     "policy_numpy": (sampler.policy, inputs),
                     "policy_onnxruntime": (onnx_policy, inputs)}
            sampler.env.reset(seed=int(seeds[0][0]))
            timing = {"step": per_step}
            for part, (work, items) in parts.items():
                tick = time.process_time()
                for item in items:
                    work(item)
                timing[part] = (time.process_time() - tick) / len(observations)
            for key, value in timing.items():
                best[key] = min(best.get(key, math.inf), value)
        sampler.release()
    us = {key: round(value * 1e6, 2) for key, value in best.items()}
    ours = us["step"] - us["env"]
    return {"env": config.env.id, "candidates": len(infos), "cpu_us_per_step": us["step"], "env_us": us["env"],
            "policy_numpy_us": us["policy_numpy"], "policy_onnxruntime_us": us["policy_onnxruntime"],
            "normalise_us": us["normalise"], "action_map_us": us["action_map"],
            "loop_us": round(us["step"] - us["env"] - us["policy_numpy"] - us["normalise"] - us["action_map"], 2),
            "our_overhead_us": round(ours, 2), "our_overhead_share": round(ours / us["step"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=["swimmer", "hopper", "halfcheetah"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--only", choices=["ours", "sb3", "profile"], help="one side, or the profile alone")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of both")
    parser.add_argument("--budget-factor", type=float, default=2.0,
                        help="training episodes per run, in units of the paper's V2-t figure")
    parser.add_argument("--final-episodes", type=int, default=20, help="fresh episodes of each final policy")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a value of our config (es-train's --set), e.g. solver.optimizer.base_lr=0.02; "
                             "the peer keeps RL-Zoo's values and follows our evaluation protocol")
    parser.add_argument("--peer-set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one of RL-Zoo's values for sb3-contrib ARS, e.g. delta_std=0.03")
    parser.add_argument("--sb3-run", help=argparse.SUPPRESS)
    global ARGS
    ARGS = parser.parse_args()
    if ARGS.sb3_run:
        sb3_run(json.loads(ARGS.sb3_run))
        return
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)  # a time limit's SIGTERM stops the run and cleans up
    load = os.getloadavg()
    figures_: dict = {"load_average_start": [round(value, 2) for value in load]}
    try:
        if ARGS.only == "profile":
            figures_["profile"] = profile()
        else:
            sides = [ARGS.only] if ARGS.only else ["ours", "sb3"]
            PEER_OVERRIDES.update({name: _peer_overrides(TASKS[name]) for name in ARGS.tasks})  # before any run
            figures_.update({"seeds": ARGS.seeds, "workers": ARGS.workers, "ours_overrides": ARGS.set,
                             "peer_overrides": ARGS.peer_set, "tasks": compare(ARGS.tasks, ARGS.seeds, sides)})
    except KeyboardInterrupt:
        sys.exit("bench_es_mujoco: stopped; the runs that finished are in the lines above")
    figures_["load_average_end"] = [round(value, 2) for value in os.getloadavg()]
    print(json.dumps(figures_))


ARGS = argparse.Namespace()
PEER_OVERRIDES: dict[str, dict] = {}  # task name -> sb3-contrib's values from --peer-set, checked in main

if __name__ == "__main__":
    main()
