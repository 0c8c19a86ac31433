"""ARS V2-t with the shipped configs on MuJoCo: Swimmer to its threshold in CI; Hopper and
HalfCheetah (minutes of CPU each) as benchmarks (``python -m pytest -m benchmark``)."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import pytest

import parl_lite
from evokit_py.config import resolve_config
from evokit_py.train import train
from parl_lite.remote.shm import session_segments
from remote_helpers import assert_nothing_left, processes_with

pytest.importorskip("mujoco")
import gymnasium as gym  # noqa: E402
from locations import EXAMPLES



def _train_to_threshold(tmp_path, monkeypatch, name, episodes, seed=0):
    """es-train with the shipped config ``name`` for at most ``episodes`` training episodes, on 2 workers,
    with ``seed`` as ``bench_es_mujoco.py`` sets it (the noise seed is ``seed + 7``)."""
    monkeypatch.chdir(tmp_path)  # MuJoCo 4 writes its warnings about gymnasium's models to MUJOCO_LOG.TXT here
    folders = [f"train.log_dir={tmp_path}/run", f"train.checkpoint_dir={tmp_path}/run/ck"]
    seeds = [f"seed={seed}", f"solver.sampling.gaussian_sampling.seed={seed + 7}"]
    population = resolve_config(EXAMPLES / name).solver.population_size
    config = resolve_config(EXAMPLES / name, [*folders, *seeds, f"train.generations={episodes // population}"])
    try:
        result = train(config, echo=lambda line: None, progress_bar=False)
    finally:
        parl_lite.shutdown()
    return config, result


def _replay(config, path, episodes):
    """The exported policy's mean return on fresh episodes (seeds apart from training's)."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    env = gym.make(config.env.id, max_episode_steps=config.env.max_steps)
    low, high = env.action_space.low, env.action_space.high
    returns = []
    for seed in range(10**9, 10**9 + episodes):
        obs, _ = env.reset(seed=seed)
        total, ended = 0.0, False
        while not ended:
            action = session.run(None, {"obs": obs[None].astype(np.float32)})[0][0]
            obs, reward, terminated, truncated, _ = env.step(np.clip(action, low, high))
            total, ended = total + float(reward), terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


@pytest.mark.timeout(900)
def test_ars_v2t_trains_swimmer_to_325_within_the_papers_episodes(tmp_path, monkeypatch):
    """The paper's Table 1: 427 episodes for V2-t on Swimmer; es_swimmer.yaml on seed 8 needs fewer
    (60 in the bench; 29 of seeds 0-39 need at most 427, see
    benchmarks/2026-11-26-es-ars-swimmer-noise.md), confirmed on 20 fresh
    episodes, and its exported policy does it again on 5 others."""
    config, result = _train_to_threshold(tmp_path, monkeypatch, "es_swimmer.yaml", episodes=427, seed=8)
    assert result.solved and result.episodes <= 427, result.summary
    assert result.confirmed_return is not None and result.confirmed_return >= 325
    assert _replay(config, result.onnx_path, 5) >= 325


@pytest.mark.benchmark
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name, threshold, episodes", [("es_hopper.yaml", 3120, 1973),
                                                       ("es_halfcheetah.yaml", 3430, 1707)])
def test_ars_v2t_reaches_the_threshold_within_twice_the_papers_episodes(tmp_path, monkeypatch, name, threshold,
                                                                          episodes):
    config, result = _train_to_threshold(tmp_path, monkeypatch, name, episodes=2 * episodes)
    assert result.solved and result.episodes <= 2 * episodes, result.summary
    assert _replay(config, result.onnx_path, 5) >= threshold * 0.9


@pytest.mark.timeout(60)
@pytest.mark.parametrize("override, named", [("delta=0.03", "KEY one of ['alive_bonus_offset', 'delta_std'"),
                                             ("n_delta=0.5", "n_delta takes int values, like 1"),
                                             ("delta_std=abc", "delta_std takes float values, like 0.01")])
def test_the_mujoco_bench_refuses_a_wrong_peer_override_by_name_before_its_first_run(override, named):
    done = subprocess.run([sys.executable, str(EXAMPLES.parent / "bench" / "bench_es_mujoco.py"), "--tasks", "swimmer",
                           "--only", "sb3", "--peer-set", override], capture_output=True, text=True, timeout=50)
    assert done.returncode != 0 and named in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "swimmer seed" not in done.stderr  # no run started


V1_POLICY_BENCH = EXAMPLES.parent / "bench" / "bench_ars_v1_policies.py"


def _write_ars_policy(path, *arrays):
    """A policy file as the ARS authors' code writes it: ``np.savez`` of an object array."""
    packed = np.empty(len(arrays), dtype=object)
    packed[:] = arrays
    np.savez(path, packed)


@pytest.mark.timeout(120)
def test_the_v1_policy_bench_plays_an_ars_policy_file_as_the_authors_code_does(tmp_path):
    weights = np.random.default_rng(0).normal(0, 0.3, (2, 8))
    mean, std = np.linspace(-0.5, 0.5, 8), np.linspace(0.5, 2.0, 8)
    _write_ars_policy(tmp_path / "policy.npz", weights, mean, std)
    done = subprocess.run([sys.executable, str(V1_POLICY_BENCH), "--policy", f"Swimmer-v5={tmp_path / 'policy.npz'}",
                           "--episodes", "2"], capture_output=True, text=True, timeout=100, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])["tasks"]["Swimmer-v5"]
    env = gym.make("Swimmer-v5")
    returns = []
    for seed in (10**9, 10**9 + 1):
        obs, _ = env.reset(seed=seed)
        total, ended = 0.0, False
        while not ended:
            obs, reward, terminated, truncated, _ = env.step(weights @ ((obs - mean) / std))
            total, ended = total + float(reward), terminated or truncated
        returns.append(total)
    env.close()
    assert figures["return_mean"] == pytest.approx(np.mean(returns), abs=0.06)
    assert figures["return_min"] == pytest.approx(min(returns), abs=0.06)
    assert (figures["episode_length_mean"], figures["episodes_to_time_limit"]) == (1000, 2)


class _MakesAFolder:
    def __init__(self, folder):
        self.folder = folder

    def __reduce__(self):
        return os.mkdir, (str(self.folder),)


@pytest.mark.timeout(60)
def test_the_v1_policy_bench_unpickles_nothing_but_arrays_and_names_a_bad_file(tmp_path):
    made = tmp_path / "made-by-the-policy-file"
    _write_ars_policy(tmp_path / "hostile.npz", np.zeros((2, 8)), _MakesAFolder(made), np.ones(8))
    (tmp_path / "not-a-zip.npz").write_text("weights")
    _write_ars_policy(tmp_path / "wrong-shape.npz", np.zeros((3, 11)), np.zeros(11), np.ones(11))
    for file, named in [("hostile.npz", f"{os.mkdir.__module__}.mkdir, which is not part of a numpy array"),
                        ("not-a-zip.npz", "not an ARS policy file"),
                        ("wrong-shape.npz", "takes a policy M of shape (2, 8)")]:
        done = subprocess.run([sys.executable, str(V1_POLICY_BENCH), "--policy", f"Swimmer-v5={tmp_path / file}"],
                              capture_output=True, text=True, timeout=50, cwd=tmp_path)
        assert done.returncode != 0 and named in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert file in done.stderr or file == "wrong-shape.npz"
    assert not made.exists()
    done = subprocess.run([sys.executable, str(V1_POLICY_BENCH), "--policy", "Swimmer-v5"],
                          capture_output=True, text=True, timeout=50)
    assert done.returncode == 2 and "--policy takes ENV_ID=PATH" in done.stderr, done.stderr


@pytest.mark.timeout(180)
def test_the_mujoco_bench_leaves_nothing_in_the_temporary_directory_after_a_peer_run(tmp_path):
    """stable-baselines3's default logger makes a folder under the temporary directory for each model."""
    pytest.importorskip("sb3_contrib")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = subprocess.run([sys.executable, str(EXAMPLES.parent / "bench" / "bench_es_mujoco.py"), "--tasks", "swimmer",
                           "--seeds", "0", "--only", "sb3", "--budget-factor", "0.1", "--final-episodes", "1"],
                          capture_output=True, text=True, timeout=170, cwd=tmp_path,
                          env={**os.environ, "TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["tasks"]["swimmer"]["sb3"]["success_rate"] == 0.0
    assert not list(temporary.glob("SB3-*")) and not list(temporary.glob("bench_es_mujoco_*"))


@pytest.mark.timeout(180)
def test_the_mujoco_bench_stopped_by_sigterm_stops_its_run_and_leaves_nothing(tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    bench = subprocess.Popen([sys.executable, str(EXAMPLES.parent / "bench" / "bench_es_mujoco.py"), "--tasks",
                              "hopper", "--seeds", "0", "--only", "ours", "--budget-factor", "10"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                             env={**os.environ, "TMPDIR": str(temporary)})
    try:
        deadline = time.monotonic() + 120
        while not list(temporary.glob("bench_es_mujoco_hopper_*/progress.csv")):  # es-train's first generation
            assert bench.poll() is None and time.monotonic() < deadline, bench.stderr.read() if bench.poll() else ""
            time.sleep(0.05)
        es_train = processes_with("es-train", str(temporary))
        assert len(es_train) == 1
        bench.send_signal(signal.SIGTERM)
        _, stderr = bench.communicate(timeout=90)
    finally:
        bench.kill()
    assert bench.returncode == 1 and "bench_es_mujoco: stopped" in stderr and "Traceback" not in stderr, stderr
    assert not list(temporary.glob("bench_es_mujoco_*"))
    assert all(not any(runtime.iterdir()) for runtime in temporary.glob("parl_lite-*"))  # per user: stays, empty
    assert processes_with(str(temporary)) == [] and processes_with(f"parl_lite_{es_train[0]}_") == []
    assert_nothing_left(es_train, f"parl_lite_{es_train[0]}_")
    assert session_segments(f"parl_lite_status_{es_train[0]}_") == []
