"""Behaviour and speed of two versions of the project, in one run; prints ONE JSON line.

A redesign must not change what a run computes nor how fast: this runs the same jobs, with the same
seeds, under two Python interpreters whose ``parl_lite`` / ``evokit_py`` are the two versions (e.g. a
virtual environment of a checkout of the earlier commit, ``--before``, and this one's, ``--after``),
and compares what they wrote:

- es-train on CartPole-v1, sync (2 workers) and async (1 worker: the order results arrive in is then
  fixed), a few generations: the exported ``policy.onnx``'s weights;
- PPO (``train_ppo.py``, in-process environments) and IMPALA (``train_impala.py``, one rollout
  actor on the local pool) on CartPole-v1: the checkpoint's datasets;
- speed, the versions interleaved ``--rounds`` times (median of each): ``bench_es.py --only sampling``
  (episodes/s on 1 and 2 pool workers) and ``bench_remote.py``'s call latency and throughput.

Each comparison gives the largest absolute difference over the arrays both wrote and the names only
one wrote; ``same`` is true when every shared array is bit-identical.

    python scripts/bench/bench_before_after.py --before /path/to/before/.venv/bin/python
"""
import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np

ES_SETTINGS = ["env.max_steps=200", "solver.population_size=16", "train.generations=6", "train.eval_every=3",
               "train.eval_episodes=2", "train.target_return=null", "train.checkpoint_every=3", "seed=3"]
REMOTE_ARGS = ["--array-repeats", "1", "--example-rounds", "1", "--echo-rounds", "1", "--creation-rounds", "2"]
SPEED_FIGURES = {"bench_es": ["episodes_per_s_1_worker", "episodes_per_s_2_workers"],
                 "bench_remote": ["sync_call_us", "async_calls_per_s"]}


def _run(python: str, args: list[str], folder: Path, timeout: float = 900) -> str:
    """Run ``python args`` in ``folder`` (a folder of its own: the version's modules are those of
    ``python``'s environment, never this checkout's); its stdout."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    result = subprocess.run([python, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{python} {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


@functools.cache
def _scripts(python: str) -> Path:
    """The ``scripts`` folder of the checkout ``python`` imports ``parl_lite`` from (each version runs
    its own scripts and benches)."""
    package = subprocess.run([python, "-c", "import parl_lite; print(parl_lite.__file__)"], capture_output=True,
                             text=True, check=True, cwd=tempfile.gettempdir()).stdout.strip()
    return Path(package).parent.parent / "scripts"


def _onnx_weights(path: Path) -> dict[str, np.ndarray]:
    import onnx
    from onnx import numpy_helper

    return {tensor.name: numpy_helper.to_array(tensor) for tensor in onnx.load(str(path)).graph.initializer}


def _hdf5_arrays(path: Path) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as file:
        file.visititems(lambda name, item: arrays.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset)
                        else None)
    return arrays


def _compare(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> dict:
    shared = sorted(set(before) & set(after))
    numeric = [name for name in shared if np.asarray(before[name]).dtype.kind in "fiub"
               and np.shape(before[name]) == np.shape(after[name])]
    as_float = {side: {name: np.asarray(arrays[name], np.float64) for name in numeric}
                for side, arrays in (("before", before), ("after", after))}
    differences = {name: float(np.max(np.abs(as_float["before"][name] - as_float["after"][name]), initial=0.0))
                   for name in numeric}
    return {"arrays_compared": len(numeric), "same": all(value == 0.0 for value in differences.values()),
            "l2_norm_after": float(np.sqrt(sum(np.sum(array ** 2) for array in as_float["after"].values()))),
            "max_abs_difference": max(differences.values(), default=0.0),
            "differing": sorted(name for name, value in differences.items() if value != 0.0)[:10],
            "only_before": sorted(set(before) - set(after))[:10], "only_after": sorted(set(after) - set(before))[:10]}


def _es_train(python: str, folder: Path, mode: str, workers: int) -> dict[str, np.ndarray]:
    settings = [*ES_SETTINGS, f"train.mode={mode}", f"train.workers={workers}", "train.log_dir=run",
                "train.checkpoint_dir=run/ck"]
    _run(python, ["-m", "parl_lite.cli", "es-train", *[arg for setting in settings for arg in ("--set", setting)]],
         folder)
    return _onnx_weights(folder / "run" / "policy.onnx")


def _script(python: str, folder: Path, script: str, args: list[str]) -> dict[str, np.ndarray]:
    _run(python, [str(_scripts(python) / "examples" / script), "--seed", "1", "--save", "run.h5", *args], folder)
    return _hdf5_arrays(folder / "run.h5")


JOBS = {
    "es_train_sync": lambda python, folder: _es_train(python, folder, "sync", 2),
    "es_train_async": lambda python, folder: _es_train(python, folder, "async", 1),
    "ppo_cartpole": lambda python, folder: _script(python, folder, "train_ppo.py",
                                                   ["--total-steps", "4096", "--eval-every", "2048"]),
    "impala_cartpole_1_actor": lambda python, folder: _script(python, folder, "train_impala.py",
                                                              ["--actors", "1", "--total-steps", "4000",
                                                               "--eval-every", "2000"]),
}


def _speed(python: str, folder: Path, rounds: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}
    for _ in range(rounds):
        for bench, args in (("bench_es", ["--only", "sampling"]), ("bench_remote", REMOTE_ARGS)):
            line = _run(python, [str(_scripts(python) / "bench" / f"{bench}.py"), *args], folder,
                        timeout=1800).strip().splitlines()[-1]
            measured = json.loads(line)
            for key in SPEED_FIGURES[bench]:
                if key in measured:
                    figures.setdefault(f"{bench}.{key}", []).append(float(measured[key]))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="python of the earlier version's environment")
    parser.add_argument("--after", default=sys.executable, help="python of the later version's environment")
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the speed benches (0: none)")
    args = parser.parse_args()
    result: dict = {"before": args.before, "after": args.after}
    with tempfile.TemporaryDirectory(prefix="before_after_") as temp:
        root = Path(temp)
        for job in args.jobs.split(","):
            outputs = {side: JOBS[job](python, root / job / side)
                       for side, python in (("before", args.before), ("after", args.after))}
            result[job] = _compare(outputs["before"], outputs["after"])
            print(f"{job}: {result[job]}", file=sys.stderr, flush=True)
        speeds: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
        for _ in range(args.rounds):
            for side, python in (("before", args.before), ("after", args.after)):
                for key, values in _speed(python, root / "speed" / side, 1).items():
                    speeds[side].setdefault(key, []).extend(values)
        result["speed"] = {key: {"before": statistics.median(speeds["before"][key]),
                                 "after": statistics.median(speeds["after"][key]),
                                 "after_over_before": statistics.median(speeds["after"][key])
                                 / statistics.median(speeds["before"][key])}
                           for key in speeds["after"] if key in speeds["before"]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
