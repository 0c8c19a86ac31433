"""Issue 23, es-train's items: resource limits (workers, the noise table, a Ctrl-C while it is
built), one run per folder, and the errors that hung or were bare tracebacks.

Real `parl-lite es-train` processes, real files (FIFOs made with os.mkfifo), real signals; the tests
synchronise on the processes' output and on the files they make.
"""
import glob
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import h5py
import pytest

from evokit_py.config import ConfigError, load_config, resolve_config

TESTS = Path(__file__).parent
ROOT = TESTS.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS), *sys.path])}
CPUS = len(os.sched_getaffinity(0))
ALIAS_BOMB = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['x'] * 9)}]\n"
                     for prev, name in zip([None, *"abcdefgh"], "abcdefghi", strict=True))
FILL_BLOCK_BYTES = 4 * 2**22  # evokit_py.noise._FILL_BLOCK values of 4 bytes


def _es_args(tmp_path, *overrides, in_process=True):
    args = ["es-train", *(["--in-process"] if in_process else []), "--set", f"train.log_dir={tmp_path}/run",
            "--set", f"train.checkpoint_dir={tmp_path}/run/ck", "--set", "train.target_return=null",
            "--set", "env.max_steps=30", "--set", "train.eval_episodes=1", "--set", "solver.population_size=4"]
    for override in overrides:
        args += ["--set", override]
    return args


def _es_train(*args, timeout=120, env=ENV):
    return subprocess.run([sys.executable, "-m", "parl_lite.cli", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=timeout)


def _start(*args, new_session=False):
    return subprocess.Popen([sys.executable, "-m", "parl_lite.cli", *map(str, args)], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=new_session)


def _wait_for_line(process, text):
    for line in process.stdout:
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r}; stderr: {process.stderr.read()}")


def _noise_segments(pid):
    return glob.glob(f"/dev/shm/parl_lite_{pid}_noise_*")


def _trained(tmp_path, *overrides):
    result = _es_train(*_es_args(tmp_path, "train.generations=2", "train.checkpoint_every=1", *overrides))
    assert result.returncode == 0, result.stderr
    return tmp_path / "run" / "ck" / "solver.h5"


# ---------------------------------------------------------------- smaller ones


@pytest.mark.timeout(60)
def test_an_alias_bomb_in_a_config_is_refused_naming_the_file(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    result = _es_train("es-train", "--config", bomb, timeout=50)
    assert result.returncode == 1 and f"config file {bomb}: more than 10000 values" in result.stderr, result.stderr


@pytest.mark.parametrize("text, message", [
    ("env: {kwargs: &a {x: [*a]}}\n", r"env\.kwargs\.x\[0\]: an alias in .* refers to a collection that contains it"),
    ("env: {kwargs: {x: " + "[" * 2000 + "]" * 2000 + "}}\n", "nested more than 64 levels deep"),
])
def test_recursive_and_deeply_nested_yaml_is_refused(tmp_path, text, message):
    path = tmp_path / "es.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


@pytest.mark.timeout(120)
def test_an_alias_bomb_in_a_checkpoints_config_is_refused_naming_the_checkpoint(tmp_path):
    path = _trained(tmp_path)
    with h5py.File(path, "r+") as file:  # with a matching checksum: the text itself is the attack
        file.attrs["config"] = ALIAS_BOMB
        file.attrs["config_crc32"] = zlib.crc32(ALIAS_BOMB.encode())
    result = _es_train(*_es_args(tmp_path, "train.generations=4"), "--resume", timeout=100)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"solver checkpoint {path}: attribute config is corrupt" in result.stderr, result.stderr
    assert "more than 10000 values" in result.stderr


def test_numbers_in_exponent_form_are_numbers(tmp_path):
    assert resolve_config(None, ["solver.optimizer.base_lr=1e-3"]).solver.optimizer.base_lr == 1e-3
    assert resolve_config(None, ["solver.optimizer.base_lr=1e300"]).solver.optimizer.base_lr == 1e300
    path = tmp_path / "es.yaml"
    path.write_text("solver:\n  optimizer: {base_lr: 2E-2}\n  sampling: {gaussian_sampling: {std: 5e-2}}\n")
    config = load_config(path)
    assert config.solver.optimizer.base_lr == 0.02 and config.solver.sampling.gaussian_sampling.std == 0.05
    with pytest.raises(ConfigError, match=r"^solver\.optimizer\.base_lr: must be a finite number"):
        resolve_config(None, ["solver.optimizer.base_lr=1e400"])
    assert resolve_config(None, ["env.kwargs={name: x1e3, version: 1.e}"]).env.kwargs == {"name": "x1e3",
                                                                                          "version": "1.e"}


@pytest.mark.timeout(60)
def test_a_fifo_given_as_config_is_named_without_blocking(tmp_path):
    fifo = tmp_path / "es.yaml"
    os.mkfifo(fifo)
    result = _es_train("es-train", "--config", fifo, timeout=50)
    assert result.returncode == 1 and f"config file {fifo} is a FIFO (named pipe), not a file" in result.stderr, \
        result.stderr


def test_a_folder_given_as_config_is_named(tmp_path):
    with pytest.raises(ConfigError, match=f"config file {tmp_path} is a folder, not a file"):
        load_config(tmp_path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["FIFO (named pipe)", "folder"])
def test_a_fifo_or_folder_given_as_policy_onnx_is_named_without_blocking(tmp_path, kind):
    path = tmp_path / "policy.onnx"
    os.mkfifo(path) if kind.startswith("FIFO") else path.mkdir()
    result = _es_train(*_es_args(tmp_path, f"policy.onnx={path}"), timeout=50)
    assert result.returncode == 1 and f"policy.onnx: {path} is a {kind}, not an ONNX file" in result.stderr, \
        result.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mu", [100, 3])
def test_a_cma_es_mu_beyond_half_the_population_is_refused(tmp_path, mu):
    # mu = 3 of 4 was clamped to 4 and failed with a bare "math domain error"; 100 of 16 ran silently
    result = _es_train(*_es_args(tmp_path, "solver.type=CMA_ES", f"solver.cma_es.mu={mu}", "train.generations=1"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"solver.cma_es.mu: must be in [1, solver.population_size // 2 (2)], got {mu}" in result.stderr, \
        result.stderr


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


@pytest.mark.timeout(120)
def test_resuming_a_finished_run_prints_valid_json(tmp_path):
    _trained(tmp_path)
    result = _es_train(*_es_args(tmp_path, "train.generations=2"), "--resume")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1], parse_constant=_refuse_constant)
    assert summary["updates"] == 2 and summary["eval_return"] is None


# A real SIGINT, sent by the process to itself at a chosen moment of its start: when it first looks
