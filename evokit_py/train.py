"""The ``parl-lite es-train`` loop: set up, then per update log, evaluate, checkpoint; export.

The run's parts are built once (:func:`evokit_py.training.setup.setup_run`). Per generation
(update): the schedule (:mod:`evokit_py.training.schedule`: whole generations in ``train.mode:
sync``, results as they come in ``async``) delivers a batch of ``population_size`` evaluated
candidates, already told to the solver and fed to the observation statistics; every ``eval_every``
generations the current solution is evaluated on ``eval_episodes`` episodes
(:mod:`evokit_py.training.evaluations`), and training stops when their mean reaches
``target_return`` (confirmed first on ``confirm_episodes`` fresh episodes when that is set), or when
the solver says it is done (a CMA-ES termination criterion). In async
mode that evaluation runs between the candidates and its result arrives during a later generation
(:mod:`evokit_py.training.progress_log` writes a row of the CSV once its evaluation is known). In
sync mode every random draw depends only on (seed, generation, index), so a run resumed from a
checkpoint ends exactly where the uninterrupted run does. The exported policy is the best evaluated
solution with the observation statistics it was evaluated with. A checkpoint also carries the CSV
rows still held for their evaluation and the solutions those evaluations are of, so that a run
resumed after a kill or a Ctrl-C in async mode writes every row and runs the evaluations that were lost,
and the evaluated candidates of the update under way (:mod:`evokit_py.training.unfinished`: in sync
mode those evaluated before the workers were lost, in async mode the results not yet in an update).

The first Ctrl-C (or SIGTERM: a time limit's ``timeout``, a batch system) finishes the current
generation, writes a checkpoint, exports the best policy evaluated so far and stops; a second one
interrupts at once (:class:`StoppedAtOnce`, which carries the signal).

Before the first generation the log and checkpoint folders are chosen (a new run whose folders
hold an earlier run takes the next numbered ones, :mod:`evokit_py.training.run_folders`), created,
test-written and locked (:mod:`evokit_py.training.run_lock`: a second run in one of them is refused,
naming the first; the locks are held until the policy is exported), and a checkpoint to resume from
is read and checked; a checkpoint or ``progress.csv`` write that fails later (a full disk) is
reported and training goes on, so the trained policy is still exported. A policy that cannot be
written to ``policy.onnx`` is in the checkpoint; when no checkpoint could be written either, it goes
to a new file in the temporary folder (:func:`_export`). Each failure is in the :class:`TrainResult`.
"""
import csv
import math
import os
import signal
import stat
import tempfile
import time
from collections.abc import Callable, Generator
from contextlib import ExitStack, closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from evokit_py.checkpoint import check_trainer_extra, read_checkpoint
from evokit_py.config import ESConfig
from evokit_py.limits import check_population
from evokit_py.pool import EvaluationPool, Losses, WorkersLostError
from evokit_py.training.evaluations import Evaluations
from evokit_py.training.progress_log import ProgressLog
from evokit_py.training.run_folders import CHECKPOINT_NAME, CSV_NAME, ONNX_NAME, RunFolders, choose_run_folders
from evokit_py.training.run_lock import lock_run_folders
from evokit_py.training.saving import export_policy, restore_checkpoint, save_checkpoint
from evokit_py.training.schedule import Batch, async_batches, sync_batches
from evokit_py.training.setup import Run, setup_run
from evokit_py.training.totals import Totals
from evokit_py.training.unfinished import UnfinishedGeneration
from parl_lite.common.paths import describe_file_type
from parl_lite.common.space import explain_write_error
from parl_lite.common.progress import Reporter
from parl_lite.common.summary import RunSummary

__all__ = ["TrainError", "TrainStopped", "StoppedAtOnce", "TrainResult", "train", "CHECKPOINT_NAME", "CSV_NAME",
           "ONNX_NAME"]

_RATE_WINDOW = 10  # generations the log line's rate and ETA are taken over (episodes lengthen as training goes)
_PROBE_BYTES = 4096  # written to test a run's folder: creating an empty file needs no free block


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
    paths = _Paths.of(config)
    _make_folders(paths)
    with lock_run_folders({"train.log_dir": paths.log_dir, "train.checkpoint_dir": paths.checkpoint.parent}, echo):
        _check_before_training(config, paths, resume)
        return _train(config, paths, resume, backend, echo, progress_bar, started)


def _in_folders(config: ESConfig, folders: RunFolders) -> ESConfig:
    """``config`` with the run's folders (so that its checkpoint records where it was written)."""
    return replace(config, train=replace(config.train, log_dir=str(folders.log_dir),
                                         checkpoint_dir=str(folders.checkpoint_dir)))


def _train(config: ESConfig, paths: "_Paths", resume: bool, backend: str, echo: Callable[[str], None],
           progress_bar: bool | None, started: float) -> TrainResult:
    """:func:`train` once the run's folders are locked and checked."""
    hp, outcome = config.train, _Outcome()
    with ExitStack() as stack:
        run = stack.enter_context(setup_run(config))
        solver = run.solver
        start = _resume(run, paths, echo) if resume and paths.checkpoint.is_file() else _Start(Totals.start(run))
        totals, seconds_before = start.totals, start.totals.train_seconds
        pool = stack.enter_context(closing(EvaluationPool(config, run.policy.to_bytes(), run.noise_spec(),
                                                          hp.workers, backend, hp.address)))
        outcome.startup_seconds = time.perf_counter() - started
        echo(_start_line(run, backend, outcome.startup_seconds))
        stop = stack.enter_context(_StopFlag())
        log = stack.enter_context(ProgressLog(paths.csv, start.rows, echo))
        evaluations = Evaluations(run, pool)
        evaluations.restore(start.pending)
        log.hold(start.held_rows, evaluations.awaits)
        batches = stack.enter_context(closing(async_batches(run, pool, evaluations.queue, start.unfinished)
                                              if evaluations.queue else sync_batches(run, pool, start.unfinished)))
        reporter = stack.enter_context(closing(Reporter(config.solver.type, hp.generations, solver.generation,
                                                        progress_bar, unit="generation", echo=echo,
                                                        window=_RATE_WINDOW)))
        outcome.start_generation, loop_started = solver.generation, time.perf_counter()
        while solver.generation < hp.generations and not outcome.solved and outcome.stop_reason is None:
            try:
                row = _generation(run, pool, batches, totals, log, evaluations, outcome, echo)
            except WorkersLostError as error:  # the state of the last whole generation is kept
                outcome.workers_lost = str(error)
                break
            if row is None:
                continue
            _report(reporter, solver.generation, time.perf_counter() - loop_started, row, outcome.last_eval,
                    solver.dropped_samples, outcome.losses, hp.mode)
            if solver.generation % hp.checkpoint_every == 0:
                outcome.checkpoint_error = _save_checkpoint(run, paths.checkpoint, totals, log, evaluations, echo,
                                                            start.unfinished)
            if stop.signal is not None:
                outcome.interrupted, outcome.stop_signal = True, stop.signal
                break
        outcome.checkpoint_error = _save_checkpoint(run, paths.checkpoint, totals, log, evaluations, echo,
                                                    start.unfinished)
        _echo_worker_events(pool, outcome, echo)
    outcome.log_error = _unwritten_rows(log, paths, outcome.checkpoint_error)
    # the best evaluated solution with the statistics it was evaluated with; the current one if none was
    outcome.onnx_path, outcome.export_error = _export(
        run, paths, (totals.best_params, totals.best_obs_stats) if totals.evaluated else (None, None),
        outcome.checkpoint_error)
    result = _finish(run, backend, paths, totals, outcome, seconds_before, time.perf_counter() - started, echo)
    if outcome.workers_lost is not None:
        raise TrainStopped(_stopped_message(run, paths, outcome, len(start.unfinished)), result)
    return result


def _unwritten_rows(log: ProgressLog, paths: "_Paths", checkpoint_error: str | None) -> str | None:
    """Why rows of ``progress.csv`` are not written, and where they are (None: all are written)."""
    if not log.unwritten:
        return None
    kept = (f"the checkpoint {paths.checkpoint} holds them (a run resumed from it writes them)"
            if checkpoint_error is None else "they are lost")
    return f"{log.failure}; {log.unwritten} row(s) of it were not written: {kept}"


def _export(run: Run, paths: "_Paths", best: tuple[np.ndarray | None, dict | None],
            checkpoint_error: str | None) -> tuple[Path | None, str | None]:
    """Export the ``best`` policy (parameters, statistics) to ``policy.onnx``; where that cannot be
    written and no checkpoint holds the policy either, to a new file in the temporary folder.

    Returns:
        Where the policy is (None: nowhere), and why it is not in ``policy.onnx`` (None: it is).
    """
    try:
        export_policy(run, paths.onnx, *best)
        return paths.onnx, None
    except OSError as error:
        failure = str(error)
    if checkpoint_error is None:
        return None, (f"{failure}; the policy is in the checkpoint {paths.checkpoint}: once there is room, the same "
                      f"command with --resume writes it")
    try:
        descriptor, name = tempfile.mkstemp(prefix="es-train-policy-", suffix=".onnx")
        os.close(descriptor)
    except OSError as error:
        return None, f"{failure}; nor could a file be made in {tempfile.gettempdir()} ({error}): the policy is lost"
    try:
        export_policy(run, name, *best)
    except OSError as error:
        os.unlink(name)
        return None, f"{failure}; no checkpoint holds the policy, and {error}: the policy is lost"
    return Path(name), f"{failure}; no checkpoint holds the policy, so it was written to {name} instead"


def _generation(run: Run, pool: EvaluationPool, batches: Generator[Batch | None, None, None], totals: Totals,
                log: ProgressLog, evaluations: Evaluations, outcome: "_Outcome",
                echo: Callable[[str], None]) -> dict | None:
    """Take the next batch (the run is updated with it already), request its evaluation, log its row
    and return it; None when, in async mode, an evaluation reached the target before the next update.

    Raises:
        WorkersLostError: the pool has no worker left and could make none in time, or its backend is gone.
    """
    config, hp, solver = run.config, run.config.train, run.solver
    cpu_tick = time.process_time()
    batch = next(batches)
    if batch is None:
        outcome.take(evaluations.finished(wait=False), totals, log, evaluations, echo)
        _echo_worker_events(pool, outcome, echo)
        return None
    workers_cpu = batch.result["cpu_seconds"] if pool.backend == "remote" else 0.0  # else counted here
    outcome.stop_reason = solver.stop_reason()
    totals.add(batch, config.env.episodes_per_candidate, time.process_time() - cpu_tick + workers_cpu)
    due = (batch.generation + 1) % hp.eval_every == 0 or batch.generation + 1 == hp.generations
    # the row first: if the evaluation (played at once in sync mode) loses the workers, the checkpoint
    # holds the row, waiting for that evaluation, which a resumed run plays
    row = log.add(batch, totals, config.env.episodes_per_candidate, due)
    if due:
        evaluations.request(batch.generation)
    last = solver.generation >= hp.generations or outcome.stop_reason is not None
    if last:
        batches.close()  # async: no new candidates; the evaluations still due are finished next
    outcome.take(evaluations.finished(wait=last), totals, log, evaluations, echo)
    _echo_worker_events(pool, outcome, echo)
    return row


def _echo_worker_events(pool: EvaluationPool, outcome: "_Outcome", echo: Callable[[str], None]) -> None:
    """Say what happened to the workers since the last call (lost, made), and keep the losses for
    the next progress line."""
    events, losses = pool.drain_events()
    for event in events:
        echo(f"es-train: {event}")
    outcome.losses = losses


def _stopped_message(run: Run, paths: "_Paths", outcome: "_Outcome", unfinished: int) -> str:
    """The one line a run that lost its workers ends with: why, where its state is (with ``unfinished``
    candidates of the next generation or update evaluated), how to resume."""
    generation = run.solver.generation
    if outcome.checkpoint_error is None:
        next_ones = f" and {unfinished} evaluated candidate(s) of the next" if unfinished else ""
        kept = (f"the checkpoint {paths.checkpoint} holds generation {generation}{next_ones}: resume with the same "
                f"command and --resume once workers can run again (parl-lite connect adds a node to a cluster)")
    else:
        kept = f"no checkpoint could be written ({outcome.checkpoint_error})"
    return f"es-train stopped at generation {generation}: {outcome.workers_lost}; {kept}"


@dataclass(frozen=True)
class _Paths:
    """Where a run writes: ``train.log_dir`` (the CSV, the policy) and ``train.checkpoint_dir``."""
    log_dir: Path
    checkpoint: Path
    csv: Path
    onnx: Path

    @classmethod
    def of(cls, config: ESConfig) -> "_Paths":
        log_dir = Path(config.train.log_dir)
        return cls(log_dir, Path(config.train.checkpoint_dir) / CHECKPOINT_NAME, log_dir / CSV_NAME,
                   log_dir / ONNX_NAME)


@dataclass
class _Start:
    """Where training starts: the totals, the CSV rows written before, the rows a checkpoint held
    for their evaluation, the evaluations it had pending and the candidates of its generation or
    update evaluated before it stopped (nothing, for a new run); the last are the run's own from
    then on (what the schedule holds when a checkpoint is written)."""
    totals: Totals
    rows: list[dict] = field(default_factory=list)
    held_rows: list[dict] = field(default_factory=list)
    pending: dict[int, tuple[np.ndarray, dict]] = field(default_factory=dict)
    unfinished: UnfinishedGeneration = field(default_factory=UnfinishedGeneration)


def _resume(run: Run, paths: _Paths, echo: Callable[[str], None]) -> _Start:
    """Restore the run from the checkpoint (checked by :func:`_check_before_training`)."""
    extra = restore_checkpoint(run, paths.checkpoint)
    held_rows = ProgressLog.held_from_extra(extra)
    held = {row["generation"] for row in held_rows}
    rows = [row for row in _read_rows(paths.csv, run.solver.generation) if int(row["generation"]) not in held]
    unfinished = UnfinishedGeneration.from_extra(extra, run.solver.generation)
    kept = f", with {len(unfinished)} evaluated candidate(s) of the next" if len(unfinished) else ""
    echo(f"resumed from {paths.checkpoint} at generation {run.solver.generation}{kept}")
    if unfinished.arrived and run.config.train.mode == "sync":
        echo(f"es-train: the {len(unfinished.arrived)} result(s) the async run held are not used in sync mode "
             f"(it plays whole generations)")
    return _Start(Totals.from_extra(extra, run.obs_stats), rows, held_rows, Evaluations.pending_from_extra(extra),
                  unfinished)


@dataclass
class _Outcome:
    """What the loop decides on and the result reports, besides the totals."""
    startup_seconds: float = 0.0
    start_generation: int = 0
    last_eval: tuple[int, float] | None = None  # (generation, mean return) of the last evaluation
    solved: bool = False
    solved_at: int | None = None  # environment steps when the target was first reached
    confirmed_return: float | None = None  # the last confirmation's mean return
    stop_reason: str | None = None  # the solver's termination criterion
    workers_lost: str | None = None  # why the pool could not go on (WorkersLostError)
    losses: Losses = field(default_factory=Losses)  # workers lost since the last progress line
    interrupted: bool = False
    stop_signal: int | None = None
    checkpoint_error: str | None = None
    log_error: str | None = None
    onnx_path: Path | None = None
    export_error: str | None = None

    def take(self, finished: list[tuple[int, float, np.ndarray, dict]], totals: Totals, log: ProgressLog,
             evaluations: Evaluations, echo: Callable[[str], None]) -> None:
        """Record finished evaluations: the rows held for them filled in, the best solution kept,
        solved once one reaches ``train.target_return`` and, with ``train.confirm_episodes``, its
        confirmation does too (a confirmed solution is recorded with its confirmation's mean)."""
        hp = evaluations.run.config.train
        for generation, value, params, obs_stats in finished:
            log.evaluated(generation + 1, value)
            self.last_eval = generation + 1, value
            target = hp.target_return
            reached = target is not None and value >= target and not self.solved
            if target is not None and reached and hp.confirm_episodes:
                value = self.confirmed_return = evaluations.confirm(generation, params, obs_stats)
                reached = value >= target
                echo(f"es-train: the evaluation after generation {generation + 1} reached the target "
                     f"{target:g}; {'confirmed' if reached else 'not confirmed'}: {value:.2f} on "
                     f"{hp.confirm_episodes} fresh episodes" + ("" if reached else ", training goes on"))
            totals.record(value, params, obs_stats)
            if reached:
                self.solved, self.solved_at = True, totals.steps


class _StopFlag:
    """The first SIGINT or SIGTERM sets :attr:`signal`; the second raises :class:`StoppedAtOnce`."""

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.signal: int | None = None  # the signal that asked to stop
        self._previous: dict[int, Any] = {}  # signal -> the handler before

    def __enter__(self):
        try:
            self._previous = {signum: signal.signal(signum, self._handle) for signum in self._SIGNALS}
        except ValueError:  # not the main thread: no signal handling
            self._previous = {}
        return self

    def _handle(self, signum, frame):
        if self.signal is not None:
            raise StoppedAtOnce(signum)
        self.signal = signum
        # os.write, not print: a handler that prints while the main thread prints raises
        name = signal.Signals(signum).name
        again = "Ctrl-C" if signum == signal.SIGINT else name
        os.write(2, f"es-train: {name}: stopping after this generation, then writing the checkpoint and the "
                    f"policy ({again} again to stop at once)\n".encode())

    def __exit__(self, *exc):
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def _start_line(run: Run, backend: str, startup: float) -> str:
    config, hp, spec = run.config, run.config.train, run.noise_spec()
    noise = (f"noise table {spec.table_name} ({spec.table_size * 4 / 2**20:.1f} MB shared)" if spec.table_name
             else "noise from per-sample seeds")
    return (f"es-train: {config.env.id}, {config.solver.type}, {run.solver.dim} parameters, population "
            f"{config.solver.population_size}, {hp.workers} worker(s) ({hp.address or backend}), {hp.mode} updates, "
            f"{noise}, start-up {startup:.2f}s")


def _report(reporter: Reporter, generation: int, seconds: float, row: dict, last_eval: tuple[int, float] | None,
            dropped_samples: int, losses: Losses, mode: str) -> None:
    """One generation's figures, with the last evaluation and the generation it was of: the bar's
    postfix on a terminal, else a log line (its rate and ETA from the wall-clock ``seconds`` of this
    call's loop, evaluations included, over the last :data:`_RATE_WINDOW` generations)."""
    evaluation = "eval         -" if last_eval is None else f"eval {last_eval[1]:9.2f} (gen {last_eval[0]})"
    details = (f"mean {row['mean_return']:9.2f}  best {row['max_return']:9.2f}  {evaluation}  "
               f"{row['episodes_per_second']:7.1f} episodes/s  train {row['train_seconds']:6.2f}s"
               + (f"  ({dropped_samples} stale samples dropped)" if dropped_samples else "")
               + (f"  ({_losses_text(losses, mode)})" if losses.workers else ""))
    postfix = {"mean": f"{row['mean_return']:.1f}", "best": f"{row['max_return']:.1f}",
               "eval": "-" if last_eval is None else f"{last_eval[1]:.1f} (gen {last_eval[0]})",
               "episodes/s": f"{row['episodes_per_second']:.0f}"}
    if losses.workers:
        postfix["lost"] = _losses_text(losses, mode)
    reporter.progress(generation, seconds, details, postfix)


def _losses_text(losses: Losses, mode: str) -> str:
    """``1 worker(s) lost (node 127.0.0.1:4101), 2 candidate(s) re-queued, 1 worker(s) left, 2 now``."""
    fate = "re-queued" if mode == "sync" else "re-drawn"
    return (f"{losses.workers} worker(s) lost ({', '.join(sorted(set(losses.where)))}), {losses.candidates} "
            f"candidate(s) {fate}, {losses.workers_left} worker(s) left, {losses.workers_now} now")


def _finish(run: Run, backend: str, paths: _Paths, totals: Totals, outcome: _Outcome, seconds_before: float,
            total: float, echo: Callable[[str], None]) -> TrainResult:
    """Say how the run ended and return its result."""
    config, generations = run.config, run.solver.generation
    confirmation = "" if outcome.confirmed_return is None else \
        f" (confirmed: {outcome.confirmed_return:.2f} on {config.train.confirm_episodes} fresh episodes)"
    written = "checkpoint and policy written" if not (outcome.checkpoint_error or outcome.export_error) else \
        "see below what could not be written"
    if outcome.interrupted:
        status = f"interrupted by {signal.Signals(outcome.stop_signal or signal.SIGINT).name} ({written})"
    elif outcome.workers_lost:
        status = f"stopped, its workers lost ({written})"
    else:
        status = f"solved{confirmation}" if outcome.solved else (
            f"solver stopped ({outcome.stop_reason})" if outcome.stop_reason else "generation budget spent")
    train_line = f"train {totals.train_seconds:.2f}s, {totals.cpu_seconds:.2f} CPU-s (trainer and workers)"
    if outcome.start_generation:
        train_line += (f" since generation 0, {totals.train_seconds - seconds_before:.2f}s of them after the resume at "
                       f"generation {outcome.start_generation}")
    echo(f"es-train {status}: generation {generations}, best evaluation return {totals.best_return:.2f}, "
         f"{totals.episodes} episodes, {totals.steps} steps; {train_line}; this call {total:.2f}s with start-up and "
         f"evaluations; checkpoint {paths.checkpoint}, log {paths.csv}, policy {outcome.onnx_path or 'not written'}")
    summary = RunSummary(algo=config.solver.type, env=config.env.id, seed=config.seed, steps=totals.steps,
                         solved_at=outcome.solved_at,
                         eval_return=math.nan if outcome.last_eval is None else outcome.last_eval[1],
                         best_eval_return=totals.best_return,
                         train_seconds=totals.train_seconds, train_cpu_seconds=totals.cpu_seconds,
                         updates=generations,
                         updates_per_second=generations / totals.train_seconds if totals.train_seconds else 0.0,
                         actors=config.train.workers if backend == "remote" else None,
                         checkpoint=None if outcome.checkpoint_error else str(paths.checkpoint),
                         interrupted=outcome.interrupted)
    return TrainResult(generations, outcome.solved, totals.best_return, totals.train_seconds, total, totals.episodes,
                       totals.steps, outcome.interrupted, outcome.onnx_path, paths.csv, paths.checkpoint,
                       np.asarray(totals.best_params), outcome.checkpoint_error, summary, outcome.startup_seconds,
                       totals.cpu_seconds, outcome.confirmed_return, outcome.stop_signal, outcome.export_error,
                       outcome.log_error)


def _make_folders(paths: _Paths) -> None:
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


def _check_before_training(config: ESConfig, paths: _Paths, resume: bool) -> None:
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


def _save_checkpoint(run: Run, path: Path, totals: Totals, log: ProgressLog, evaluations: Evaluations,
                     echo: Callable[[str], None], unfinished: UnfinishedGeneration) -> str | None:
    """Write a checkpoint (with the rows held for their evaluation, the solutions still to be
    evaluated and the evaluated candidates of the update under way: in sync mode those evaluated
    before the workers were lost, in async mode the results not yet in an update); on failure say
    so and return why (training goes on: the policy is kept)."""
    extra = {**totals.to_extra(), **log.to_extra(), **evaluations.to_extra(), **unfinished.to_extra(run.solver)}
    try:
        save_checkpoint(run, path, extra=extra)
    except OSError as error:  # the message names the file and why (no space left on device, ...)
        echo(f"es-train: warning: the checkpoint is not written: {error}; training goes on")
        return str(error)
    return None


def _read_rows(csv_path: Path, generation: int) -> list[dict]:
    """The rows of an earlier run up to ``generation`` (a resumed run rewrites the rest)."""
    if not csv_path.is_file():
        return []
    try:
        with open(csv_path, newline="", encoding="utf-8") as handle:
            return [row for row in csv.DictReader(handle) if int(row["generation"]) <= generation]
    except (KeyError, TypeError, ValueError, csv.Error) as error:
        raise TrainError(f"{csv_path} is corrupt ({type(error).__name__}: {error}); move it away to resume "
                         f"(the checkpoint holds the training state, the file only the log)") from error
