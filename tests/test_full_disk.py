"""Writing on a full disk or past the file size limit (``ulimit -f``): every writer ends with an
``OSError`` that names the file and says why, the previous file stays whole, nothing half-written
is left, and the process neither crashes nor hangs.

A real full disk: a tmpfs of 64 KiB (or so) mounted in a mount namespace of the test's child
process (the ``small_disk`` fixture of conftest.py), filled to leave a given number of bytes. The
file size limit: ``resource.setrlimit(RLIMIT_FSIZE)`` in a child. A full stdout: ``/dev/full``.
"""
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS), *sys.path])}


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
                             + TRUNCATED_PARAMS, str(tmp_path / "disk")], env=ENV, capture_output=True, text=True,
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
    result = subprocess.run([sys.executable, "-c", CHECKPOINT_BEYOND_THE_LIMIT, str(path)], env=ENV,
                            capture_output=True, text=True, timeout=100, preexec_fn=_limited(len(before) + 2000))
    outcome = _report(result)
    assert outcome["error"].startswith(f"cannot write {path}: the file size limit of this process was reached "
                                       f"(ulimit -f: {len(before) + 2000:,} bytes)"), outcome
    assert outcome["left"] == ["a.h5"] and path.read_bytes() == before


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
        result = subprocess.run([sys.executable, "-c", LOGGER_ON_A_FULL_DISK, str(tmp_path / "logs")], env=ENV,
                                stdout=full, stderr=subprocess.PIPE, text=True, timeout=50)
    lines = result.stderr.splitlines()
    assert lines == ["parl_lite.logger: cannot write to standard output: No space left on device; its messages "
                     "are dropped (said once)",
                     f"parl_lite.logger: cannot write to {tmp_path}/logs/log.log: No space left on device; its "
                     f"messages are dropped (said once)",
                     "done"], lines
    assert result.returncode == 0

