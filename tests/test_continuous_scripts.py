"""Smoke runs of the Pendulum scripts (a few hundred steps each) and exact repetition by seed."""
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHORT = ["--total-steps", "300", "--learning-starts", "150", "--batch-size", "32", "--hidden", "16",
         "--eval-every", "150", "--eval-episodes", "1", "--log-every", "150"]


def run_script(name: str, tmp_path: Path, *extra: str) -> dict:
    save = tmp_path / f"{name}.h5"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{name}_pendulum.py"), *SHORT,
                           "--save", str(save), *extra],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert any("steps/s" in line and "recent return" in line for line in lines), done.stdout
    summary = json.loads(lines[-1])
    assert summary["checkpoint"] == str(save) and save.is_file()
    return summary


def checkpoint_weights(path: str) -> dict:
    with h5py.File(path, "r") as file:
        found = {}
        file["models"].visititems(lambda name, item: found.__setitem__(name, item[()])
                                  if isinstance(item, h5py.Dataset) else None)
    return found


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["ddpg", "td3", "sac"])
def test_script_trains_evaluates_and_saves(name, tmp_path):
    summary = run_script(name, tmp_path, "--seed", "2")
    assert summary["algorithm"] == name.upper() and summary["seed"] == 2
    assert summary["steps"] == 300 and np.isfinite(summary["eval_return"])
    assert summary["updates_per_second"] > 0
    with h5py.File(summary["checkpoint"], "r") as file:
        assert {"model", "target_model"} <= set(file["models"])


@pytest.mark.timeout(240)
def test_stops_at_the_target(tmp_path):
    summary = run_script("td3", tmp_path, "--target=-1e9")
    assert summary["solved"] and summary["steps"] == 150


@pytest.mark.timeout(240)
def test_same_seed_repeats_the_run_exactly(tmp_path):
    first = run_script("sac", tmp_path / "a", "--seed", "5")
    second = run_script("sac", tmp_path / "b", "--seed", "5")
    other = run_script("sac", tmp_path / "c", "--seed", "6")
    assert first["eval_return"] == second["eval_return"]
    assert first["eval_return"] != other["eval_return"]
    first_weights, second_weights = checkpoint_weights(first["checkpoint"]), checkpoint_weights(second["checkpoint"])
    assert first_weights.keys() == second_weights.keys()
    for name in first_weights:
        np.testing.assert_array_equal(first_weights[name], second_weights[name], err_msg=name)
