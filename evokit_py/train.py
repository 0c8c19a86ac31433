"""``parl-lite es-train``: :func:`train` prepares a run's folders, then
:class:`~evokit_py.training.loop.Training` makes its parts and drives it.

The run's parts are built once (:func:`evokit_py.training.setup.setup_run`) and driven generation
by generation (:mod:`evokit_py.training.loop`, where the loop is described). In sync mode every
random draw depends only on (seed, generation, index), so a run resumed from a checkpoint ends
exactly where the uninterrupted run does. The exported policy is the best evaluated solution with
the observation statistics it was evaluated with. A checkpoint also carries the CSV rows still held
for their evaluation and the solutions those evaluations are of, so that a run resumed after a kill
or a Ctrl-C in async mode writes every row and runs the evaluations that were lost, and the
evaluated candidates of the update under way (:mod:`evokit_py.training.unfinished`: in sync mode
those evaluated before the workers were lost, in async mode the results not yet in an update).

Before the first generation the log and checkpoint folders are chosen (a new run whose folders
hold an earlier run takes the next numbered ones, :mod:`evokit_py.training.run_folders`), created,
test-written and locked (:mod:`evokit_py.training.run_lock`: a second run in one of them is refused,
naming the first; the locks are held until the policy is exported), and a checkpoint to resume from
is read and checked.
"""
import os
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace

from evokit_py.checkpoint import check_trainer_extra, read_checkpoint
from evokit_py.config import ESConfig
from evokit_py.limits import check_population
from evokit_py.training.loop import Training
from evokit_py.training.result import StoppedAtOnce, TrainError, TrainResult, TrainStopped
from evokit_py.training.run_folders import (CHECKPOINT_NAME, CSV_NAME, ONNX_NAME, RunFolders, RunPaths,
                                            choose_run_folders)
from evokit_py.training.run_lock import lock_run_folders
from parl_lite.common.paths import describe_file_type
from parl_lite.common.space import explain_write_error

__all__ = ["TrainError", "TrainStopped", "StoppedAtOnce", "TrainResult", "train", "CHECKPOINT_NAME", "CSV_NAME",
           "ONNX_NAME"]

_PROBE_BYTES = 4096  # written to test a run's folder: creating an empty file needs no free block


def train(config: ESConfig, resume: bool = False, backend: str = "remote",
          echo: Callable[[str], None] = print, progress_bar: bool | None = None) -> TrainResult:
    """Train with ES as ``config`` says (see the module docstring).

    Args:
        config: the validated config.
        resume: continue the latest run, from its ``solver.h5`` when it has one; without it, a run
            whose folders hold an earlier run writes to the next numbered ones
            (:mod:`evokit_py.training.run_folders`; a line says which).
        backend: ``"remote"`` (parl_lite actors, one per worker) or ``"inprocess"``.
        echo: where messages and the per-generation log lines go.
        progress_bar: True: a tqdm bar on stderr instead of a log line per generation; False: log
            lines; None: a bar when stderr is a terminal (:class:`parl_lite.train.Reporter`).

    Returns:
        A :class:`TrainResult` (its ``problems`` say what could not be written, and where it is instead).

    Raises:
        TrainError, ConfigError, SolverCheckpointError: before the first generation, naming the
            folder, key or file (see :func:`_check_before_training`); RunFolderInUseError: another
            run holds a folder of this one (:mod:`evokit_py.training.run_lock`); KeyboardInterrupt:
            a second Ctrl-C.
    """
    started = time.perf_counter()
    folders = choose_run_folders(config.train.log_dir, config.train.checkpoint_dir, resume)
    if folders.note is not None:
        echo(folders.note)
        config = _in_folders(config, folders)
    paths = RunPaths.of(config.train)
    _make_folders(paths)
    with lock_run_folders({"train.log_dir": paths.log_dir, "train.checkpoint_dir": paths.checkpoint.parent}, echo):
        _check_before_training(config, paths, resume)
        return Training(config, paths, backend, echo, started).train(resume, progress_bar)


def _in_folders(config: ESConfig, folders: RunFolders) -> ESConfig:
    """``config`` with the run's folders (so that its checkpoint records where it was written)."""
    return replace(config, train=replace(config.train, log_dir=str(folders.log_dir),
                                         checkpoint_dir=str(folders.checkpoint_dir)))


def _make_folders(paths: RunPaths) -> None:
    """Create the log and checkpoint folders and test-write them.

    Raises:
        TrainError: naming the key and the folder.
    """
    for key, folder in (("train.log_dir", paths.log_dir), ("train.checkpoint_dir", paths.checkpoint.parent)):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder) as probe:
                probe.write(bytes(_PROBE_BYTES))
                probe.flush()
        except OSError as error:
            raise TrainError(f"{key}: {explain_write_error(error, folder)}") from error


def _check_before_training(config: ESConfig, paths: RunPaths, resume: bool) -> None:
    """What would otherwise fail only after the work, or leave a half-started run: the files the
    run writes are files (not a folder, nor a FIFO that would block), one generation fits in
    memory, and a checkpoint to resume from is sound (checksums, values, the trainer's datasets).

    Raises:
        TrainError, ConfigError: naming the key and the file or value.
    """
    for key, path in (("train.checkpoint_dir", paths.checkpoint), ("train.log_dir", paths.csv),
                      ("train.log_dir", paths.onnx)):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            raise TrainError(f"{key}: {path} is {describe_file_type(mode)}, not a file; move it away")
    check_population(config.solver.population_size)
    if resume and paths.checkpoint.is_file():
        attrs, groups = read_checkpoint(paths.checkpoint)
        check_trainer_extra(groups, paths.checkpoint, attrs)
