"""Every training script end to end (short runs through the command line, one JSON summary schema),
and exact repetition of seeded runs through the parl_lite.train API."""
import csv
import dataclasses
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite import train
from parl_lite.algorithms import A2C, DDQN, DQN, PPO
from parl_lite.utils.models import MLPActorCritic, MLPQNetwork
from locations import ROOT

EXAMPLES = ROOT / "scripts" / "examples"
BENCH = ROOT / "scripts" / "bench"
SUMMARY_KEYS = {field.name for field in dataclasses.fields(train.RunSummary)} | {"solved"}


def run_script(name, *args, timeout=200):
    """Run a script to completion; return its JSON summary (the last line), checking the schema."""
    result = subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)], capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(summary) == SUMMARY_KEYS, summary
    return summary


def restore(algorithm, path):
    parl_lite.Agent(algorithm).restore(path)
    return algorithm


@pytest.mark.timeout(120)
def test_ppo_pendulum_smoke_with_shared_trunk(tmp_path):
    summary = run_script("train_ppo.py", "--env", "Pendulum-v1", "--total-steps", 256, "--rollout-steps", 64,
                         "--shared", "--save", tmp_path / "ppo.h5")
    assert summary["env"] == "Pendulum-v1" and summary["steps"] == 256 and summary["eval_return"] < 0
    assert summary["updates"] == 40  # 10 epochs of 4 minibatches of 64: one learn each
    restore(PPO(MLPActorCritic(3, 1, 64, continuous=True, shared=True), continuous_action=True), tmp_path / "ppo.h5")


@pytest.mark.timeout(120)
def test_a2c_smoke(tmp_path):
    summary = run_script("train_a2c.py", "--total-steps", 400, "--eval-every", 200, "--target", 1e9,
                         "--save", tmp_path / "a2c.h5")
    assert summary["algo"] == "A2C" and summary["steps"] == 400 and summary["updates"] == 10
    restore(A2C(MLPActorCritic(4, 2, 64)), tmp_path / "a2c.h5")


@pytest.mark.timeout(120)
def test_dqn_script_smoke(tmp_path):
    summary = run_script("train_dqn.py", "--total-steps", 1100, "--eval-every", 1100, "--target", 1e9,
                         "--no-double", "--save", tmp_path / "dqn.h5")
    assert summary["algo"] == "DQN" and summary["steps"] == 1100
    restore(DQN(MLPQNetwork(4, 2, 256), gamma=0.99, lr=1e-3), tmp_path / "dqn.h5")


def _ppo_run(tmp_path, label, seed):
    paddle.seed(seed)
    ppo = PPO(MLPActorCritic(4, 2, 64), clip_param=0.2, value_loss_coef=1.0, initial_lr=1e-3,
              use_clipped_value_loss=False)
    trainer = train.OnPolicyTrainer(ppo, "CartPole-v1", num_envs=8, rollout_steps=32, gamma=0.98, gae_lambda=0.8,
                                    epochs=4, minibatch_size=64, anneal=True, seed=seed, eval_every=256,
                                    target=1e9, logdir=str(tmp_path / label), save=str(tmp_path / f"{label}.h5"))
    return trainer.learn(512, progress_bar=False)


@pytest.mark.timeout(200)
def test_ppo_logs_and_seed_repeats_the_run_exactly(tmp_path):
    runs = {label: (_ppo_run(tmp_path, label, seed), _read_h5(tmp_path / f"{label}.h5"))
            for label, seed in (("a", 4), ("b", 4), ("c", 5))}
    summary = runs["a"][0]
    assert summary.algo == "PPO" and summary.steps == 512 and summary.updates == 32 and summary.solved_at is None
    with open(tmp_path / "a" / "scalars.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["tag"] == "eval/return"]
    assert [int(row["step"]) for row in rows] == [256, 512]
    assert float(rows[-1]["value"]) == summary.eval_return
    assert list((tmp_path / "a").glob("events.out.tfevents.*"))
    restore(PPO(MLPActorCritic(4, 2, 64)), tmp_path / "a.h5")
    _assert_same_run(runs)


def _dqn_run(tmp_path, label, seed):
    paddle.seed(seed)
    dqn = DDQN(MLPQNetwork(4, 2, 256), gamma=0.99, lr=2.3e-3, loss="huber", max_grad_norm=10.0)
    exploration = train.EpsilonGreedy(2, 1.0, 0.04, 8_000, seed=seed)
    trainer = train.OffPolicyTrainer(dqn, "CartPole-v1", exploration=exploration,
                                     learning_starts=1_000, train_every=256, gradient_steps=64, batch_size=64,
                                     memory_size=100_000, target_every=256, seed=seed, eval_every=1100, target=1e9,
                                     save=str(tmp_path / f"{label}.h5"), name="DDQN")
    return trainer.learn(1100, progress_bar=False)


@pytest.mark.timeout(200)
def test_dqn_seed_repeats_the_run_exactly(tmp_path):
    runs = {label: (_dqn_run(tmp_path, label, seed), _read_h5(tmp_path / f"{label}.h5"))
            for label, seed in (("a", 4), ("b", 4), ("c", 5))}
    assert runs["a"][0].algo == "DDQN" and runs["a"][0].steps == 1100 and runs["a"][0].updates == 64
    restore(DQN(MLPQNetwork(4, 2, 256), gamma=0.99, lr=1e-3), tmp_path / "a.h5")
    _assert_same_run(runs)


def _assert_same_run(runs):
    """Runs a and b (same seed) are identical to the bit; run c (another seed) differs."""
    assert runs["a"][0].eval_return == runs["b"][0].eval_return
    for name, value in runs["a"][1].items():
        np.testing.assert_array_equal(value, runs["b"][1][name], err_msg=name)
    assert any(not np.array_equal(value, runs["c"][1][name]) for name, value in runs["a"][1].items())


def _read_h5(path):
    """Every model dataset of a checkpoint, by path."""
    weights = {}
    with h5py.File(path, "r") as f:
        f["models"].visititems(lambda name, obj: weights.__setitem__(name, obj[()])
                               if isinstance(obj, h5py.Dataset) else None)
    return weights


@pytest.mark.timeout(150)
@pytest.mark.parametrize("script,algo", [("train_a3c.py", "A3C"), ("train_impala.py", "IMPALA")])
def test_remote_actor_scripts_smoke(tmp_path, script, algo):
    summary = run_script(script, "--actors", 2, "--total-steps", 800, "--eval-every", 400, "--target", 1e9,
                         "--save", tmp_path / "agent.h5", timeout=140)
    assert summary["algo"] == algo and summary["actors"] == 2 and summary["steps"] >= 800
    restore(A2C(MLPActorCritic(4, 2, 64)), tmp_path / "agent.h5")


@pytest.mark.timeout(180)
def test_bench_algos_prints_one_json_line():
    result = subprocess.run([sys.executable, str(BENCH / "bench_algos.py"), "--mode", "throughput",
                             "--seconds", "0.05"], capture_output=True, text=True, timeout=170, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    figures = json.loads(lines[0])
    for name in ("PPO_CartPole", "PPO_Pendulum", "A2C_CartPole", "DQN_CartPole", "A3C_CartPole", "IMPALA_CartPole",
                 "DDPG_Pendulum", "TD3_Pendulum", "SAC_Pendulum"):
        assert figures[name]["env_steps_per_s"] > 0 and figures[name]["updates_per_s"] > 0, name


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", [["--mode", "parity"], ["--algos", "PPO", "--seeds", "1"]])
def test_bench_algos_leaves_nothing_in_the_temporary_directory_after_sb3_runs(tmp_path, mode):
    """stable-baselines3's default logger makes a folder under the temporary directory for each model."""
    pytest.importorskip("stable_baselines3")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = subprocess.run([sys.executable, str(BENCH / "bench_algos.py"), *mode], capture_output=True, text=True,
                            timeout=290, cwd=ROOT, env={**os.environ, "TMPDIR": str(temporary)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])
    # torch's per-user compile cache (made on importing stable-baselines3, shared by later runs) and the
    # session marker onnxruntime (1.32) writes on import may stay
    assert [path.name for path in temporary.iterdir()
            if not path.name.startswith("torchinductor_") and path.name != ".ses"] == []
