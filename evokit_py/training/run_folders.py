"""Where a run writes; a new run never overwrites an earlier one.

A run writes ``progress.csv`` and ``policy.onnx`` to ``train.log_dir`` and ``solver.h5`` to
``train.checkpoint_dir``. When those folders hold an earlier run's files, or a run in progress holds
their lock, a new run goes to the next numbered pair instead, as Stable-Baselines3 numbers its
TensorBoard runs: ``runs/es_cartpole``, then ``runs/es_cartpole_1``, ``runs/es_cartpole_2``, ... A
checkpoint folder inside the log folder moves with it (``runs/es_cartpole_1/checkpoints``); one
elsewhere gets the same number. A resumed run (``--resume``) continues the latest of them, the
highest number in use, as SB3's ``reset_num_timesteps=False`` goes on in its latest folder.
"""
import os
import re
from dataclasses import dataclass
from pathlib import Path

from evokit_py.sections import TrainConfig
from evokit_py.training.run_lock import held_by_a_run

__all__ = ["CHECKPOINT_NAME", "CSV_NAME", "ONNX_NAME", "RunFolders", "RunPaths", "choose_run_folders"]

CHECKPOINT_NAME = "solver.h5"
CSV_NAME = "progress.csv"
ONNX_NAME = "policy.onnx"


@dataclass(frozen=True)
class RunFolders:
    """The folders a run uses.

    Attributes:
        number: 0 for the folders the config names, else the suffix they were given.
        note: the line that says why the folders are not the config's (``None`` when they are).
    """
    log_dir: Path
    checkpoint_dir: Path
    number: int = 0
    note: str | None = None


@dataclass(frozen=True)
class RunPaths:
    """The files of a run: in ``train.log_dir`` the CSV and the policy, in ``train.checkpoint_dir`` the
    checkpoint."""
    log_dir: Path
    checkpoint: Path
    csv: Path
    onnx: Path

    @classmethod
    def of(cls, train: TrainConfig) -> "RunPaths":
        """The files of a run of the ``train`` section's folders."""
        log_dir = Path(train.log_dir)
        return cls(log_dir, Path(train.checkpoint_dir) / CHECKPOINT_NAME, log_dir / CSV_NAME, log_dir / ONNX_NAME)


def choose_run_folders(log_dir: "str | os.PathLike", checkpoint_dir: "str | os.PathLike", resume: bool) -> RunFolders:
    """The folders of a new run (the first pair not in use) or, with ``resume``, of the latest run
    (see the module docstring); the config's own when none is in use."""
    series = _Series(Path(log_dir), Path(checkpoint_dir))
    latest = max((number for number in series.numbers() if series.in_use(number)), default=None)
    if resume:
        if not latest:
            return series.folders(0)
        chosen = series.folders(latest)
        return RunFolders(chosen.log_dir, chosen.checkpoint_dir, latest,
                          f"es-train: --resume: the latest run is in {chosen.log_dir}")
    if latest is None:
        return series.folders(0)
    earlier, chosen = series.folders(latest), series.folders(latest + 1)
    elsewhere = "" if series.inner is not None else f" and {chosen.checkpoint_dir}"
    return RunFolders(chosen.log_dir, chosen.checkpoint_dir, latest + 1,
                      f"es-train: {earlier.log_dir} holds an earlier run, which is kept; this run writes to "
                      f"{chosen.log_dir}{elsewhere} (--resume continues the latest run instead)")


class _Series:
    """The numbered pairs of folders of one config: ``(log_dir, checkpoint_dir)``, ``(log_dir_1, ...)``."""

    def __init__(self, log_dir: Path, checkpoint_dir: Path):
        self.log_dir, self.checkpoint_dir = log_dir, checkpoint_dir
        log, checkpoints = os.path.abspath(log_dir), os.path.abspath(checkpoint_dir)
        inside = checkpoints == log or checkpoints.startswith(log.rstrip(os.sep) + os.sep)
        # where the checkpoints are in the log folder (None: elsewhere)
        self.inner = Path(os.path.relpath(checkpoints, log)) if inside else None

    def folders(self, number: int) -> RunFolders:
        if number == 0:
            return RunFolders(self.log_dir, self.checkpoint_dir)
        log_dir = _numbered(self.log_dir, number)
        checkpoint_dir = log_dir / self.inner if self.inner is not None else _numbered(self.checkpoint_dir, number)
        return RunFolders(log_dir, checkpoint_dir, number)

    def numbers(self) -> set[int]:
        """0 and the numbers of the numbered folders that exist."""
        found = {0, *_numbered_siblings(self.log_dir)}
        return found if self.inner is not None else found | _numbered_siblings(self.checkpoint_dir)

    def in_use(self, number: int) -> bool:
        """The pair holds a run's files, or a run holds its lock."""
        folders = self.folders(number)
        return ((folders.log_dir / CSV_NAME).is_file() or (folders.log_dir / ONNX_NAME).is_file()
                or (folders.checkpoint_dir / CHECKPOINT_NAME).is_file()
                or held_by_a_run(folders.log_dir) or held_by_a_run(folders.checkpoint_dir))


def _named(folder: Path) -> Path:
    """``folder``, absolute where its own name is not a name (``.``, ``..``)."""
    return Path(os.path.abspath(folder)) if folder.name in ("", "..") else folder


def _numbered(folder: Path, number: int) -> Path:
    folder = _named(folder)
    return folder.parent / f"{folder.name}_{number}"


def _numbered_siblings(folder: Path) -> set[int]:
    """The ``N`` of the folders ``<folder>_N`` beside ``folder``."""
    folder = _named(folder)
    pattern = re.compile(re.escape(folder.name) + r"_([1-9][0-9]{0,8})")
    try:
        names = os.listdir(folder.parent)
    except OSError:  # no parent yet, or unreadable: the run's own checks name it
        return set()
    return {int(match.group(1)) for match in map(pattern.fullmatch, names) if match}
