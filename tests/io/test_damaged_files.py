"""Issue 14, files / checkpoints / es-train: each test reproduces one defect found by probing.

Real HDF5 files corrupted with h5py or by patching bytes, real CLI runs, a real SIGKILL mid-save.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

import parl_lite
from core_models import fixed_batch, make_agent
from evokit_py.checkpoint import SolverCheckpointError
from evokit_py.config import ConfigError, load_config, resolve_config
from evokit_py.train import train
from parl_lite.cli import main
from damaged_hdf5 import forge, patch_dataset_bytes
from es_helpers import es_train_args, es_train_here, trained_checkpoint
from locations import CHILD_ENV, TESTS



def _export(*args):
    """Run ``parl-lite export`` in this process, with the class the checkpoint records unless
    ``--model-class`` is among ``args``."""
    trust = [] if "--model-class" in args else ["--import-recorded-class"]
    result = CliRunner().invoke(main, ["export", *map(str, args), "--app-dir", str(TESTS), *trust])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"bare exception from export: {result.exception!r}\n{result.output}") \
            from result.exception
    return result


# ---------------------------------------------------------------- 1. export ignores optimizer state


@pytest.mark.timeout(120)
def test_1_export_accepts_a_checkpoint_saved_with_optimizer_state(tmp_path):
    agent = make_agent(3)
    agent.learn(*fixed_batch(0))
    agent.save(tmp_path / "pg.h5", with_optimizer=True)
    result = _export(tmp_path / "pg.h5", "--input-shape", "None,4", "-o", tmp_path / "pg.onnx")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "pg.onnx").is_file()


# ---------------------------------------------------------------- 7. unwritable folders, checked first


@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", ["train.checkpoint_dir", "train.log_dir"])
def test_7_unwritable_folders_are_refused_before_the_first_generation(tmp_path, key):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    result = es_train_here(tmp_path, "train.generations=2", f"{key}={blocker}/sub")
    assert result.exit_code == 1
    assert key in result.output and str(blocker) in result.output, result.output
    assert "generations/s" not in result.output  # no work was done before the check


@pytest.mark.timeout(120)
def test_7_a_failed_checkpoint_write_does_not_lose_the_policy(tmp_path):
    config = resolve_config(None, [f"train.log_dir={tmp_path}/run", f"train.checkpoint_dir={tmp_path}/ck",
                                   "train.target_return=null", "env.max_steps=30", "train.generations=3",
                                   "train.checkpoint_every=1", "solver.population_size=4"])
    lines = []

    def echo(line: str) -> None:
        lines.append(line)
        if " generations       1/" in line:  # the folder becomes unwritable mid-run
            shutil.rmtree(tmp_path / "ck", ignore_errors=True)
            (tmp_path / "ck").write_text("now a file")

    result = train(config, backend="inprocess", echo=echo)
    assert result.generations == 3 and result.onnx_path is not None and result.onnx_path.is_file()
    assert result.checkpoint_error is not None and "ck" in result.checkpoint_error
    assert any("the checkpoint is not written" in line for line in lines), lines


# ---------------------------------------------------------------- 8. checksums and value checks


@pytest.mark.timeout(120)
def test_8_solver_checkpoint_with_patched_bytes_is_refused(tmp_path):
    path = trained_checkpoint(tmp_path)
    patch_dataset_bytes(path, "solver/theta")
    result = es_train_here(tmp_path, "train.generations=4", extra=["--resume"])
    assert result.exit_code == 1 and "solver/theta" in result.output and "checksum" in result.output, result.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dataset, value, message", [
    ("solver/generation", 2**62, "solver/generation"),
    ("solver/generation", -1, "solver/generation"),
    ("solver/optimizer/t", 2**62, "solver/optimizer/t"),
    ("solver/theta", "nan", "solver/theta"),
    ("obs_stats/count", -5.0, "obs_stats/count"),
])
def test_8_solver_checkpoint_with_forged_values_is_refused(tmp_path, dataset, value, message):
    path = trained_checkpoint(tmp_path)
    with h5py.File(path, "r") as file:
        shape, dtype = file[dataset].shape, file[dataset].dtype
    forge(path, dataset, np.full(shape, np.nan if value == "nan" else value, dtype=dtype))
    result = es_train_here(tmp_path, "train.generations=4", extra=["--resume"])
    assert result.exit_code == 1 and message in result.output, result.output
    assert "generations/s" not in result.output


def test_8_agent_checkpoint_with_patched_bytes_is_refused_and_nothing_changes(tmp_path):
    saved, target = make_agent(0), make_agent(1)
    saved.save(tmp_path / "a.h5")
    patch_dataset_bytes(tmp_path / "a.h5", "models/model/fc1.weight")
    before = target.get_weights()
    with pytest.raises(parl_lite.CheckpointError, match="fc1.weight.*checksum"):
        target.restore(tmp_path / "a.h5")
    for name, value in target.get_weights().items():
        np.testing.assert_array_equal(value, before[name])


@pytest.mark.parametrize("dataset, fill, match", [
    ("models/model/fc2.bias", np.nan, "fc2.bias.*not finite"),
    ("optimizers/optimizer/model/fc1.weight/moment1_0", np.inf, "moment1_0.*not finite"),
])
def test_8_agent_checkpoint_with_non_finite_values_is_refused(tmp_path, dataset, fill, match):
    agent = make_agent(0)
    agent.learn(*fixed_batch(0))
    agent.save(tmp_path / "a.h5", with_optimizer=True)
    with h5py.File(tmp_path / "a.h5", "r") as file:
        shape = file[dataset].shape
    forge(tmp_path / "a.h5", dataset, np.full(shape, fill, np.float32))
    with pytest.raises(parl_lite.CheckpointError, match=match):
        make_agent(1).restore(tmp_path / "a.h5")


def test_8_old_checkpoints_without_checksums_still_load(tmp_path):
    saved = make_agent(0)
    saved.learn(*fixed_batch(0))
    saved.save(tmp_path / "old.h5", with_optimizer=True)
    with h5py.File(tmp_path / "old.h5", "r+") as file:  # what format_version 1 wrote
        file.attrs["format_version"] = 1
        file.visititems(lambda name, item: item.attrs.__delitem__("crc32")
                        if isinstance(item, h5py.Dataset) and "crc32" in item.attrs else None)
    fresh = make_agent(1)
    fresh.restore(tmp_path / "old.h5")
    for name, value in saved.get_weights().items():
        np.testing.assert_array_equal(fresh.get_weights()[name], value)


# ---------------------------------------------------------------- 9. errors that name the thing


def test_9_discrete_observation_space_names_env_id(tmp_path):
    result = es_train_here(tmp_path, "env.id=FrozenLake-v1", "train.generations=1")
    assert result.exit_code == 1 and "env.id" in result.output and "FrozenLake-v1" in result.output, result.output


def test_9_a_population_that_cannot_be_allocated_names_the_key(tmp_path):
    result = es_train_here(tmp_path, "solver.population_size=100000000000", "train.generations=1")
    assert result.exit_code == 1 and "solver.population_size" in result.output, result.output


def test_9_an_override_that_is_not_yaml_names_the_override(tmp_path):
    result = es_train_here(tmp_path, "policy.mlp.hidden=[16", "train.generations=1")
    assert result.exit_code == 1 and "policy.mlp.hidden" in result.output and "YAML" in result.output, result.output


@pytest.mark.timeout(120)
def test_9_resuming_with_another_optimizer_names_the_key(tmp_path):
    trained_checkpoint(tmp_path, "solver.optimizer.type=SGD")
    result = es_train_here(tmp_path, "train.generations=4", "solver.optimizer.type=ADAM", extra=["--resume"])
    assert result.exit_code == 1 and "solver.optimizer.type" in result.output, result.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("override", ["seed=5", "solver.sampling.gaussian_sampling.cached=false",
                                      "solver.sampling.gaussian_sampling.cache_size=500000"])
def test_9_resuming_with_another_seed_or_noise_is_refused(tmp_path, override):
    trained_checkpoint(tmp_path)
    result = es_train_here(tmp_path, "train.generations=4", override, extra=["--resume"])
    assert result.exit_code == 1 and override.split("=")[0] in result.output, result.output


@pytest.mark.timeout(120)
def test_9_checkpoint_without_best_params_is_named(tmp_path):
    path = trained_checkpoint(tmp_path)
    with h5py.File(path, "r+") as file:
        del file["extra/best_params"]
    result = es_train_here(tmp_path, "train.generations=4", extra=["--resume"])
    assert result.exit_code == 1 and "extra/best_params" in result.output, result.output


@pytest.mark.timeout(120)
def test_9_checkpoint_with_a_corrupt_config_attribute_is_named(tmp_path):
    path = trained_checkpoint(tmp_path)
    with h5py.File(path, "r+") as file:
        file.attrs["config"] = "solver: [unclosed"
    result = es_train_here(tmp_path, "train.generations=4", extra=["--resume"])
    assert result.exit_code == 1 and "config" in result.output and str(path) in result.output, result.output


def test_9_a_solver_checkpoint_that_is_a_folder_is_not_silently_ignored(tmp_path):
    (tmp_path / "run" / "ck" / "solver.h5").mkdir(parents=True)
    result = es_train_here(tmp_path, "train.generations=2", extra=["--resume"])
    assert result.exit_code == 1 and "solver.h5" in result.output and "folder" in result.output, result.output


@pytest.mark.timeout(120)
def test_9_a_corrupt_progress_csv_is_named(tmp_path):
    trained_checkpoint(tmp_path)
    (tmp_path / "run" / "progress.csv").write_text("generation,mean_return\nnot-a-number,1\n")
    result = es_train_here(tmp_path, "train.generations=4", extra=["--resume"])
    assert result.exit_code == 1 and "progress.csv" in result.output, result.output


@pytest.mark.timeout(120)
def test_9_a_failure_before_training_does_not_leak_the_noise_table(tmp_path):
    trained_checkpoint(tmp_path, "solver.optimizer.type=SGD")
    # the resume fails after the noise table was created; Python's resource tracker warns about
    # (and removes) a segment its creator did not unlink
    out = subprocess.run([sys.executable, "-m", "parl_lite.cli", *es_train_args(tmp_path, "train.generations=4",
                                                                           "solver.optimizer.type=ADAM"),
                          "--resume"], env=CHILD_ENV, capture_output=True, text=True, timeout=100)
    assert out.returncode == 1 and "solver.optimizer.type" in out.stderr, out.stderr
    assert "leaked shared_memory" not in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


# ---------------------------------------------------------------- 10. stale temporaries of killed saves


BIG_WRITER = """
import sys
import numpy as np
import paddle
import parl_lite
from parl_lite.algorithms import PolicyGradient

class Big(parl_lite.Model):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4000, 4000)   # 64 MB of weights: a save takes a while

class BigAgent(parl_lite.Agent):
    pass

agent = BigAgent(PolicyGradient(Big(), lr=1e-3))
for _ in range(1000):
    agent.save(sys.argv[1])
"""


def _kill_mid_save(path: Path) -> Path:
    """Start a process that saves a large model to ``path`` over and over and SIGKILL it as soon
    as its temporary file appears; returns that temporary."""
    writer = subprocess.Popen([sys.executable, "-c", BIG_WRITER, str(path)], env=CHILD_ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and writer.poll() is None:
            temporaries = list(path.parent.glob(f".{path.name}.tmp-*"))
            if temporaries:
                os.kill(writer.pid, signal.SIGKILL)
                break
            time.sleep(0.001)  # polling the folder for the file's appearance
        else:
            raise AssertionError("the writer never created its temporary file")
    finally:
        writer.kill()
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    assert temporaries[0].exists()
    return temporaries[0]


@pytest.mark.timeout(180)
def test_10_save_removes_temporaries_of_killed_savers(tmp_path):
    stale = _kill_mid_save(tmp_path / "big.h5")
    make_agent(0).save(tmp_path / "big.h5")
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.h5"]


@pytest.mark.timeout(180)
def test_10_load_removes_temporaries_of_killed_savers_but_not_of_live_ones(tmp_path):
    make_agent(0).save(tmp_path / "a.h5")
    stale = _kill_mid_save(tmp_path / "a.h5")
    live = tmp_path / f".a.h5.tmp-{os.getpid()}"  # a save of a live process: never touched
    live.write_bytes(b"in progress")
    make_agent(1).restore(tmp_path / "a.h5")
    assert not stale.exists() and live.exists()


def test_10_only_own_regular_files_of_dead_processes_are_removed(tmp_path):
    make_agent(0).save(tmp_path / "a.h5")
    dead_pids = []
    for _ in range(3):  # processes that have exited
        finished = subprocess.Popen(["true"])
        finished.wait(timeout=30)
        dead_pids.append(finished.pid)
    own = tmp_path / f".a.h5.tmp-{dead_pids[0]}"
    own.write_bytes(b"left by a killed save")
    folder = tmp_path / f".a.h5.tmp-{dead_pids[1]}"  # not a regular file: never touched
    folder.mkdir()
    others = tmp_path / f".a.h5.tmp-{dead_pids[2]}"
    others.write_bytes(b"another user's")
    if os.getuid() == 0:
        os.chown(others, 65534, 65534)
    make_agent(1).restore(tmp_path / "a.h5")
    assert not own.exists() and folder.is_dir()
    assert others.exists() == (os.getuid() == 0)  # as root the file is another user's; else it is ours


# ---------------------------------------------------------------- 11. optimizer state checked first


def test_11_mis_shaped_optimizer_state_is_refused_before_anything_changes(tmp_path):
    saved = make_agent(0)
    saved.learn(*fixed_batch(0))
    saved.save(tmp_path / "a.h5", with_optimizer=True)
    forge(tmp_path / "a.h5", "optimizers/optimizer/model/fc1.weight/moment1_0", np.zeros((3, 3), np.float32))
    target = make_agent(1)
    before = target.get_weights()
    with pytest.raises(parl_lite.CheckpointError, match=r"fc1.weight/moment1_0.*\(3, 3\)"):
        target.restore(tmp_path / "a.h5")
    for name, value in target.get_weights().items():
        np.testing.assert_array_equal(value, before[name])
    target.learn(*fixed_batch(1))  # still usable


# ---------------------------------------------------------------- 12. export checks the file first


def test_12_export_without_class_attribute_names_it(tmp_path):
    make_agent(0).save(tmp_path / "a.h5")
    with h5py.File(tmp_path / "a.h5", "r+") as file:
        del file["models/model"].attrs["class"]
    result = _export(tmp_path / "a.h5", "--input-shape", "None,4")
    assert result.exit_code != 0 and "class" in result.output and "--model-class" in result.output, result.output


def test_12_export_with_a_bad_format_version_names_it(tmp_path):
    make_agent(0).save(tmp_path / "a.h5")
    with h5py.File(tmp_path / "a.h5", "r+") as file:
        file.attrs["format_version"] = "two"
    result = _export(tmp_path / "a.h5", "--input-shape", "None,4")
    assert result.exit_code != 0 and "format_version" in result.output, result.output


def test_12_export_never_imports_the_class_a_checkpoint_names_unless_asked(tmp_path):
    make_agent(0).save(tmp_path / "a.h5")
    with h5py.File(tmp_path / "a.h5", "r+") as file:
        file["models/model"].attrs["class"] = "this.Zen"
    result = CliRunner().invoke(main, ["export", str(tmp_path / "a.h5"), "--input-shape", "None,4"])
    assert result.exit_code != 0 and "module 'this'" in result.output, result.output
    assert "--import-recorded-class" in result.output and "--model-class this:Zen" in result.output, result.output
    assert "Beautiful is better than ugly" not in result.output  # `this` was never imported


def test_12_a_bad_class_recorded_in_the_checkpoint_blames_the_checkpoint(tmp_path):
    make_agent(0).save(tmp_path / "a.h5")
    with h5py.File(tmp_path / "a.h5", "r+") as file:
        file["models/model"].attrs["class"] = "no_such_module_here.Model"
    result = _export(tmp_path / "a.h5", "--input-shape", "None,4")
    assert result.exit_code != 0 and "recorded in" in result.output and "a.h5" in result.output, result.output


def test_12_export_refuses_nan_weights_at_once(tmp_path):
    make_agent(0).save(tmp_path / "a.h5")
    forge(tmp_path / "a.h5", "models/model/fc2.weight", np.full((20, 2), np.nan, np.float32))
    started = time.perf_counter()
    result = _export(tmp_path / "a.h5", "--input-shape", "None,4", "--model-class", "core_models:CartpoleModel")
    assert result.exit_code != 0 and "fc2.weight" in result.output and "not finite" in result.output, result.output
    assert not (tmp_path / "a.onnx").exists()


# ---------------------------------------------------------------- 15. smaller ones


def test_15_a_config_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("env: {id: CartPole-v1}  # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="latin1.yaml.*UTF-8"):
        load_config(path)


def test_15_restore_from_a_folder_says_it_is_a_folder(tmp_path):
    with pytest.raises(parl_lite.CheckpointError, match="is a folder"):
        make_agent(0).restore(tmp_path)


@pytest.mark.parametrize("text, key", [
    ("solver:\n  optimizer: {base_lr: .inf}\n", "solver.optimizer.base_lr"),
    ("solver:\n  sampling: {gaussian_sampling: {std: .nan}}\n", "solver.sampling.gaussian_sampling.std"),
    ("train:\n  workers: 1\n  workers: 2\n", "train.workers"),
    ("seed: 1\nseed: 2\n", "seed"),
])
def test_15_non_finite_numbers_and_duplicate_keys_are_refused(tmp_path, text, key):
    path = tmp_path / "es.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(path)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum, again, status", [(signal.SIGINT, "Ctrl-C again", 130),
                                                    (signal.SIGTERM, "SIGTERM again", 143)])
def test_15_a_second_stop_signal_exits_with_its_status(tmp_path, signum, again, status):
    """Two SIGTERMs exited with 130, Ctrl-C's status."""
    # long generations (many candidates evaluated in this process) so both signals land in one
    args = [sys.executable, "-m", "parl_lite.cli", *es_train_args(tmp_path, "train.generations=50",
                                                             "solver.population_size=400", "env.max_steps=500")]
    process = subprocess.Popen(args, env=CHILD_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stdout:
            if " generations       1/" in line:
                process.send_signal(signum)
                break
        for line in process.stderr:  # the first signal is acknowledged before the second is sent
            if again in line:
                process.send_signal(signum)
                break
        else:
            raise AssertionError("the first signal was not acknowledged on stderr")
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == status, stderr
    assert "Traceback" not in stderr


@pytest.mark.timeout(120)
def test_8_old_solver_checkpoints_without_checksums_still_resume(tmp_path):
    path = trained_checkpoint(tmp_path)
    with h5py.File(path, "r+") as file:  # what format_version 1 wrote
        file.attrs["format_version"] = 1
        del file.attrs["config_crc32"]
        file.visititems(lambda name, item: item.attrs.__delitem__("crc32") if isinstance(item, h5py.Dataset) else None)
    result = es_train_here(tmp_path, "train.generations=3", extra=["--resume"])
    assert result.exit_code == 0 and "resumed from" in result.output, result.output
    assert json.loads(result.output.splitlines()[-1])["updates"] == 3, result.output
