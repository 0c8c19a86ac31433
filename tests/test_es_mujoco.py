"""ARS V2-t with the shipped configs on MuJoCo: Swimmer to its threshold in CI; Hopper and
HalfCheetah (minutes of CPU each) as benchmarks (``python -m pytest -m benchmark``)."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import parl_lite
from evokit_py.config import resolve_config
from evokit_py.train import train

pytest.importorskip("mujoco")
import gymnasium as gym  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "scripts" / "examples"


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
    (60 in the bench; 29 of seeds 0-39 need at most 427, see docs/evokit.md), confirmed on 20 fresh
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
