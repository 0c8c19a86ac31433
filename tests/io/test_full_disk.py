"""Writing on a full disk or past the file size limit (``ulimit -f``): every writer ends with an
``OSError`` that names the file and says why, the previous file stays whole, nothing half-written
is left, and the process neither crashes nor hangs.

A real full disk: a tmpfs of 64 KiB (or so) mounted in a mount namespace of the test's child
process (the ``small_disk`` fixture of conftest.py), filled to leave a given number of bytes. The
file size limit: ``resource.setrlimit(RLIMIT_FSIZE)`` in a child. A full stdout: ``/dev/full``.
"""
import json
import resource
import subprocess
import sys

import onnx
import pytest
from es_helpers import es_train_args, parl_lite_cli
from locations import CHILD_ENV

ES_ARGS = ["--set", "train.target_return=null", "--set", "env.max_steps=30", "--set", "train.eval_episodes=1",
           "--set", "solver.population_size=4", "--set", "train.checkpoint_every=1",
           "--set", "solver.sampling.gaussian_sampling.cached=false"]


def _report(result: subprocess.CompletedProcess) -> dict:
    """The JSON a child printed last, after checking that it ended normally (not by a signal)."""
    assert result.returncode == 0, f"status {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def _limited(size: int):
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return limit


# ---------------------------------------------------------------- the writers of parl_lite


HDF5_SWEEP = """
import functools, json
import numpy as np
from core_models import CartpoleModel, make_agent
from parl_lite.utils import ReplayMemory

small, large = make_agent(0), make_agent(1, model_cls=functools.partial(CartpoleModel, 30, 10))
memory = ReplayMemory(400, obs_dim=4, act_dim=1)
for _ in range(300):
    memory.append(np.ones(4), np.ones(1), 1.0, np.ones(4), False)
writers = {"agent.save": lambda path: large.save(path), "ReplayMemory.save": memory.save}
outcomes = []
for name, write in writers.items():
    for free in range(0, 40 * 1024, 2048):  # every point where the values or HDF5's metadata stop fitting
        small.save(DISK / "a.h5")
        leave_free(free)
        try:
            write(DISK / "a.h5")
            error = None
        except OSError as failure:
            error = str(failure)
        (DISK / ".filler").unlink()
        left = sorted(p.name for p in DISK.iterdir())
        intact = None
        if error is not None:  # the previous checkpoint must load, with its weights
            check = make_agent(5)
            check.restore(DISK / "a.h5")
            intact = all(np.array_equal(a, b) for a, b in zip(check.alg.model.get_weights().values(),
                                                              small.alg.model.get_weights().values()))
        outcomes.append({"writer": name, "free": free, "error": error, "left": left, "intact": intact})
print(json.dumps(outcomes))
"""


@pytest.mark.timeout(300)
def test_an_hdf5_file_that_does_not_fit_is_an_error_naming_it_and_the_previous_file_stays(tmp_path, small_disk):
    """h5py raised RuntimeError from a destructor when HDF5's metadata no longer fitted, and the
    process then died of SIGSEGV (with 16 KiB free, for one)."""
    outcomes = _report(small_disk(tmp_path / "disk", HDF5_SWEEP, timeout=280))
    failures = [outcome for outcome in outcomes if outcome["error"] is not None]
    assert {outcome["writer"] for outcome in failures} == {"agent.save", "ReplayMemory.save"}
    disk = tmp_path / "disk"
    for outcome in failures:
        assert outcome["error"].startswith(f"cannot write {disk}/a.h5: no space left on device"), outcome
        assert outcome["intact"] and outcome["left"] == ["a.h5"], outcome  # no temporary left


WRITERS_ON_A_FULL_DISK = """
import json
import numpy as np
from core_models import CartpoleModel
from evokit_py.checkpoint import write_checkpoint
from parl_lite.io.inference import save_inference_model
from parl_lite.io.onnx_export import OnnxExportError, export_onnx

def es_checkpoint(path, size):
    write_checkpoint(path, solver_type="BASIC_ES", config_yaml="seed: 0\\n", noise_seed=0, params=np.ones(size),
                     solver_state={"generation": np.int64(size)}, obs_stats={})

def inference(path, model):
    save_inference_model(model, path, [[None, 4]], ["float32"])

small_model = CartpoleModel(4, 2)
writers = {  # name: (the previous file, the write that does not fit)
    "export_onnx": (lambda: export_onnx(small_model, DISK / "p.onnx", [None, 4]),
                    lambda: export_onnx(CartpoleModel(4, 60), DISK / "p.onnx", [None, 4])),
    "evokit write_checkpoint": (lambda: es_checkpoint(DISK / "s.h5", 3), lambda: es_checkpoint(DISK / "s.h5", 9000)),
    # 2.7 KB of weights: with 4 KiB free they pass the check of room, and paddle's files do not fit
    "save_inference_model": (lambda: inference(DISK / "m", small_model),
                             lambda: inference(DISK / "m", CartpoleModel(4, 6))),
}
outcomes = {}
for name, (previous, write) in writers.items():
    previous()
    before = {p.name: p.read_bytes() for p in DISK.iterdir()}
    leave_free(FREE)
    try:
        write()
        error = None
    except (OSError, OnnxExportError) as failure:
        error = str(failure)
    (DISK / ".filler").unlink()
    after = {p.name: p.read_bytes() for p in DISK.iterdir()}
    outcomes[name] = {"error": error, "unchanged": before == after}
    for path in DISK.iterdir():
        path.unlink()
print(json.dumps(outcomes))
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("free", [0, 4 * 1024])
def test_every_writer_on_a_full_disk_names_the_file_and_leaves_the_previous_one(tmp_path, small_disk, free):
    """With 4 KiB free, one of paddle.jit.save's files fits and the other does not: paddle said
    nothing, and save_inference_model moved a truncated file into place."""
    script = f"FREE = {free}\n" + WRITERS_ON_A_FULL_DISK
    outcomes = _report(small_disk(tmp_path / "disk", script, size=128 * 1024, timeout=280))
    for name, outcome in outcomes.items():
        assert outcome["error"] is not None and "no space left on device" in outcome["error"], (name, outcome)
        assert f"cannot write {tmp_path}/disk/" in outcome["error"], (name, outcome)
        assert outcome["unchanged"], (name, outcome)
    if free:
        assert "paddle.jit.save wrote" in outcomes["save_inference_model"]["error"], outcomes


TRUNCATED_PARAMS = """
import json
from core_models import CartpoleModel
from parl_lite.io.inference import save_inference_model

model = CartpoleModel(4, 6)  # 2,664 bytes of weights: within the limit; paddle's .pdiparams is not
try:
    save_inference_model(model, DISK / "m", [[None, 4]], ["float32"])
    error = None
except OSError as failure:
    error = str(failure)
print(json.dumps({"error": error, "left": sorted(p.name for p in DISK.iterdir())}))
"""


@pytest.mark.timeout(120)
def test_an_inference_model_beyond_the_file_size_limit_is_an_error_naming_the_limit(tmp_path):
    """paddle ignores the failed write: its .pdiparams was cut at the limit and loaded as wrong weights."""
    (tmp_path / "disk").mkdir()
    result = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; DISK = Path(sys.argv[1])\n"
                             + TRUNCATED_PARAMS, str(tmp_path / "disk")], env=CHILD_ENV, capture_output=True, text=True,
                            timeout=100, preexec_fn=_limited(2700))
    outcome = _report(result)
    assert outcome["error"] is not None and outcome["left"] == [], outcome
    assert outcome["error"].startswith(f"cannot write {tmp_path}/disk/m."), outcome
    assert "paddle.jit.save wrote 2,700 bytes" in outcome["error"], outcome
    assert "file size limit of this process (ulimit -f: 2,700 bytes)" in outcome["error"], outcome


CHECKPOINT_BEYOND_THE_LIMIT = """
import functools, json, sys
from pathlib import Path
from core_models import CartpoleModel, make_agent

path = Path(sys.argv[1])
try:
    make_agent(1, model_cls=functools.partial(CartpoleModel, 30, 10)).save(path)
    error = None
except OSError as failure:
    error = str(failure)
print(json.dumps({"error": error, "left": sorted(p.name for p in path.parent.iterdir())}))
"""


@pytest.mark.timeout(120)
def test_a_checkpoint_beyond_the_file_size_limit_is_an_error_naming_the_limit(tmp_path):
    from core_models import make_agent

    path = tmp_path / "a.h5"
    make_agent(0).save(path)
    before = path.read_bytes()
    result = subprocess.run([sys.executable, "-c", CHECKPOINT_BEYOND_THE_LIMIT, str(path)], env=CHILD_ENV,
                            capture_output=True, text=True, timeout=100, preexec_fn=_limited(len(before) + 2000))
    outcome = _report(result)
    assert outcome["error"].startswith(f"cannot write {path}: the file size limit of this process was reached "
                                       f"(ulimit -f: {len(before) + 2000:,} bytes)"), outcome
    assert outcome["left"] == ["a.h5"] and path.read_bytes() == before


# ---------------------------------------------------------------- es-train


def _es_train_script(log_dir: str, *args: str, env: str = "os.environ") -> str:
    """A child's lines that run es-train and keep its status and output in ``runs``."""
    command = [sys.executable, "-m", "parl_lite.cli", "es-train", "--in-process", "--set",
               f"train.log_dir={log_dir}", "--set", f"train.checkpoint_dir={log_dir}/ck", *ES_ARGS, *args]
    return (f"result = subprocess.run({command!r}, capture_output=True, text=True, timeout=200, env={env})\n"
            f"runs.append({{'status': result.returncode, 'stdout': result.stdout, 'stderr': result.stderr}})\n")


@pytest.mark.timeout(300)
def test_es_train_on_a_full_disk_names_the_folder_before_it_starts(tmp_path, small_disk):
    """It used to end with "Error: [Errno 28] No space left on device", naming nothing."""
    script = "import json, subprocess\nruns = []\nleave_free(0)\n" + _es_train_script("DISK_RUN") + \
        "print(json.dumps(runs))\n"
    runs = _report(small_disk(tmp_path / "disk", script.replace("DISK_RUN", str(tmp_path / "disk" / "run"))))
    assert runs[0]["status"] == 1, runs
    assert f"train.log_dir: cannot write {tmp_path}/disk/run: no space left on device" in runs[0]["stderr"], runs
    assert "Traceback" not in runs[0]["stderr"] and "generations/s" not in runs[0]["stdout"]


@pytest.mark.timeout(400)
def test_es_train_whose_checkpoint_no_longer_fits_keeps_the_previous_one_and_writes_the_policy(tmp_path, small_disk):
    """h5py's RuntimeError from the checkpoint's close killed the run, without policy.onnx."""
    run = tmp_path / "disk" / "run"
    script = ("import json, subprocess\nimport h5py\nruns = []\n"
              + _es_train_script(str(run), "--set", "train.generations=2", "--set", "policy.mlp.hidden=[128]")
              + "leave_free(16 * 1024)\n"  # a checkpoint of 900 parameters no longer fits; the policy does
              + _es_train_script(str(run), "--resume", "--set", "train.generations=4", "--set",
                                 "policy.mlp.hidden=[128]")
              + f"with h5py.File('{run}/ck/solver.h5', 'r') as file:\n"
              + "    generation = int(file.attrs['generation'])\n"
              + "print(json.dumps({'runs': runs, 'generation': generation, "
              + f"'policy': os.path.getsize('{run}/policy.onnx')}}))\n")
    report = _report(small_disk(tmp_path / "disk", script, size=1024 * 1024, timeout=380))
    first, second = report["runs"]
    assert first["status"] == 0, first
    assert second["status"] == 1, second
    assert f"the checkpoint is not written: cannot write {run}/ck/solver.h5: no space left on device" in \
        second["stdout"], second
    assert "es-train generation budget spent: generation 4" in second["stdout"], second
    assert report["generation"] == 2 and report["policy"] > 0  # the previous checkpoint; the new policy
    assert "Traceback" not in second["stderr"] and "Error: " in second["stderr"], second


@pytest.mark.timeout(300)
def test_es_train_with_no_room_for_checkpoint_or_policy_writes_the_policy_elsewhere(tmp_path, small_disk):
    """With 12 KiB free, the locks and progress.csv take it all: nothing else fits."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "disk" / "run"
    script = ("import json, os, subprocess\nruns = []\nleave_free(12 * 1024)\n"
              + _es_train_script(str(run), "--set", "train.generations=2",
                                 env=f"dict(os.environ, TMPDIR={str(elsewhere)!r})")
              + "print(json.dumps(runs))\n")
    runs = _report(small_disk(tmp_path / "disk", script, timeout=280))
    stderr = runs[0]["stderr"]
    assert runs[0]["status"] == 1, runs
    policies = list(elsewhere.glob("es-train-policy-*.onnx"))
    assert len(policies) == 1 and f"it was written to {policies[0]} instead" in stderr, (policies, stderr)
    assert f"cannot write {run}/policy.onnx: no space left on device" in stderr, stderr

    onnx.checker.check_model(onnx.load(str(policies[0])))  # a whole ONNX model
    policies[0].unlink()


def _es_train(tmp_path, *args, stdout=subprocess.PIPE, preexec_fn=None, in_process=True, timeout=200):
    return parl_lite_cli(*es_train_args(tmp_path, "train.checkpoint_every=1", "solver.sampling.gaussian_sampling.cached=false",
                                        in_process=in_process), *args, stdout=stdout, preexec_fn=preexec_fn, timeout=timeout)


@pytest.mark.timeout(200)
def test_es_train_with_stdout_on_a_full_disk_keeps_the_policy(tmp_path):
    """click.echo's ENOSPC ended the run at its first line, before any checkpoint or policy."""
    with open("/dev/full", "w") as full:
        result = _es_train(tmp_path, "--set", "train.generations=2", stdout=full)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    said = [line for line in lines if "standard output could not be written (No space left on device)" in line]
    assert len(said) == 2 and said[0].startswith("es-train:") and said[1].startswith("Error:"), lines
    assert "Traceback" not in result.stderr
    assert (tmp_path / "run" / "policy.onnx").is_file() and (tmp_path / "run" / "ck" / "solver.h5").is_file()


@pytest.mark.timeout(200)
def test_es_train_beyond_the_file_size_limit_neither_hangs_nor_crashes(tmp_path):
    """Its workers died at their first shared-memory segment (the limit applies to /dev/shm), were
    replaced for a minute or more, and the checkpoint's write then segfaulted the trainer."""
    result = _es_train(tmp_path, "--set", "train.generations=2", "--set", "train.workers=2", in_process=False,
                       preexec_fn=_limited(5000), timeout=150)
    assert result.returncode == 1, result.stderr
    checkpoint = tmp_path / "run" / "ck" / "solver.h5"
    assert f"cannot write {checkpoint}: the file size limit of this process was reached (ulimit -f: 5,000 bytes)" \
        in result.stderr, result.stderr
    assert "lost" not in result.stdout, result.stdout  # no worker died
    assert "Traceback" not in result.stderr
    assert (tmp_path / "run" / "policy.onnx").is_file() and not checkpoint.exists()


@pytest.mark.timeout(120)
def test_a_noise_table_beyond_the_file_size_limit_names_the_key(tmp_path):
    """The table's segment in /dev/shm failed with "Error: [Errno 27] File too large", naming nothing."""
    result = _es_train(tmp_path, "--set", "train.generations=1", "--set",
                       "solver.sampling.gaussian_sampling.cached=true", preexec_fn=_limited(2**20), timeout=100)
    assert result.returncode == 1, result.stderr
    assert ("Error: solver.sampling.gaussian_sampling.cache_size: 1000000 values need a file of 4 MiB in /dev/shm, "
            "beyond the file size limit of this process (ulimit -f: 1,048,576 bytes)") in result.stderr, result.stderr


PROGRESS_ON_A_FULL_DISK = """
import csv, json
from evokit_py.training.progress_log import CSV_FIELDS, ProgressLog

def row(generation):
    return {key: generation for key in CSV_FIELDS}

warnings = []
with ProgressLog(DISK / "progress.csv", [], warnings.append) as log:
    leave_free(0)
    for generation in range(1, 201):  # 4 KiB of rows fit in the page the file has; then none
        log.hold([row(generation)], lambda g: False)
    held = len(log.to_extra()["log/held_rows"])
    with open(DISK / "progress.csv", newline="") as file:
        written = [int(r["generation"]) for r in csv.DictReader(file)]
    (DISK / ".filler").unlink()
    log.hold([row(201)], lambda g: False)
    held_after = len(log.to_extra()["log/held_rows"])
with open(DISK / "progress.csv", newline="") as file:
    final = [int(r["generation"]) for r in csv.DictReader(file)]
print(json.dumps({"warnings": warnings, "held": held, "written": written, "held_after": held_after, "final": final}))
"""


@pytest.mark.timeout(120)
def test_progress_rows_that_do_not_fit_are_held_whole_and_written_once_there_is_room(tmp_path, small_disk):
    report = _report(small_disk(tmp_path / "disk", PROGRESS_ON_A_FULL_DISK))
    assert len(report["warnings"]) == 1 and "no space left on device" in report["warnings"][0], report["warnings"]
    written = report["written"]
    assert written == list(range(1, len(written) + 1)) and 0 < len(written) < 200  # whole rows only, in order
    assert report["held"] == 200 - len(written)  # the others, for the checkpoint
    assert report["held_after"] == 0 and report["final"] == list(range(1, 202))


# ---------------------------------------------------------------- the logger


LOGGER_ON_A_FULL_DISK = """
import os, sys
from parl_lite.utils import logger
folder = sys.argv[1]
os.makedirs(folder, exist_ok=True)
os.symlink("/dev/full", os.path.join(folder, "log.log"))  # every write: ENOSPC, as on a full disk
logger.set_dir(folder)
for index in range(5):
    logger.info("message %d", index)
print("done", file=sys.stderr, flush=True)
os._exit(0)  # not Python's own flush of the full stdout at exit, which is no logger's
"""


@pytest.mark.timeout(60)
def test_the_logger_on_a_full_disk_says_so_once_per_destination_and_goes_on(tmp_path):
    """logging printed a traceback of 10 lines for every message, on each full destination."""
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-c", LOGGER_ON_A_FULL_DISK, str(tmp_path / "logs")], env=CHILD_ENV,
                                stdout=full, stderr=subprocess.PIPE, text=True, timeout=50)
    lines = result.stderr.splitlines()
    assert lines == ["parl_lite.logger: cannot write to standard output: No space left on device; its messages "
                     "are dropped (said once)",
                     f"parl_lite.logger: cannot write to {tmp_path}/logs/log.log: No space left on device; its "
                     f"messages are dropped (said once)",
                     "done"], lines
    assert result.returncode == 0

