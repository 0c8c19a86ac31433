"""What ``es-train`` returns and raises: :class:`TrainResult`, :class:`TrainError` (a run cannot
start or continue), :class:`TrainStopped` (it lost its workers) and :class:`StoppedAtOnce` (a second
Ctrl-C or SIGTERM)."""
import signal
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parl_lite.common.summary import RunSummary

__all__ = ["TrainError", "StoppedAtOnce", "TrainStopped", "TrainResult"]


class TrainError(ValueError):
    """A run cannot start or continue; the message names the folder, file or key at fault."""


class StoppedAtOnce(KeyboardInterrupt):
    """A second SIGINT or SIGTERM stopped the run at once (the last checkpoint written is kept).

    Attributes:
        signal: the signal's number (``128 + signal`` is the exit status a shell expects).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal = signum


class TrainStopped(TrainError):
    """The run stopped because it lost its workers (none left and none made for
    ``train.capacity_wait`` seconds, or the cluster's master is gone); the checkpoint was written
    and the policy exported first, and the message says how to resume.

    Attributes:
        result: the :class:`TrainResult` of the run so far.
    """

    def __init__(self, message: str, result: "TrainResult") -> None:
        super().__init__(message)
        self.result = result


@dataclass
class TrainResult:
    """What a training run reached.

    Attributes:
        generations: generations completed (counting those before a resume).
        solved: whether the evaluation mean reached ``train.target_return``.
        best_eval_return: best evaluation mean seen (``-inf`` if never evaluated).
        train_seconds: wall-clock of ask/evaluate/tell, evaluations of the solution excluded.
        total_seconds: wall-clock of the whole call, start-up and evaluations included.
        startup_seconds: the part of it before the first generation (the run's parts, the pool and its workers).
        episodes, steps: training episodes and environment steps (evaluations excluded).
        interrupted: stopped by Ctrl-C or SIGTERM (a checkpoint was written, the policy exported).
        onnx_path: where the policy was written (``train.log_dir/policy.onnx``; a file in the
            temporary folder when neither it nor a checkpoint could be written; None: nowhere).
        params: the best parameters (the exported ones).
        checkpoint_error: why the last checkpoint write failed (``None``: it succeeded).
        export_error: why the policy could not be written to ``policy.onnx``, and where it is.
        log_error: why rows of ``progress.csv`` could not be written, and where they are.
        summary: the run in the schema every parl_lite training script prints (``algo`` is the
            solver type, ``updates`` the generations; like the steps, ``train_seconds`` and
            ``train_cpu_seconds`` count the whole run since generation 0, and the CPU-seconds are
            the trainer's and its sampling workers').
        cpu_seconds: that CPU time (over ``train_seconds``: evaluations excluded).
        confirmed_return: the mean return on ``train.confirm_episodes`` fresh episodes of the last
            evaluation that reached the target (``None``: none did, or confirmation is off).
        stop_signal: the signal that interrupted the run (``signal.SIGINT`` or ``signal.SIGTERM``).
    """
    generations: int
    solved: bool
    best_eval_return: float
    train_seconds: float
    total_seconds: float
    episodes: int
    steps: int
    interrupted: bool
    onnx_path: Path | None
    csv_path: Path
    checkpoint_path: Path
    params: np.ndarray = field(repr=False)
    checkpoint_error: str | None = None
    summary: RunSummary | None = None
    startup_seconds: float = 0.0
    cpu_seconds: float = 0.0
    confirmed_return: float | None = None
    stop_signal: int | None = None
    export_error: str | None = None
    log_error: str | None = None

    @property
    def problems(self) -> list[str]:
        """What the run could not write (the checkpoint, rows of the log, the policy), in words."""
        return [problem for problem in (self.checkpoint_error, self.log_error, self.export_error) if problem]
