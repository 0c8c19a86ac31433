"""ES benchmark; prints ONE JSON line.

- policy step latency (batch 1, a 4-64-64-2 tanh MLP, numpy in and out): evokit_py's ONNX policy
  vs paddle dygraph with the same weights (paddle is imported here only, never by evokit_py);
- episodes/s evaluating the same candidates of CartPole-v1 with 1 and 2 pool workers (remote
  actors), and in this process for reference; beside it, the speed-up of a plain CPU-bound loop in
  2 processes over 1, measured in the same run: the ceiling the other jobs on the machine leave;
- ``train.mode`` async against sync on 2 workers: evaluations/s on a task whose episode lengths vary
  widely between candidates (CartPole-v1 with a 5000-step limit around a policy that balances,
  std 0.2, population 8: half the episodes end within 70 steps, 3% run the 5000), totals over
  ``--async-seeds`` seeds run by both modes (one seed's share of long episodes decides its rate: sync
  evaluates the same candidates on every run of a seed, so a best-of-runs on one seed compares
  two different mixes), and the wall-clock time to an evaluation mean of 475 on CartPole-v1
  (built-in job, ``--seeds`` seeds, the whole ``train`` call and the call without its start-up, a
  seed's median over ``--runs-475`` runs since one run's time varies by 10% with the machine's load
  and async's update count with the order results arrive in; the median and the sum over seeds),
  for sync, async (lookahead on, the default) and async as EvoKit does it (``train.lookahead=false``),
  the modes interleaved;
- the same three modes over ``--study-seeds`` seeds, one run each, paired by seed: updates to 475
  (the extra updates per seed against sync, mean and standard error) and the geometric mean of the
  per-seed time ratios against sync with its 95% confidence interval (three seeds cannot tell the
  modes apart: see :func:`async_study`);
- CMA-ES against pycma (``pip install cma``; skipped without it), same functions, seeds, lambda,
  sigma0 and start: evaluations to 1e-8 on the 10-D sphere, ellipsoid (condition 1e6) and
  Rosenbrock (medians over 5 seeds), ours given pycma's normal draws (``StreamNoise``: the same
  seed then means the same samples, so the figures compare the implementations, not two draws of
  the randomness) and, beside it, ours on its own draws; and milliseconds per generation at 500-D
  (sphere, lambda 22).

    python scripts/bench/bench_es.py [--candidates 64] [--repeats 3] [--only sampling,async,study,cma]
"""
import json
import multiprocessing
import os
import tempfile
import time
from functools import partial
from pathlib import Path

import click
import numpy as np

from evokit_py.config import parse_config, resolve_config
from evokit_py.noise import NoiseSource, StreamNoise
from evokit_py.policy import OnnxPolicy, build_mlp
from evokit_py.pool import EvaluationPool
from evokit_py.seeds import episode_seed
from evokit_py.solvers import make_solver
from evokit_py.train import train
from evokit_py.training.setup import setup_run


def _median_us(function, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e6)


def _spin(n: int) -> None:
    total = 0
    for i in range(n):
        total += i


def raw_process_speedup(n: int = 3_000_000) -> float:
    """The same CPU-bound loop in 1 and in 2 plain processes: the parallelism the machine gives us
    right now (other jobs on the 2 cores cap it), the ceiling for the worker speed-up."""
    context = multiprocessing.get_context("fork")
    times = {}
    for count in (1, 2, 1, 2):
        processes = [context.Process(target=_spin, args=(n,)) for _ in range(count)]
        start = time.perf_counter()
        for process in processes:
            process.start()
        for process in processes:
            process.join()
        elapsed = time.perf_counter() - start
        times[count] = min(times.get(count, elapsed), elapsed)
    return round(2 * times[1] / times[2], 2)


def policy_latency(calls: int) -> dict:
    import paddle

    paddle.set_device("cpu")
    policy = OnnxPolicy(build_mlp(4, 2, [64, 64], "tanh", "none"))
    params = np.random.default_rng(0).standard_normal(policy.param_size).astype(np.float32) * 0.1
    policy.set_parameters(params)
    net = paddle.nn.Sequential(paddle.nn.Linear(4, 64), paddle.nn.Tanh(), paddle.nn.Linear(64, 64),
                               paddle.nn.Tanh(), paddle.nn.Linear(64, 2))
    offset = 0
    for layer in (net[0], net[2], net[4]):  # paddle's Linear weight is [in, out], as in the ONNX graph
        for tensor in (layer.weight, layer.bias):
            size = int(np.prod(tensor.shape))
            tensor.set_value(params[offset:offset + size].reshape(tensor.shape))
            offset += size
    obs = np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32)

    def paddle_step():
        with paddle.no_grad():
            return net(paddle.to_tensor(obs)).numpy()

    assert np.allclose(paddle_step(), policy(obs), atol=1e-5), "ONNX and paddle disagree"
    for _ in range(200):
        policy(obs), paddle_step()
    # interleaved blocks, the quietest block's median kept: other jobs on the cores come and go
    onnx_us = paddle_us = float("inf")
    for _ in range(10):
        onnx_us = min(onnx_us, _median_us(lambda: policy(obs), calls // 10))
        paddle_us = min(paddle_us, _median_us(paddle_step, calls // 10))
    return {"onnx_step_us": round(onnx_us, 2), "paddle_dygraph_step_us": round(paddle_us, 2),
            "onnx_speedup": round(paddle_us / onnx_us, 2)}


def episodes_per_second(candidates: int, repeats: int) -> dict:
    config = resolve_config(None, ["env.max_steps=200"])
    run = setup_run(config)
    solver = run.solver
    infos = [i.to_list() for i in (solver.ask() * (candidates // config.solver.population_size + 1))[:candidates]]
    basis = solver.basis()
    basis.centers[0, 1:8:2] = [0.0, 0.0, 1.0, 1.0]  # push right when the pole falls right: long episodes
    seeds = [[episode_seed(0, 0, i, 0)] for i in range(candidates)]
    configurations = {"inprocess": (1, "inprocess"), "1_worker": (1, "remote"), "2_workers": (2, "remote")}
    pools = {}
    best = dict.fromkeys(configurations, 0.0)
    steps = 0
    try:
        for label, (workers, backend) in configurations.items():
            pools[label] = EvaluationPool(config, run.policy.to_bytes(), run.noise_spec(), workers, backend)
            pools[label].evaluate(basis.to_dict(), None, None, infos[:4], seeds[:4])  # warm-up
        for _ in range(repeats):  # interleaved, so that every configuration sees the same background load
            for label, pool in pools.items():
                start = time.perf_counter()
                steps = pool.evaluate(basis.to_dict(), None, None, infos, seeds)["steps"]
                best[label] = max(best[label], candidates / (time.perf_counter() - start))
    finally:
        for pool in pools.values():
            pool.close()
        run.close()
    results = {}
    for label, rate in best.items():
        results[f"episodes_per_s_{label}"] = round(rate, 1)
        results[f"steps_per_s_{label}"] = round(rate * steps / candidates)
    results["speedup_2_vs_1_worker"] = round(results["episodes_per_s_2_workers"]
                                             / results["episodes_per_s_1_worker"], 2)
    return results


def _quiet(line: str) -> None:
    pass


MODES = {"sync": ["train.mode=sync"], "async": ["train.mode=async"],
         "async_no_lookahead": ["train.mode=async", "train.lookahead=false"]}
"""The modes compared: async (lookahead on, the default) and async as EvoKit does it."""


def _train_config(workdir: Path, label: str, overrides):
    run = workdir / label
    return resolve_config(None, [f"train.log_dir={run}", f"train.checkpoint_dir={run}/ck", "train.workers=2",
                                 "train.checkpoint_every=1000", *overrides])


def _seeded(seed: int) -> list[str]:
    """The overrides that make a run of the built-in job seed ``seed`` (environments and noise)."""
    return [f"seed={seed}", f"solver.sampling.gaussian_sampling.seed={seed + 7}"]


def _balancing_policy(workdir: Path) -> Path:
    """A linear CartPole policy (no observation normalisation) that balances: the built-in job,
    trained in this process until its evaluation mean reaches 475."""
    config = _train_config(workdir, "source", ["observation_normalization=false", "train.generations=60"])
    result = train(config, backend="inprocess", echo=_quiet)
    if not result.solved:
        raise RuntimeError("the source policy for the async benchmark did not reach 475")
    return result.onnx_path


def _run_to_475(workdir: Path, mode: str, seed: int) -> tuple[float | None, float | None, int]:
    """One run of the built-in job: (whole call, call without start-up) in seconds (None if not
    solved), and its generations."""
    result = train(_train_config(workdir, mode, [*MODES[mode], *_seeded(seed)]), echo=_quiet)
    if not result.solved:
        return None, None, result.generations
    return result.total_seconds, result.total_seconds - result.startup_seconds, result.generations


def async_vs_sync(generations: int, throughput_seeds: int, seeds: int, runs_475: int) -> dict:
    """Evaluations/s of sync and async on widely varying episode lengths, and time to 475 of the three
    :data:`MODES`."""
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        policy = _balancing_policy(workdir)
        varied = [f"policy.onnx={policy}", "observation_normalization=false", "solver.population_size=8",
                  "env.max_steps=5000", "solver.sampling.gaussian_sampling.std=0.2",
                  "solver.optimizer.base_lr=0.0001", "solver.max_staleness=16",
                  "train.target_return=null", f"train.generations={generations}", f"train.eval_every={generations}",
                  "train.eval_episodes=1"]
        totals = {mode: {"episodes": 0, "steps": 0, "seconds": 0.0} for mode in ("sync", "async")}
        for seed in range(throughput_seeds):  # interleaved: both modes see the same background load
            for mode, total in totals.items():
                result = train(_train_config(workdir, mode, [*MODES[mode], *varied, *_seeded(seed)]), echo=_quiet)
                total["episodes"] += result.episodes
                total["steps"] += result.steps
                total["seconds"] += result.train_seconds
        rates = {mode: total["episodes"] / total["seconds"] for mode, total in totals.items()}
        step_rates = {mode: total["steps"] / total["seconds"] for mode, total in totals.items()}
        figures.update({f"varied_episodes_per_s_{mode}": round(rate, 1) for mode, rate in rates.items()})
        figures.update({f"varied_steps_per_s_{mode}": round(rate) for mode, rate in step_rates.items()})
        figures.update({f"varied_mean_episode_steps_{mode}": round(total["steps"] / total["episodes"])
                        for mode, total in totals.items()})
        figures["async_vs_sync_evaluations_per_s"] = round(rates["async"] / rates["sync"], 2)
        figures["async_vs_sync_steps_per_s"] = round(step_rates["async"] / step_rates["sync"], 2)
        runs: dict[str, list[list]] = {mode: [[] for _ in range(seeds)] for mode in MODES}  # per seed, per run
        for seed in range(seeds):
            for _ in range(runs_475):  # interleaved, so that every mode sees the same background load
                for mode in MODES:
                    runs[mode][seed].append(_run_to_475(workdir, mode, seed))
    for mode, per_seed in runs.items():
        figures[f"seconds_to_475_{mode}"] = [_median_or_none([run[0] for run in seed_runs]) for seed_runs in per_seed]
        figures[f"seconds_to_475_without_startup_{mode}"] = [_median_or_none([run[1] for run in seed_runs])
                                                            for seed_runs in per_seed]
        figures[f"generations_to_475_{mode}"] = [[run[2] for run in seed_runs] for seed_runs in per_seed]
    for mode in ("async", "async_no_lookahead"):
        for key in ("seconds_to_475", "seconds_to_475_without_startup"):
            ours, base = figures[f"{key}_{mode}"], figures[f"{key}_sync"]
            if None not in ours and None not in base:
                figures[f"median_{key}_{mode}_vs_sync"] = round(float(np.median(ours) / np.median(base)), 2)
                figures[f"total_{key}_{mode}_vs_sync"] = round(sum(ours) / sum(base), 2)
    return figures


def _geometric_mean_ratio(ratios: np.ndarray) -> list[float]:
    """The geometric mean of per-seed ratios and its 95% confidence interval (normal approximation)."""
    logs = np.log(ratios)
    half = 1.96 * logs.std(ddof=1) / np.sqrt(len(logs))
    return [round(float(np.exp(value)), 3) for value in (logs.mean(), logs.mean() - half, logs.mean() + half)]


def async_study(seeds: int) -> dict:
    """Time and updates to 475 over many seeds, one run each, the modes interleaved and paired by seed.

    Three seeds cannot tell the modes apart: a seed's update count depends on its noise draws (over
    40 seeds the total moves by 10-25% between two sets of draws), and one run's time by 10-20% with
    the load. Paired by seed (the same draws in every mode up to the update where they part), the
    per-seed ratios of many seeds can.
    """
    results: dict[str, list[tuple]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(seeds):
            for mode in MODES:
                results[mode].append(_run_to_475(Path(folder), mode, seed))
    solved = [i for i in range(seeds) if all(results[mode][i][0] is not None for mode in MODES)]
    figures: dict = {"study_seeds": seeds, "study_solved_by_every_mode": len(solved)}
    base = np.array([results["sync"][i] for i in solved], dtype=float)
    for mode in MODES:
        runs = np.array([results[mode][i] for i in solved], dtype=float)
        figures[f"study_updates_{mode}"] = int(runs[:, 2].sum())
        figures[f"study_seconds_{mode}"] = round(float(runs[:, 0].sum()), 2)
        figures[f"study_seconds_without_startup_{mode}"] = round(float(runs[:, 1].sum()), 2)
        if mode == "sync":
            continue
        extra = runs[:, 2] - base[:, 2]
        figures[f"study_{mode}_vs_sync_extra_updates_per_seed"] = [
            round(float(extra.mean()), 2), round(float(extra.std(ddof=1) / np.sqrt(len(extra))), 2)]  # mean, SE
        figures[f"study_{mode}_vs_sync_seconds_geomean_ci95"] = _geometric_mean_ratio(runs[:, 0] / base[:, 0])
        figures[f"study_{mode}_vs_sync_seconds_without_startup_geomean_ci95"] = \
            _geometric_mean_ratio(runs[:, 1] / base[:, 1])
        figures[f"study_{mode}_faster_than_sync_share"] = round(float(np.mean(runs[:, 0] < base[:, 0])), 2)
    return figures


def _median_or_none(seconds: list) -> float | None:
    """The median of a seed's runs, ``None`` when one of them did not reach the target."""
    return None if None in seconds else round(float(np.median(seconds)), 3)


def _sphere(x):
    return float(x @ x)


def _ellipsoid(x):
    return float(np.sum(10 ** (6 * np.arange(len(x)) / (len(x) - 1)) * x * x))


def _rosenbrock(x):
    return float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))


CMA_FUNCTIONS = {"sphere": (_sphere, 1.0), "ellipsoid": (_ellipsoid, 1.0), "rosenbrock": (_rosenbrock, 0.0)}


def _our_cma(x0: np.ndarray, sigma0: float, lam: int, seed: int, pycma_draws: bool = False):
    config = parse_config({"solver": {"type": "CMA_ES", "population_size": lam, "sampling": {
        "gaussian_sampling": {"std": sigma0, "seed": seed, "cached": False}}}})
    noise = StreamNoise(seed, len(x0)) if pycma_draws else NoiseSource(seed, len(x0))
    solver = make_solver(config.solver, x0, noise)

    def generation(f):
        infos = solver.ask()
        values = [f(x) for x in solver.basis().candidates(infos, solver.noise)]
        solver.tell(infos, [-v for v in values])
        return min(values)
    return generation


def _pycma(cma, x0: np.ndarray, sigma0: float, lam: int, seed: int):
    es = cma.CMAEvolutionStrategy(x0, sigma0, {"verbose": -9, "seed": seed, "popsize": lam})

    def generation(f):
        candidates = es.ask()
        values = [f(x) for x in candidates]
        es.tell(candidates, values)
        return min(values)
    return generation


def _evaluations_to(generation, f, lam: int, target: float = 1e-8, budget: int = 30000) -> int:
    evaluations = 0
    while evaluations < budget:
        evaluations += lam
        if generation(f) < target:
            return evaluations
    return budget * 10  # not reached: counts as far worse than any success in the median


def cma_vs_pycma(seeds: int, generations: int) -> dict:
    """Evaluations to 1e-8 (10-D, lambda 10, sigma0 0.5) and ms per generation at 500-D."""
    try:
        import cma
    except ImportError:
        return {"cma_skipped": "pycma not installed (pip install cma)"}
    figures = {"pycma_version": cma.__version__}
    for name, (f, start) in CMA_FUNCTIONS.items():
        x0 = np.full(10, start)
        runs = {"ours": partial(_our_cma, x0, 0.5, 10, pycma_draws=True),
                "ours_own_draws": partial(_our_cma, x0, 0.5, 10),
                "pycma": partial(_pycma, cma, x0, 0.5, 10)}
        counts = {label: [_evaluations_to(run(seed), f, 10) for seed in range(1, seeds + 1)]
                  for label, run in runs.items()}
        figures.update({f"cma_evals_{name}_{label}": values for label, values in counts.items()})
        for label in ("ours", "ours_own_draws"):
            figures[f"cma_evals_{name}_median_{label}_vs_pycma"] = [int(np.median(counts[label])),
                                                                    int(np.median(counts["pycma"]))]
    dim = 500
    lam = 4 + int(3 * np.log(dim))
    runs = {"ours": _our_cma(np.ones(dim), 0.5, lam, 1), "pycma": _pycma(cma, np.ones(dim), 0.5, lam, 1)}
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(4):  # interleaved blocks, the quietest block kept
        for label, generation in runs.items():
            start = time.perf_counter()
            for _ in range(generations):
                generation(_sphere)
            best[label] = min(best[label], (time.perf_counter() - start) / generations * 1e3)
    figures.update({f"cma_ms_per_generation_{dim}d_{label}": round(ms, 2) for label, ms in best.items()})
    figures[f"cma_ms_per_generation_{dim}d_ours_vs_pycma"] = round(best["ours"] / best["pycma"], 2)
    return figures


@click.command()
@click.option("--calls", default=3000, show_default=True, help="Policy calls timed per engine.")
@click.option("--candidates", default=64, show_default=True, help="Candidates (episodes) per evaluation.")
@click.option("--repeats", default=5, show_default=True, help="Evaluations per configuration (best kept).")
@click.option("--only", default="sampling,async,study,cma", show_default=True, help="Which parts to run.")
@click.option("--async-generations", default=100, show_default=True, help="Generations per async/sync throughput run.")
@click.option("--async-seeds", default=5, show_default=True, help="Seeds of the async/sync throughput runs (totals).")
@click.option("--seeds", default=3, show_default=True, help="CartPole seeds for the time to 475.")
@click.option("--runs-475", default=3, show_default=True,
              help="Runs per seed and mode for the time to 475 (the seed's median is kept).")
@click.option("--study-seeds", default=200, show_default=True,
              help="Seeds of the paired study of the three modes' time to 475 (one run each; 200 take ~9 min).")
@click.option("--cma-seeds", default=5, show_default=True, help="Seeds per function for CMA-ES vs pycma.")
def main(calls: int, candidates: int, repeats: int, only: str, async_generations: int, async_seeds: int,
         seeds: int, runs_475: int, study_seeds: int, cma_seeds: int) -> None:
    """Print one JSON line of ES figures."""
    parts = set(only.split(","))
    load_before = os.getloadavg()[0]
    figures = {}
    if parts & {"sampling", "async"}:  # the parallelism the other jobs on the machine leave us
        figures["raw_process_speedup_2_vs_1"] = raw_process_speedup()
    if "sampling" in parts:
        figures.update(episodes_per_second(candidates, repeats))
        figures.update(policy_latency(calls))
    if "async" in parts:
        click.echo("async vs sync ...", err=True)
        figures.update(async_vs_sync(async_generations, async_seeds, seeds, runs_475))
    if "study" in parts:
        click.echo(f"sync and async over {study_seeds} seeds ...", err=True)
        figures.update(async_study(study_seeds))
    if "cma" in parts:
        click.echo("CMA-ES vs pycma ...", err=True)
        figures.update(cma_vs_pycma(cma_seeds, 25))
    figures["load_avg_1min_before"] = round(load_before, 2)  # other jobs on the 2 cores skew the speed-ups
    figures["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    click.echo(json.dumps(figures))


if __name__ == "__main__":
    main()
