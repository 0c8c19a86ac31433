"""Issue 23, es-train's items: resource limits (workers, the noise table, a Ctrl-C while it is
built), one run per folder, and the errors that hung or were bare tracebacks.

Real `parl-lite es-train` processes, real files (FIFOs made with os.mkfifo), real signals; the tests
synchronise on the processes' output and on the files they make.
"""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import zlib

import h5py
import numpy as np
import pytest

from backends import Cluster
from evokit_py.config import ConfigError, load_config, resolve_config
from evokit_py.limits import WORKERS_PER_CPU, check_workers
from parl_lite.remote.backend import this_machine
from evokit_py.noise import NoiseTable
from evokit_py.training.run_lock import LOCK_NAME
from es_helpers import es_train_args, parl_lite_cli
from locations import CHILD_ENV

CPUS = len(os.sched_getaffinity(0))
ALIAS_BOMB = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['x'] * 9)}]\n"
                     for prev, name in zip([None, *"abcdefgh"], "abcdefghi", strict=True))
FILL_BLOCK_BYTES = 4 * 2**22  # evokit_py.noise._FILL_BLOCK values of 4 bytes


def _start(*args, new_session=False):
    return subprocess.Popen([sys.executable, "-m", "parl_lite.cli", *map(str, args)], env=CHILD_ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=new_session)


def _wait_for_line(process, text):
    for line in process.stdout:
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r}; stderr: {process.stderr.read()}")


def _noise_segments(pid):
    return glob.glob(f"/dev/shm/parl_lite_{pid}_noise_*")


def _trained(tmp_path, *overrides):
    result = parl_lite_cli(*es_train_args(tmp_path, "train.generations=2", "train.checkpoint_every=1", *overrides))
    assert result.returncode == 0, result.stderr
    return tmp_path / "run" / "ck" / "solver.h5"


# ---------------------------------------------------------------- 7. resource limits


@pytest.mark.timeout(120)
def test_7_more_workers_than_the_cpus_take_is_refused_before_any_starts(tmp_path):
    workers = WORKERS_PER_CPU * CPUS + 1
    result = parl_lite_cli(*es_train_args(tmp_path, f"train.workers={workers}", "train.generations=1", in_process=False))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"train.workers: {workers} workers for the {CPUS} CPU(s)" in result.stderr, result.stderr
    assert "train.oversubscribe" in result.stderr and "es-train: CartPole" not in result.stdout


def test_7_oversubscribe_lifts_the_cpu_bound_but_not_the_memory_bound():
    check_workers(WORKERS_PER_CPU * CPUS + 1, this_machine(), oversubscribe=True)
    with pytest.raises(ConfigError, match=r"^train\.workers: 100000 worker processes need at least .* available"):
        check_workers(100_000, this_machine(), oversubscribe=True)


@pytest.mark.timeout(120)
def test_7_a_hundred_thousand_workers_are_refused_on_memory(tmp_path):
    result = parl_lite_cli(*es_train_args(tmp_path, "train.workers=100000", "train.oversubscribe=true", "train.generations=1",
                                 in_process=False))
    assert result.returncode == 1 and "train.workers: 100000 worker processes need" in result.stderr, result.stderr
    assert "memory available" in result.stderr and "es-train: CartPole" not in result.stdout


@pytest.mark.timeout(180)
def test_7_more_workers_than_the_cluster_has_cpus_is_refused_at_once(tmp_path):
    cluster = Cluster(tmp_path / "cluster")
    cluster.start(cpus=1)
    try:
        result = parl_lite_cli(*es_train_args(tmp_path, "train.workers=3", "train.generations=1", in_process=False),
                           "--address", cluster.address, env={**cluster.env, "PYTHONPATH": CHILD_ENV["PYTHONPATH"]})
    finally:
        cluster.stop()
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"train.workers: 3 workers, the parl_lite cluster at {cluster.address} (1 node(s)) has 1 CPU(s)" \
           in result.stderr, result.stderr


@pytest.mark.timeout(120)
def test_7_a_noise_table_larger_than_shared_memory_is_refused_before_it_is_made(tmp_path):
    process = _start(*es_train_args(tmp_path, "solver.sampling.gaussian_sampling.cache_size=100000000000",
                               "train.generations=1"))
    _, stderr = process.communicate(timeout=100)
    assert process.returncode == 1, stderr
    assert "solver.sampling.gaussian_sampling.cache_size: 100000000000 values need 372.5 GiB of shared memory" \
           in stderr and "/dev/shm has" in stderr, stderr
    assert _noise_segments(process.pid) == []


def _big_table_size():
    """Values of a table that fits here with room to spare and takes many blocks to build (1 GB;
    less where /dev/shm or the memory is small)."""
    shm = os.statvfs("/dev/shm")
    room = min(shm.f_bavail * shm.f_frsize, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    if room < 64 * FILL_BLOCK_BYTES:
        pytest.skip("too little shared memory here for a table that takes many blocks to build")
    return min(2**28, room // 16)


def _segment_being_filled(process):
    """The noise table segment ``process`` is filling, once its first block is written."""
    while process.poll() is None:
        for path in _noise_segments(process.pid):
            try:
                if os.stat(path).st_blocks > 0:
                    return path
            except FileNotFoundError:
                pass
        time.sleep(0.01)
    raise AssertionError(f"es-train ended before building its table: {process.stderr.read()}")


@pytest.mark.timeout(120)
def test_7_ctrl_c_stops_the_noise_table_build_and_removes_the_table(tmp_path):
    process = _start(*es_train_args(tmp_path, f"solver.sampling.gaussian_sampling.cache_size={_big_table_size()}"))
    try:
        segment = _segment_being_filled(process)
        filled_at_ctrl_c = os.stat(segment).st_blocks * 512
        process.send_signal(signal.SIGINT)
        filled = filled_at_ctrl_c
        while process.poll() is None:  # how far the build goes after the Ctrl-C
            try:
                filled = max(filled, os.stat(segment).st_blocks * 512)
            except FileNotFoundError:
                break
            time.sleep(0.005)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert filled - filled_at_ctrl_c <= 2 * FILL_BLOCK_BYTES, (filled_at_ctrl_c, filled)
    assert process.returncode == 130, stderr
    assert stderr == "es-train: interrupted at once (the last checkpoint written, if any, is kept)\n", stderr
    assert not os.path.exists(segment)


@pytest.mark.timeout(120)
def test_7_the_table_of_a_run_killed_while_building_it_is_swept_by_the_next_run(tmp_path):
    process = _start(*es_train_args(tmp_path, f"solver.sampling.gaussian_sampling.cache_size={_big_table_size()}"),
                     new_session=True)
    try:
        segment = _segment_being_filled(process)
    finally:  # the whole group: Python's resource tracker, which would unlink the segment, goes too
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert os.path.exists(segment)  # nothing of the run could remove it
    result = parl_lite_cli(*es_train_args(tmp_path / "next", "train.generations=1"))
    assert result.returncode == 0, result.stderr
    assert not os.path.exists(segment)


def test_7_a_table_built_block_by_block_holds_the_values_of_one_draw():
    size = 2**22 * 2 + 5
    with NoiseTable.create(seed=11, size=size) as table:
        expected = np.random.default_rng(11).standard_normal(size, dtype=np.float32)
        assert np.array_equal(table.values, expected)


# ---------------------------------------------------------------- 8. one run per folder


@pytest.mark.timeout(180)
def test_8_a_second_run_in_a_folder_in_use_is_refused_and_says_who_holds_it(tmp_path):
    """A run resumed in the folders of a run in progress is refused; a new run takes the next ones."""
    first = _start(*es_train_args(tmp_path, "train.generations=100000"))
    try:
        _wait_for_line(first, "generations       1/")
        second = parl_lite_cli(*es_train_args(tmp_path, "train.generations=2"), "--resume")
        elsewhere = parl_lite_cli(*es_train_args(tmp_path / "other", "train.generations=2",
                                        f"train.checkpoint_dir={tmp_path}/run/ck"), "--resume")
        new = parl_lite_cli(*es_train_args(tmp_path, "train.generations=2"))
        first.send_signal(signal.SIGINT)
        _, first_stderr = first.communicate(timeout=60)
    finally:
        first.kill()
    assert second.returncode == 1, second.stdout + second.stderr
    message = second.stderr
    assert f"train.log_dir: {tmp_path}/run is in use by another es-train run (pid {first.pid} on host " \
           f"{socket.gethostname()}" in message, message
    assert "started 20" in message and "parl_lite.cli es-train --in-process" in message, message
    assert elsewhere.returncode == 1 and f"train.checkpoint_dir: {tmp_path}/run/ck is in use" in elsewhere.stderr
    assert new.returncode == 0 and f"this run writes to {tmp_path}/run_1 " in new.stdout, new.stdout + new.stderr
    assert first.returncode == 130, first_stderr
    rows = (tmp_path / "run" / "progress.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[0]) for row in rows] == list(range(1, len(rows) + 1))  # the first run's rows only


@pytest.mark.timeout(180)
def test_8_the_lock_of_a_killed_run_is_free_for_the_next(tmp_path):
    first = _start(*es_train_args(tmp_path, "train.generations=100000", "train.checkpoint_every=1"))
    try:
        _wait_for_line(first, "generations       2/")
    finally:
        first.kill()
    first.wait()
    assert json.loads((tmp_path / "run" / LOCK_NAME).read_text())["pid"] == first.pid
    result = parl_lite_cli(*es_train_args(tmp_path, "train.generations=3"), "--resume")
    assert result.returncode == 0 and "resumed from" in result.stdout, result.stderr


@pytest.mark.timeout(60)
def test_8_a_lock_file_that_is_a_fifo_is_named_without_blocking(tmp_path):
    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / LOCK_NAME)
    result = parl_lite_cli(*es_train_args(tmp_path, "train.generations=1"), timeout=50)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"the lock file {tmp_path}/run/{LOCK_NAME} is a FIFO (named pipe), not a file" in result.stderr


# ---------------------------------------------------------------- smaller ones


@pytest.mark.timeout(60)
def test_an_alias_bomb_in_a_config_is_refused_naming_the_file(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    result = parl_lite_cli("es-train", "--config", bomb, timeout=50)
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
    result = parl_lite_cli(*es_train_args(tmp_path, "train.generations=4"), "--resume", timeout=100)
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
    result = parl_lite_cli("es-train", "--config", fifo, timeout=50)
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
    result = parl_lite_cli(*es_train_args(tmp_path, f"policy.onnx={path}"), timeout=50)
    assert result.returncode == 1 and f"policy.onnx: {path} is a {kind}, not an ONNX file" in result.stderr, \
        result.stderr


@pytest.mark.timeout(120)
def test_a_progress_csv_that_is_a_fifo_is_named_on_resume_without_blocking(tmp_path):
    _trained(tmp_path)
    csv_path = tmp_path / "run" / "progress.csv"
    csv_path.unlink()
    os.mkfifo(csv_path)
    result = parl_lite_cli(*es_train_args(tmp_path, "train.generations=4"), "--resume", timeout=100)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"train.log_dir: {csv_path} is a FIFO (named pipe), not a file; move it away" in result.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mu", [100, 3])
def test_a_cma_es_mu_beyond_half_the_population_is_refused(tmp_path, mu):
    # mu = 3 of 4 was clamped to 4 and failed with a bare "math domain error"; 100 of 16 ran silently
    result = parl_lite_cli(*es_train_args(tmp_path, "solver.type=CMA_ES", f"solver.cma_es.mu={mu}", "train.generations=1"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"solver.cma_es.mu: must be in [1, solver.population_size // 2 (2)], got {mu}" in result.stderr, \
        result.stderr


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


@pytest.mark.timeout(120)
def test_resuming_a_finished_run_prints_valid_json(tmp_path):
    _trained(tmp_path)
    result = parl_lite_cli(*es_train_args(tmp_path, "train.generations=2"), "--resume")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1], parse_constant=_refuse_constant)
    assert summary["updates"] == 2 and summary["eval_return"] is None


# A real SIGINT, sent by the process to itself at a chosen moment of its start: when it first looks
# for a module (the imports of parl_lite.cli and of es-train), or first calls a function (``name()``:
# the noise table's build, the pool's start).
INTERRUPT_AT = textwrap.dedent("""
    import os, runpy, signal, sys

    TARGET = sys.argv.pop(1)

    def interrupt():
        os.kill(os.getpid(), signal.SIGINT)

    class InterruptAtImport:
        def find_spec(self, name, path=None, target=None):
            if name == TARGET:
                sys.meta_path.remove(self)
                interrupt()
            return None

    def interrupt_at_call(frame, event, arg):
        if event == "call" and frame.f_code.co_name + "()" == TARGET:
            sys.setprofile(None)
            interrupt()

    if TARGET.endswith("()"):
        sys.setprofile(interrupt_at_call)
    else:
        sys.meta_path.insert(0, InterruptAtImport())
    runpy.run_module("parl_lite.cli", run_name="__main__", alter_sys=True)
""")
STARTING = "parl-lite: interrupted while starting\n"
AT_ONCE = "es-train: interrupted at once (the last checkpoint written, if any, is kept)\n"


def _wait_for_pool_gone(pid):
    """Until no zygote of process ``pid``'s pool runs (it sweeps the pool's segments last)."""
    deadline = time.monotonic() + 30
    while any(f"parl_lite_{pid}_".encode() in _read(path) for path in glob.glob("/proc/[0-9]*/cmdline")):
        assert time.monotonic() < deadline, f"the zygote of {pid} is still running"
        time.sleep(0.05)


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("moment, line", [
    ("click", STARTING), ("h5py", STARTING), ("onnxruntime", STARTING), ("evokit_py.training.setup", STARTING),
    ("gymnasium.envs.classic_control.cartpole", AT_ONCE), ("_fill()", AT_ONCE), ("_receive_exactly()", AT_ONCE),
])
def test_a_ctrl_c_while_es_train_starts_exits_with_130_one_line_and_nothing_left(tmp_path, moment, line):
    args = es_train_args(tmp_path, "train.generations=1", in_process=False)
    process = subprocess.Popen([sys.executable, "-c", INTERRUPT_AT, moment, *args], env=CHILD_ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.communicate(timeout=100)
    assert (process.returncode, stderr) == (130, line), stdout + stderr
    _wait_for_pool_gone(process.pid)
    assert glob.glob(f"/dev/shm/parl_lite_{process.pid}_*") == []
