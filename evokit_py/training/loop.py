"""How ``es-train`` drives a run: :class:`Training` holds the run's parts once they are made, the
loop's steps (a generation, an evaluation's outcome, a checkpoint, a progress line) and what happened
(solved, the solver stopped, the workers lost, a stop signal, what could not be written).

Per generation (update): the schedule (:mod:`evokit_py.training.schedule`: whole generations in
``train.mode: sync``, results as they come in ``async``) delivers a batch of ``population_size``
evaluated candidates, already told to the solver and fed to the observation statistics; every
``eval_every`` generations the current solution is evaluated on ``eval_episodes`` episodes
(:mod:`evokit_py.training.evaluations`), and training stops when their mean reaches
``target_return`` (confirmed first on ``confirm_episodes`` fresh episodes when that is set), or when
the solver says it is done (a CMA-ES termination criterion). In async mode that evaluation runs
between the candidates and its result arrives during a later generation
(:mod:`evokit_py.training.progress_log` writes a row of the CSV once its evaluation is known). The
first Ctrl-C (or SIGTERM) finishes the current generation, writes a checkpoint, exports the best
policy evaluated so far and stops; a second one interrupts at once (:class:`StoppedAtOnce`, which
carries the signal). A checkpoint or ``progress.csv`` write that fails (a full disk) is reported and
training goes on, so the trained policy is still exported; a policy that cannot be written to
``policy.onnx`` is in the checkpoint, and when no checkpoint could be written either, it goes to a new
file in the temporary folder (:meth:`Training._export`). Each failure is in the :class:`TrainResult`.
"""
import csv
import math
import os
import signal
import tempfile
import time
from collections.abc import Callable, Generator
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evokit_py.config import ESConfig
from evokit_py.pool import EvaluationPool, Losses, WorkersLostError
from evokit_py.training.evaluations import Evaluations
from evokit_py.training.progress_log import ProgressLog
from evokit_py.training.result import StoppedAtOnce, TrainError, TrainResult, TrainStopped
from evokit_py.training.run_folders import RunPaths
from evokit_py.training.saving import export_policy, restore_checkpoint, save_checkpoint
from evokit_py.training.schedule import Batch, async_batches, sync_batches
from evokit_py.training.setup import Run, setup_run
from evokit_py.training.totals import Totals
from evokit_py.training.unfinished import UnfinishedGeneration
from parl_lite.common.progress import Reporter
from parl_lite.common.summary import RunSummary

__all__ = ["Training"]

_RATE_WINDOW = 10  # generations the log line's rate and ETA are taken over (episodes lengthen as training goes)


class Training:
    """An es-train run once its folders are locked and checked: its parts (the run, the worker pool,
    the stop flag, the progress log, the evaluations, the schedule's batches, the reporter), made
    by :meth:`train` and closed before it returns, and what happened to it (the evaluations' outcome,
    the solver's stop, the workers lost, a stop signal, a checkpoint that could not be written).
    The loop's steps are its methods: they read and write the run's own state, nothing else."""

    run: Run
    totals: Totals
    unfinished: UnfinishedGeneration  # the candidates of the next update evaluated so far (a checkpoint keeps them)
    pool: EvaluationPool
    stop: "_StopFlag"
    log: ProgressLog
    evaluations: Evaluations
    batches: Generator[Batch | None, None, None]
    reporter: Reporter
    startup_seconds: float  # before the first generation (the run's parts, the pool and its workers)
    start_generation: int  # the generation it started at (> 0: resumed)
    seconds_before: float  # training seconds before it started

    def __init__(self, config: ESConfig, paths: RunPaths, backend: str, echo: Callable[[str], None],
                 started: float):
        self.config, self.paths, self.backend, self.echo, self.started = config, paths, backend, echo, started
        self.last_eval: tuple[int, float] | None = None  # (generation, mean return) of the last evaluation
        self.solved = False
        self.solved_at: int | None = None  # environment steps when the target was first reached
        self.confirmed_return: float | None = None  # the last confirmation's mean return
        self.stop_reason: str | None = None  # the solver's termination criterion, as of the last batch
        self.workers_lost: str | None = None  # why the pool could not go on (WorkersLostError)
        self.losses = Losses()  # workers lost since the last progress line
        self.stop_signal: int | None = None  # the signal that interrupted the run
        self.checkpoint_error: str | None = None  # why the last checkpoint could not be written

    def train(self, resume: bool, progress_bar: bool | None) -> TrainResult:
        """Train (see :func:`evokit_py.train.train`), from the checkpoint when ``resume`` and there is one."""
        with ExitStack() as stack:
            self._open(stack, resume, progress_bar)
            self._loop()
            self.checkpoint_error = self._save_checkpoint()
            self._echo_worker_events()
        return self._end()

    def _open(self, stack: ExitStack, resume: bool, progress_bar: bool | None) -> None:
        """Make the run's parts, each closed by ``stack``."""
        config, hp = self.config, self.config.train
        run = self.run = stack.enter_context(setup_run(config))
        start = self._resume() if resume and self.paths.checkpoint.is_file() else _Start(Totals.start(run))
        self.totals, self.unfinished, self.seconds_before = start.totals, start.unfinished, start.totals.train_seconds
        self.pool = stack.enter_context(closing(EvaluationPool(config, run.policy.to_bytes(), run.noise_spec(),
                                                               hp.workers, self.backend, hp.address)))
        self.startup_seconds = time.perf_counter() - self.started
        self.echo(self._start_line())
        self.stop = stack.enter_context(_StopFlag())
        self.log = stack.enter_context(ProgressLog(self.paths.csv, start.rows, self.echo))
        self.evaluations = Evaluations(run, self.pool)
        self.evaluations.restore(start.pending)
        self.log.hold(start.held_rows, self.evaluations.awaits)
        queue = self.evaluations.queue
        self.batches = stack.enter_context(closing(async_batches(run, self.pool, queue, self.unfinished) if queue
                                                   else sync_batches(run, self.pool, self.unfinished)))
        self.reporter = stack.enter_context(closing(Reporter(config.solver.type, hp.generations, run.solver.generation,
                                                             progress_bar, unit="generation", echo=self.echo,
                                                             window=_RATE_WINDOW)))
        self.start_generation = run.solver.generation

    def _resume(self) -> "_Start":
        """Restore the run from the checkpoint (checked by :func:`evokit_py.train.train` before)."""
        run, checkpoint = self.run, self.paths.checkpoint
        extra = restore_checkpoint(run, checkpoint)
        held_rows = ProgressLog.held_from_extra(extra)
        held = {row["generation"] for row in held_rows}
        rows = [row for row in _read_rows(self.paths.csv, run.solver.generation) if int(row["generation"]) not in held]
        unfinished = UnfinishedGeneration.from_extra(extra, run.solver.generation)
        kept = f", with {len(unfinished)} evaluated candidate(s) of the next" if len(unfinished) else ""
        self.echo(f"resumed from {checkpoint} at generation {run.solver.generation}{kept}")
        if unfinished.arrived and self.config.train.mode == "sync":
            self.echo(f"es-train: the {len(unfinished.arrived)} result(s) the async run held are not used in sync "
                      f"mode (it plays whole generations)")
        return _Start(Totals.from_extra(extra, run.obs_stats), rows, held_rows, Evaluations.pending_from_extra(extra),
                      unfinished)

    def _loop(self) -> None:
        """Generations until the budget, the target or the solver's own end; or until a stop signal
        (after its generation) or the loss of the workers (the state of the last whole generation is kept)."""
        hp, solver = self.config.train, self.run.solver
        loop_started = time.perf_counter()
        while solver.generation < hp.generations and not self.solved and self.stop_reason is None:
            try:
                row = self._generation()
            except WorkersLostError as error:
                self.workers_lost = str(error)
                return
            if row is None:
                continue
            self._report(row, time.perf_counter() - loop_started)
            if solver.generation % hp.checkpoint_every == 0:
                self.checkpoint_error = self._save_checkpoint()
            if self.stop.signal is not None:
                self.stop_signal = self.stop.signal
                return

    def _generation(self) -> dict | None:
        """Take the next batch (the run is updated with it already), request its evaluation, log its row
        and return it; None when, in async mode, an evaluation reached the target before the next update.

        Raises:
            WorkersLostError: the pool has no worker left and could make none in time, or its backend is gone.
        """
        hp, solver, episodes = self.config.train, self.run.solver, self.config.env.episodes_per_candidate
        cpu_tick = time.process_time()
        batch = next(self.batches)
        if batch is None:
            self._take(self.evaluations.finished(wait=False))
            self._echo_worker_events()
            return None
        workers_cpu = batch.result["cpu_seconds"] if self.pool.backend == "remote" else 0.0  # else counted here
        self.stop_reason = solver.stop_reason()
        self.totals.add(batch, episodes, time.process_time() - cpu_tick + workers_cpu)
        due = (batch.generation + 1) % hp.eval_every == 0 or batch.generation + 1 == hp.generations
        # the row first: if the evaluation (played at once in sync mode) loses the workers, the checkpoint
        # holds the row, waiting for that evaluation, which a resumed run plays
        row = self.log.add(batch, self.totals, episodes, due)
        if due:
            self.evaluations.request(batch.generation)
        last = solver.generation >= hp.generations or self.stop_reason is not None
        if last:
            self.batches.close()  # async: no new candidates; the evaluations still due are finished next
        self._take(self.evaluations.finished(wait=last))
        self._echo_worker_events()
        return row

    def _take(self, finished: list[tuple[int, float, np.ndarray, dict]]) -> None:
        """Record finished evaluations: the rows held for them filled in, the best solution kept,
        solved once one reaches ``train.target_return`` and, with ``train.confirm_episodes``, its
        confirmation does too (a confirmed solution is recorded with its confirmation's mean)."""
        hp = self.config.train
        for generation, value, params, obs_stats in finished:
            self.log.evaluated(generation + 1, value)
            self.last_eval = generation + 1, value
            target = hp.target_return
            reached = target is not None and value >= target and not self.solved
            if target is not None and reached and hp.confirm_episodes:
                value = self.confirmed_return = self.evaluations.confirm(generation, params, obs_stats)
                reached = value >= target
                self.echo(f"es-train: the evaluation after generation {generation + 1} reached the target "
                          f"{target:g}; {'confirmed' if reached else 'not confirmed'}: {value:.2f} on "
                          f"{hp.confirm_episodes} fresh episodes" + ("" if reached else ", training goes on"))
            self.totals.record(value, params, obs_stats)
            if reached:
                self.solved, self.solved_at = True, self.totals.steps

    def _echo_worker_events(self) -> None:
        """Say what happened to the workers since the last call (lost, made), and keep the losses for
        the next progress line."""
        events, self.losses = self.pool.drain_events()
        for event in events:
            self.echo(f"es-train: {event}")

    def _save_checkpoint(self) -> str | None:
        """Write a checkpoint (with the rows held for their evaluation, the solutions still to be
        evaluated and the evaluated candidates of the update under way: in sync mode those evaluated
        before the workers were lost, in async mode the results not yet in an update); on failure say
        so and return why (training goes on: the policy is kept)."""
        extra = {**self.totals.to_extra(), **self.log.to_extra(), **self.evaluations.to_extra(),
                 **self.unfinished.to_extra(self.run.solver)}
        try:
            save_checkpoint(self.run, self.paths.checkpoint, extra=extra)
        except OSError as error:  # the message names the file and why (no space left on device, ...)
            self.echo(f"es-train: warning: the checkpoint is not written: {error}; training goes on")
            return str(error)
        return None

    def _start_line(self) -> str:
        config, hp, spec = self.config, self.config.train, self.run.noise_spec()
        noise = (f"noise table {spec.table_name} ({spec.table_size * 4 / 2**20:.1f} MB shared)" if spec.table_name
                 else "noise from per-sample seeds")
        return (f"es-train: {config.env.id}, {config.solver.type}, {self.run.solver.dim} parameters, population "
                f"{config.solver.population_size}, {hp.workers} worker(s) ({hp.address or self.backend}), {hp.mode} "
                f"updates, {noise}, start-up {self.startup_seconds:.2f}s")

    def _report(self, row: dict, seconds: float) -> None:
        """One generation's figures, with the last evaluation and the generation it was of: the bar's
        postfix on a terminal, else a log line (its rate and ETA from the wall-clock ``seconds`` of this
        call's loop, evaluations included, over the last :data:`_RATE_WINDOW` generations)."""
        last_eval, losses, dropped = self.last_eval, self.losses, self.run.solver.dropped_samples
        lost = _losses_text(losses, self.config.train.mode) if losses.workers else ""
        evaluation = "eval         -" if last_eval is None else f"eval {last_eval[1]:9.2f} (gen {last_eval[0]})"
        details = (f"mean {row['mean_return']:9.2f}  best {row['max_return']:9.2f}  {evaluation}  "
                   f"{row['episodes_per_second']:7.1f} episodes/s  train {row['train_seconds']:6.2f}s"
                   + (f"  ({dropped} stale samples dropped)" if dropped else "") + (f"  ({lost})" if lost else ""))
        postfix = {"mean": f"{row['mean_return']:.1f}", "best": f"{row['max_return']:.1f}",
                   "eval": "-" if last_eval is None else f"{last_eval[1]:.1f} (gen {last_eval[0]})",
                   "episodes/s": f"{row['episodes_per_second']:.0f}"}
        if lost:
            postfix["lost"] = lost
        self.reporter.progress(self.run.solver.generation, seconds, details, postfix)

    def _end(self) -> TrainResult:
        """Once the parts are closed: export the policy, say how the run ended and return its result.

        Raises:
            TrainStopped: the run lost its workers (carrying the result).
        """
        log_error = self._unwritten_rows()
        totals = self.totals  # the best evaluated solution with the statistics it was evaluated with, if any
        onnx_path, export_error = self._export(*((totals.best_params, totals.best_obs_stats) if totals.evaluated
                                                 else (None, None)))
        total = time.perf_counter() - self.started
        self.echo(self._end_line(onnx_path, export_error, total))
        result = TrainResult(
            generations=self.run.solver.generation, solved=self.solved, best_eval_return=totals.best_return,
            train_seconds=totals.train_seconds, total_seconds=total, episodes=totals.episodes, steps=totals.steps,
            interrupted=self.stop_signal is not None, onnx_path=onnx_path, csv_path=self.paths.csv,
            checkpoint_path=self.paths.checkpoint, params=np.asarray(totals.best_params),
            checkpoint_error=self.checkpoint_error, summary=self._summary(), startup_seconds=self.startup_seconds,
            cpu_seconds=totals.cpu_seconds, confirmed_return=self.confirmed_return, stop_signal=self.stop_signal,
            export_error=export_error, log_error=log_error)
        if self.workers_lost is not None:
            raise TrainStopped(self._stopped_message(), result)
        return result

    def _unwritten_rows(self) -> str | None:
        """Why rows of ``progress.csv`` are not written, and where they are (None: all are written)."""
        if not self.log.unwritten:
            return None
        kept = (f"the checkpoint {self.paths.checkpoint} holds them (a run resumed from it writes them)"
                if self.checkpoint_error is None else "they are lost")
        return f"{self.log.failure}; {self.log.unwritten} row(s) of it were not written: {kept}"

    def _export(self, params: np.ndarray | None, obs_stats: dict | None) -> tuple[Path | None, str | None]:
        """Export the policy of ``params`` and ``obs_stats`` (None: the current ones) to ``policy.onnx``;
        where that cannot be written and no checkpoint holds the policy either, to a new file in the
        temporary folder.

        Returns:
            Where the policy is (None: nowhere), and why it is not in ``policy.onnx`` (None: it is).
        """
        paths = self.paths
        try:
            export_policy(self.run, paths.onnx, params, obs_stats)
            return paths.onnx, None
        except OSError as error:
            failure = str(error)
        if self.checkpoint_error is None:
            return None, (f"{failure}; the policy is in the checkpoint {paths.checkpoint}: once there is room, the "
                          f"same command with --resume writes it")
        try:
            descriptor, name = tempfile.mkstemp(prefix="es-train-policy-", suffix=".onnx")
            os.close(descriptor)
        except OSError as error:
            return None, f"{failure}; nor could a file be made in {tempfile.gettempdir()} ({error}): the policy is lost"
        try:
            export_policy(self.run, name, params, obs_stats)
        except OSError as error:
            os.unlink(name)
            return None, f"{failure}; no checkpoint holds the policy, and {error}: the policy is lost"
        return Path(name), f"{failure}; no checkpoint holds the policy, so it was written to {name} instead"

    def _end_line(self, onnx_path: Path | None, export_error: str | None, total: float) -> str:
        """How the run ended, its figures and where its files are (``total``: the seconds of the call)."""
        totals, paths = self.totals, self.paths
        written = "checkpoint and policy written" if not (self.checkpoint_error or export_error) else \
            "see below what could not be written"
        train_line = f"train {totals.train_seconds:.2f}s, {totals.cpu_seconds:.2f} CPU-s (trainer and workers)"
        if self.start_generation:
            train_line += (f" since generation 0, {totals.train_seconds - self.seconds_before:.2f}s of them after the "
                           f"resume at generation {self.start_generation}")
        return (f"es-train {self._status(written)}: generation {self.run.solver.generation}, best evaluation return "
                f"{totals.best_return:.2f}, {totals.episodes} episodes, {totals.steps} steps; {train_line}; this call "
                f"{total:.2f}s with start-up and evaluations; checkpoint {paths.checkpoint}, log {paths.csv}, policy "
                f"{onnx_path or 'not written'}")

    def _status(self, written: str) -> str:
        """``solved``, ``interrupted by SIGINT (...)``, ...: why the run ended (``written``: what of its
        files was written)."""
        if self.stop_signal is not None:
            return f"interrupted by {signal.Signals(self.stop_signal).name} ({written})"
        if self.workers_lost:
            return f"stopped, its workers lost ({written})"
        if self.solved:
            return "solved" + ("" if self.confirmed_return is None else
                               f" (confirmed: {self.confirmed_return:.2f} on {self.config.train.confirm_episodes} "
                               f"fresh episodes)")
        return f"solver stopped ({self.stop_reason})" if self.stop_reason else "generation budget spent"

    def _summary(self) -> RunSummary:
        """The run in the schema every parl_lite training script prints."""
        config, totals, generations = self.config, self.totals, self.run.solver.generation
        return RunSummary(algo=config.solver.type, env=config.env.id, seed=config.seed, steps=totals.steps,
                          solved_at=self.solved_at,
                          eval_return=math.nan if self.last_eval is None else self.last_eval[1],
                          best_eval_return=totals.best_return,
                          train_seconds=totals.train_seconds, train_cpu_seconds=totals.cpu_seconds,
                          updates=generations,
                          updates_per_second=generations / totals.train_seconds if totals.train_seconds else 0.0,
                          actors=config.train.workers if self.backend == "remote" else None,
                          checkpoint=None if self.checkpoint_error else str(self.paths.checkpoint),
                          interrupted=self.stop_signal is not None)

    def _stopped_message(self) -> str:
        """The one line a run that lost its workers ends with: why, where its state is (with the
        evaluated candidates of the next generation or update), how to resume."""
        generation, unfinished = self.run.solver.generation, len(self.unfinished)
        if self.checkpoint_error is None:
            next_ones = f" and {unfinished} evaluated candidate(s) of the next" if unfinished else ""
            kept = (f"the checkpoint {self.paths.checkpoint} holds generation {generation}{next_ones}: resume with "
                    f"the same command and --resume once workers can run again (parl-lite connect adds a node to a "
                    f"cluster)")
        else:
            kept = f"no checkpoint could be written ({self.checkpoint_error})"
        return f"es-train stopped at generation {generation}: {self.workers_lost}; {kept}"


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


def _losses_text(losses: Losses, mode: str) -> str:
    """``1 worker(s) lost (node 127.0.0.1:4101), 2 candidate(s) re-queued, 1 worker(s) left, 2 now``."""
    fate = "re-queued" if mode == "sync" else "re-drawn"
    return (f"{losses.workers} worker(s) lost ({', '.join(sorted(set(losses.where)))}), {losses.candidates} "
            f"candidate(s) {fate}, {losses.workers_left} worker(s) left, {losses.workers_now} now")


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
