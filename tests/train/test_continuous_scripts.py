"""The Pendulum scripts end to end (a few hundred steps each), and the off-policy loop's stopping
and exact repetition by seed through the parl_lite.train API."""
import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import paddle
import pytest

from parl_lite import train
from parl_lite.algorithms import SAC, TD3
from parl_lite.utils.models import MLPActorQ
from locations import ROOT

SHORT = ["--total-steps", "300", "--learning-starts", "150", "--batch-size", "32", "--net-arch", "16,16",
         "--eval-every", "150", "--eval-episodes", "1"]


def run_script(name: str, tmp_path: Path, *extra: str) -> dict:
    save = tmp_path / f"{name}.h5"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "examples" / f"train_{name}.py"), *SHORT,
                           "--save", str(save), *extra], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["checkpoint"] == str(save) and save.is_file()
    return summary


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["ddpg", "td3", "sac"])
def test_script_trains_evaluates_and_saves(name, tmp_path):
    summary = run_script(name, tmp_path, "--seed", "2")
    assert summary["algo"] == name.upper() and summary["seed"] == 2
    assert summary["steps"] == 300 and np.isfinite(summary["eval_return"])
    assert summary["updates"] == 150 and summary["updates_per_second"] > 0
    with h5py.File(summary["checkpoint"], "r") as file:
        assert {"model", "target_model"} <= set(file["models"])


def _run(algorithm_cls, seed, target=None, save=None):
    paddle.seed(seed)
    algorithm = algorithm_cls(MLPActorQ(3, 1, 16, twin_q=True, gaussian=algorithm_cls is SAC))
    noise = None if algorithm_cls is SAC else 0.1
    exploration = train.ContinuousExploration(1, noise, 150, seed)
    trainer = train.OffPolicyTrainer(algorithm, "Pendulum-v1", exploration=exploration,
                                     learning_starts=150, batch_size=32, seed=seed, eval_every=150, eval_episodes=1,
                                     target=target, save=save)
    return trainer.learn(300, progress_bar=False), algorithm


@pytest.mark.timeout(240)
def test_stops_at_the_target():
    summary, _ = _run(TD3, 1, target=-1e9)
    assert summary.solved and summary.steps == 150 and summary.solved_at == 150


@pytest.mark.timeout(240)
def test_same_seed_repeats_the_run_exactly():
    (first, first_alg), (second, second_alg), (other, _) = _run(SAC, 5), _run(SAC, 5), _run(SAC, 6)
    assert first.eval_return == second.eval_return
    assert first.eval_return != other.eval_return
    first_weights, second_weights = first_alg.model.get_weights(), second_alg.model.get_weights()
    for name in first_weights:
        np.testing.assert_array_equal(first_weights[name], second_weights[name], err_msg=name)
