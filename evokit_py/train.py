"""The ``parl-lite es-train`` loop: ask, evaluate in parallel, tell, log, checkpoint, export.

Per generation (update): a batch of ``population_size`` evaluated candidates arrives
(:mod:`evokit_py.schedule`: whole generations in ``train.mode: sync``, results as they come in
``async``); the solver is told their mean returns; the observation statistics take in their
observations; every ``eval_every`` generations the current solution is evaluated on
``eval_episodes`` episodes, and training stops when their mean reaches ``target_return`` (or when
the solver says it is done: a CMA-ES termination criterion). In async mode that evaluation runs
between the candidates (:class:`evokit_py.schedule.EvaluationQueue`) and its result arrives during a
later generation (a row of the CSV is written once its evaluation is known, so that row ``g``
holds the evaluation of the solution after generation ``g`` in both modes). In sync mode every
random draw depends only on (seed, generation, index), so a run resumed from a checkpoint ends
exactly where the uninterrupted run does. The exported policy is the best evaluated solution with
the observation statistics it was evaluated with. A checkpoint also carries the CSV rows still held
for their evaluation and the solutions those evaluations are of, so that a run resumed after a kill
or a Ctrl-C in async mode writes every row and runs the evaluations that were lost.

The first Ctrl-C finishes the current generation, writes a checkpoint and stops; a second one
interrupts at once.

Before the first generation the log and checkpoint folders are created and test-written, and a
checkpoint to resume from is read and checked; a checkpoint write that fails later is reported and
training goes on, so the trained policy is still exported.
"""
import csv
import math
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evokit_py.checkpoint import check_trainer_extra, read_checkpoint
from evokit_py.config import ConfigError, ESConfig
from evokit_py.pool import EvaluationPool
from evokit_py.obs_stats import ObsStats
from evokit_py.seeds import evaluation_seeds
from evokit_py.training.saving import export_policy, restore_checkpoint, save_checkpoint
from evokit_py.training.setup import Run, setup_run
from evokit_py.schedule import EVALUATION_INFO, EvaluationQueue, EvaluationRequest, async_batches, sync_batches
from evokit_py.basis import Basis
from parl_lite.train.progress import Reporter
from parl_lite.train.summary import RunSummary

__all__ = ["TrainError", "TrainResult", "train", "CHECKPOINT_NAME", "CSV_NAME", "ONNX_NAME"]

CHECKPOINT_NAME = "solver.h5"
CSV_NAME = "progress.csv"
ONNX_NAME = "policy.onnx"
CSV_FIELDS = ["generation", "mean_return", "max_return", "min_return", "eval_return", "episodes", "steps",
              "train_seconds", "episodes_per_second"]
_INTEGER_FIELDS = ("generation", "episodes", "steps")
_BYTES_PER_CANDIDATE = 1024  # sampling info, seeds and result of one candidate, in the trainer's memory


class TrainError(ValueError):
    """A run cannot start or continue; the message names the folder, file or key at fault."""


@dataclass
class TrainResult:
    """What a training run reached.

    Attributes:
        generations: generations completed (counting those before a resume).
        solved: whether the evaluation mean reached ``train.target_return``.
        best_eval_return: best evaluation mean seen (``-inf`` if never evaluated).
        train_seconds: wall-clock of ask/evaluate/tell, evaluations of the solution excluded.
        total_seconds: wall-clock of the whole call, start-up and evaluations included.
        startup_seconds: the part of it before the first generation (the agent, the pool and its workers).
        episodes, steps: training episodes and environment steps (evaluations excluded).
        interrupted: stopped by Ctrl-C (a checkpoint was written).
        params: the best parameters (the exported ones).
        checkpoint_error: why the last checkpoint write failed (``None``: it succeeded).
        summary: the run in the schema every parl_lite training script prints (``algo`` is the
            solver type, ``updates`` the generations; ``train_cpu_seconds`` counts this call only,
            also after a resume).
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


@dataclass
class _Progress:
    """The running totals a checkpoint carries besides the solver."""
    best_return: float
    best_params: np.ndarray
    best_obs_stats: dict[str, np.ndarray]  # the normalisation the best parameters were evaluated with
    train_seconds: float = 0.0
    episodes: int = 0
    steps: int = 0

    def record(self, value: float, params: np.ndarray, obs_stats: dict[str, np.ndarray]) -> None:
        """Keep ``params`` (and the statistics they were evaluated with) if ``value`` is the best so far."""
        if value > self.best_return:
            self.best_return, self.best_params, self.best_obs_stats = value, params, obs_stats

    def to_extra(self) -> dict:
        obs = {f"best_obs_stats/{key}": value for key, value in self.best_obs_stats.items()}
        return {"best_return": np.asarray(self.best_return), "best_params": self.best_params, **obs,
                "train_seconds": np.asarray(self.train_seconds), "episodes": np.asarray(self.episodes),
                "steps": np.asarray(self.steps)}

    @classmethod
    def from_extra(cls, extra: dict, obs_stats: ObsStats) -> "_Progress":
        obs = {key.split("/", 1)[1]: value for key, value in extra.items() if key.startswith("best_obs_stats/")}
        return cls(float(extra["best_return"]), np.asarray(extra["best_params"]), obs or obs_stats.state_dict(),
                   float(extra["train_seconds"]), int(extra["episodes"]), int(extra["steps"]))


class _StopFlag:
    """First SIGINT sets the flag; the second raises KeyboardInterrupt."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: no signal handling
            self._previous = None
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        # os.write, not print: a handler that prints while the main thread prints raises
        os.write(2, b"es-train: stopping after this generation (Ctrl-C again to stop at once)\n")

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def train(config: ESConfig, resume: bool = False, backend: str = "remote",
          echo: Callable[[str], None] = print, progress_bar: bool | None = None) -> TrainResult:
    """Train with ES as ``config`` says (see the module docstring).

    Args:
        config: the validated config.
        resume: continue from ``train.checkpoint_dir/solver.h5`` when it exists.
        backend: ``"remote"`` (parl_lite actors, one per worker) or ``"inprocess"``.
        echo: where messages and the per-generation log lines go.
        progress_bar: True: a tqdm bar on stderr instead of a log line per generation; False: log
            lines; None: a bar when stderr is a terminal (:class:`parl_lite.train.Reporter`).

    Returns:
        A :class:`TrainResult` (its ``checkpoint_error`` says why the last checkpoint write failed).

    Raises:
        TrainError, ConfigError, SolverCheckpointError: before the first generation, naming the
            folder, key or file (see :func:`_check_before_training`); KeyboardInterrupt: a second
            Ctrl-C.
    """
    started = time.perf_counter()
    hp = config.train
    log_dir, checkpoint_path = Path(hp.log_dir), Path(hp.checkpoint_dir) / CHECKPOINT_NAME
    _check_before_training(config, log_dir, checkpoint_path, resume)
    csv_path = log_dir / CSV_NAME
    checkpoint_error = None
    run = setup_run(config)
    solver = run.solver
    progress = _Progress(-math.inf, solver.solution(), run.obs_stats.state_dict())
    rows: list[dict] = []
    held_rows: list[dict] = []
    pending: dict[int, tuple[np.ndarray, dict]] = {}
    if resume and checkpoint_path.is_file():
        extra = restore_checkpoint(run, checkpoint_path)
        progress = _Progress.from_extra(extra, run.obs_stats)
        held_rows, pending = _ProgressLog.held_from_extra(extra), _Evaluator.pending_from_extra(extra)
        held = {row["generation"] for row in held_rows}
        rows = [row for row in _read_rows(csv_path, solver.generation) if int(row["generation"]) not in held]
        echo(f"resumed from {checkpoint_path} at generation {solver.generation}")
    pool = batches = reporter = None
    startup = 0.0
    solved = interrupted = False
    stop_reason = None
    solved_at: int | None = None
    last_eval = math.nan
    cpu_seconds = 0.0
    resumed_seconds = progress.train_seconds

    try:
        pool = EvaluationPool(config, run.policy.to_bytes(), run.noise_spec(), hp.workers, backend, hp.address)
        startup = time.perf_counter() - started
        echo(f"es-train: {config.env.id}, {config.solver.type}, {solver.dim} parameters, population "
             f"{config.solver.population_size}, {hp.workers} worker(s) ({hp.address or backend}), {hp.mode} updates, "
             f"{_noise_text(run)}, start-up {startup:.2f}s")
        with _StopFlag() as stop, _ProgressLog(csv_path, rows) as log:
            evaluator = _Evaluator(run, pool, EvaluationQueue(hp.target_return) if hp.mode == "async" else None)
            for row in held_rows:
                log.add(row, awaiting=row["generation"] - 1 in pending)
            evaluator.restore(pending)
            batches = async_batches(run, pool, evaluator.queue) if evaluator.queue else sync_batches(run, pool)
            reporter = Reporter(config.solver.type, hp.generations, solver.generation, progress_bar,
                                unit="generation", echo=echo)
            while solver.generation < hp.generations and not solved and stop_reason is None:
                cpu_tick = time.process_time()
                batch = next(batches)
                if batch is None:  # async: an evaluation reached the target before the next update
                    last_eval, solved = _take_evaluations(evaluator.finished(False), progress, log, hp.target_return,
                                                          last_eval)
                    solved_at = progress.steps
                    continue
                tick = time.perf_counter()
                generation = solver.generation
                infos, result = batch.infos, batch.result
                run.update(infos, result)
                elapsed = batch.seconds + time.perf_counter() - tick
                cpu_seconds += time.process_time() - cpu_tick
                stop_reason = solver.stop_reason()
                progress.train_seconds += elapsed
                progress.episodes += len(infos) * config.env.episodes_per_candidate
                progress.steps += int(result["steps"])
                if (generation + 1) % hp.eval_every == 0 or generation + 1 == hp.generations:
                    evaluator.request(generation)
                returns = result["returns"]
                row = {"generation": generation + 1, "mean_return": float(returns.mean()),
                       "max_return": float(returns.max()), "min_return": float(returns.min()),
                       "eval_return": math.nan, "episodes": progress.episodes, "steps": progress.steps,
                       "train_seconds": round(progress.train_seconds, 4),
                       "episodes_per_second": round(len(infos) * config.env.episodes_per_candidate / elapsed, 1)}
                log.add(row, awaiting=evaluator.awaits(generation))  # filled in when its evaluation arrives
                last_run = solver.generation >= hp.generations or stop_reason is not None
                if last_run:
                    batches.close()  # async: no new candidates; the evaluations still due are finished next
                last_eval, reached = _take_evaluations(evaluator.finished(last_run), progress, log,
                                                       hp.target_return, last_eval)
                if reached and not solved:
                    solved, solved_at = True, progress.steps
                _report(reporter, solver.generation, progress.train_seconds - resumed_seconds, row, last_eval,
                        solver.dropped_samples)
                if solver.generation % hp.checkpoint_every == 0:
                    checkpoint_error = _save_checkpoint(run, checkpoint_path, progress, log, evaluator, echo)
                if stop.requested:
                    interrupted = True
                    break
            checkpoint_error = _save_checkpoint(run, checkpoint_path, progress, log, evaluator, echo)
    finally:
        if reporter is not None:
            reporter.close()
        if batches is not None:
            batches.close()  # async: waits for the evaluation episodes still running
        if pool is not None:
            pool.close()
        run.close()
    onnx_path = None
    if not interrupted:
        onnx_path = log_dir / ONNX_NAME
        export_policy(run, onnx_path, progress.best_params, progress.best_obs_stats)
    total = time.perf_counter() - started
    status = "interrupted (checkpoint written)" if interrupted else ("solved" if solved else (
        f"solver stopped ({stop_reason})" if stop_reason else "generation budget spent"))
    echo(f"es-train {status}: generation {solver.generation}, best evaluation return {progress.best_return:.2f}, "
         f"train {progress.train_seconds:.2f}s, total {total:.2f}s, {progress.episodes} episodes, "
         f"{progress.steps} steps; "
         f"checkpoint {checkpoint_path}, log {csv_path}" + (f", policy {onnx_path}" if onnx_path else ""))
    summary = RunSummary(algo=config.solver.type, env=config.env.id, seed=config.seed, steps=progress.steps,
                         solved_at=solved_at, eval_return=last_eval, train_seconds=progress.train_seconds,
                         train_cpu_seconds=cpu_seconds, updates=solver.generation,
                         updates_per_second=solver.generation / progress.train_seconds
                         if progress.train_seconds else 0.0,
                         actors=hp.workers if backend == "remote" else None,
                         checkpoint=None if checkpoint_error else str(checkpoint_path), interrupted=interrupted)
    return TrainResult(solver.generation, solved, progress.best_return, progress.train_seconds, total,
                       progress.episodes, progress.steps, interrupted, onnx_path, csv_path, checkpoint_path,
                       np.asarray(progress.best_params), checkpoint_error, summary, startup)


def _report(reporter: Reporter, generation: int, seconds: float, row: dict, last_eval: float,
            dropped_samples: int) -> None:
    """One generation's figures: the bar's postfix on a terminal (with the last evaluation), else a
    log line (with this generation's evaluation, nan when there was none)."""
    details = (f"mean {row['mean_return']:9.2f}  best {row['max_return']:9.2f}  eval {row['eval_return']:9.2f}  "
               f"{row['episodes_per_second']:7.1f} episodes/s  train {row['train_seconds']:6.2f}s"
               + (f"  ({dropped_samples} stale samples dropped)" if dropped_samples else ""))
    postfix = {"mean": f"{row['mean_return']:.1f}", "best": f"{row['max_return']:.1f}",
               "eval": f"{last_eval:.1f}", "episodes/s": f"{row['episodes_per_second']:.0f}"}
    reporter.progress(generation, seconds, details, postfix)


def _check_before_training(config: ESConfig, log_dir: Path, checkpoint_path: Path, resume: bool) -> None:
    """What would otherwise fail only after the work, or leave a half-started run: the folders are
    created and test-written, the checkpoint path is not a folder, one generation fits in memory,
    and a checkpoint to resume from is sound (checksums, values, the trainer's datasets).

    Raises:
        TrainError, ConfigError: naming the key and the folder or value.
    """
    for key, folder in (("train.log_dir", log_dir), ("train.checkpoint_dir", checkpoint_path.parent)):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as error:
            raise TrainError(f"{key}: cannot write in {folder}: {error.strerror or error}") from error
    if checkpoint_path.is_dir():
        raise TrainError(f"train.checkpoint_dir: {checkpoint_path} is a folder, not a checkpoint file; move it away")
    population = config.solver.population_size
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if population * _BYTES_PER_CANDIDATE > memory:
        raise ConfigError(f"solver.population_size: a generation of {population} candidates needs about "
                          f"{population * _BYTES_PER_CANDIDATE / 2**30:.0f} GiB, this machine has "
                          f"{memory / 2**30:.0f} GiB")
    if resume and checkpoint_path.is_file():
        _, groups = read_checkpoint(checkpoint_path)
        check_trainer_extra(groups, checkpoint_path)


def _save_checkpoint(run: Run, path: Path, progress: "_Progress", log: "_ProgressLog", evaluator: "_Evaluator",
                     echo: Callable[[str], None]) -> str | None:
    """Write a checkpoint (with the rows held for their evaluation and the solutions still to be
    evaluated); on failure say so and return why (training goes on: the policy is kept)."""
    try:
        save_checkpoint(run, path, extra={**progress.to_extra(), **log.to_extra(), **evaluator.to_extra()})
    except OSError as error:
        reason = f"cannot write checkpoint {path}: {error}"
        echo(f"es-train: warning: {reason}; training goes on")
        return reason
    return None


def _noise_text(run: Run) -> str:
    spec = run.noise_spec()
    if spec.table_name is None:
        return "noise from per-sample seeds"
    return f"noise table {spec.table_name} ({spec.table_size * 4 / 2**20:.1f} MB shared)"


def _take_evaluations(finished: list[tuple[int, float, np.ndarray, dict]], progress: _Progress, log: "_ProgressLog",
                      target: float | None, last_eval: float) -> tuple[float, bool]:
    """Record finished evaluations (the best solution kept, the rows held for them filled in).

    Returns:
        The last mean return (``last_eval`` when none finished) and whether one reached ``target``.
    """
    reached = False
    for generation, value, params, obs_stats in finished:
        progress.record(value, params, obs_stats)
        log.evaluated(generation + 1, value)
        last_eval = value
        reached = reached or (target is not None and value >= target)
    return last_eval, reached


class _ProgressLog:
    """progress.csv (rewritten from ``earlier_rows``); each new row is written once the evaluation of
    its generation, if one was requested, is known: in async mode one or more generations later.
    Leaving the ``with`` block writes the rows still held (their evaluation stays ``nan``)."""

    def __init__(self, path: Path, earlier_rows: list[dict]):
        self._file = open(path, "w", newline="")
        self._writer = csv.DictWriter(self._file, CSV_FIELDS)
        self._writer.writeheader()
        self._writer.writerows(earlier_rows)
        self._held: list[tuple[dict, bool]] = []  # (row, still awaiting its evaluation), oldest first

    def __enter__(self) -> "_ProgressLog":
        return self

    def __exit__(self, *exc) -> None:
        self._held = [(row, False) for row, _ in self._held]
        self._write_ready()
        self._file.close()

    def add(self, row: dict, awaiting: bool) -> None:
        self._held.append((row, awaiting))
        self._write_ready()

    def evaluated(self, generation: int, value: float) -> None:
        """Fill in the evaluation of the row of ``generation`` (1-based, as in the CSV)."""
        for index, (row, _) in enumerate(self._held):
            if row["generation"] == generation:
                row["eval_return"] = value
                self._held[index] = (row, False)
        self._write_ready()

    def _write_ready(self) -> None:
        while self._held and not self._held[0][1]:
            self._writer.writerow(self._held.pop(0)[0])
        self._file.flush()

    def to_extra(self) -> dict[str, np.ndarray]:
        """The rows not written yet, for a checkpoint (their evaluations apart: nan where none yet)."""
        rows = [row for row, _ in self._held]
        values = np.array([[row[key] for key in CSV_FIELDS if key != "eval_return"] for row in rows], dtype=np.float64)
        return {"log/held_rows": values.reshape(len(rows), len(CSV_FIELDS) - 1),
                "log/held_evals": np.array([row["eval_return"] for row in rows], dtype=np.float64)}

    @staticmethod
    def held_from_extra(extra: dict[str, np.ndarray]) -> list[dict]:
        """The rows :meth:`to_extra` saved (none in a checkpoint from before it)."""
        if "log/held_rows" not in extra:
            return []
        fields = [key for key in CSV_FIELDS if key != "eval_return"]
        rows = []
        for values, evaluation in zip(extra["log/held_rows"], extra["log/held_evals"], strict=True):
            row = {key: int(value) if key in _INTEGER_FIELDS else float(value)
                   for key, value in zip(fields, values, strict=True)}
            rows.append({**row, "eval_return": float(evaluation)})
        return rows


class _Evaluator:
    """Evaluations of the solution: at once (sync mode), or through ``queue`` between the candidates
    (async mode), each reported with the solution and observation statistics it evaluated."""

    def __init__(self, run: Run, pool: EvaluationPool, queue: EvaluationQueue | None):
        self.run, self.pool, self.queue = run, pool, queue
        self._solutions: dict[int, tuple[np.ndarray, dict]] = {}  # generation -> (solution, obs stats)
        self._done: list[tuple[int, float]] = []

    def request(self, generation: int) -> None:
        """Evaluate the current solution, the one after ``generation``."""
        self._request(generation, self.run.solver.solution(), self.run.obs_stats.state_dict())

    def restore(self, pending: dict[int, tuple[np.ndarray, dict]]) -> None:
        """Request again the evaluations a checkpoint had pending (:meth:`pending_from_extra`)."""
        for generation, (solution, obs_stats) in sorted(pending.items()):
            self._request(generation, solution, obs_stats)

    def _request(self, generation: int, solution: np.ndarray, obs_stats: dict) -> None:
        self._solutions[generation] = (solution, obs_stats)
        request = _evaluation(self.run, generation, solution, obs_stats)
        if self.queue is None:
            self._done.append((generation, _evaluate(self.pool, *request)))
        else:
            self.queue.request(generation, *request)

    def to_extra(self) -> dict[str, np.ndarray]:
        """The evaluations requested and not finished, for a checkpoint: generation, solution and
        observation statistics of each."""
        pending = sorted(self._solutions.items())
        dim, obs_dim = self.run.solver.dim, len(self.run.obs_stats.total)
        extra = {"log/pending_generations": np.array([generation for generation, _ in pending], dtype=np.int64),
                 "log/pending_solutions": np.array([solution for _, (solution, _) in pending]).reshape(-1, dim)}
        for key, shape in (("count", ()), ("sum", (obs_dim,)), ("sumsq", (obs_dim,))):
            extra[f"log/pending_obs_{key}"] = np.array([stats[key] for _, (_, stats) in pending],
                                                       dtype=np.float64).reshape(-1, *shape)
        return extra

    @staticmethod
    def pending_from_extra(extra: dict[str, np.ndarray]) -> dict[int, tuple[np.ndarray, dict]]:
        """What :meth:`to_extra` saved: generation -> (solution, observation statistics)."""
        if "log/pending_generations" not in extra:
            return {}
        obs_keys = ("count", "sum", "sumsq")
        return {int(generation): (np.array(extra["log/pending_solutions"][i]),
                                  {key: np.array(extra[f"log/pending_obs_{key}"][i]) for key in obs_keys})
                for i, generation in enumerate(extra["log/pending_generations"])}

    def awaits(self, generation: int) -> bool:
        """Whether an evaluation of the solution after ``generation`` is still to come."""
        return generation in self._solutions

    def finished(self, wait: bool) -> list[tuple[int, float, np.ndarray, dict]]:
        """(generation, mean return, solution, obs stats) of the evaluations finished since the last
        call; ``wait``: also those still due, their remaining episodes played now (the caller has
        stopped the candidates)."""
        done, self._done = self._done, []
        if self.queue is not None:
            done += self.queue.take_finished()
            if wait:
                done += [(generation, _evaluate(self.pool, *request, played=played))
                         for generation, request, played in self.queue.outstanding()]
        return [(generation, value, *self._solutions.pop(generation)) for generation, value in done]


def _evaluation(run: Run, generation: int, solution: np.ndarray, obs_stats: dict) -> EvaluationRequest:
    """What evaluating ``solution`` (the one after ``generation``) takes: its basis (no noise), the
    normalisation of ``obs_stats`` (an :meth:`ObsStats.state_dict`), one episode seed per episode."""
    mean, std = run.normalisation(ObsStats.from_state_dict(obs_stats))
    return Basis(solution[None], 0.0).to_dict(), mean, std, evaluation_seeds(run.config, generation)


def _evaluate(pool: EvaluationPool, basis: dict, obs_mean: np.ndarray | None, obs_std: np.ndarray | None,
              seeds: list[list[int]], played: list[float] | None = None) -> float:
    """Mean return of the centre of ``basis`` over one episode per seed (one job each) and the
    returns of the episodes ``played`` already."""
    infos = [EVALUATION_INFO] * len(seeds)
    returns = pool.evaluate(basis, obs_mean, obs_std, infos, seeds)["returns"] if seeds else np.zeros(0)
    return float(np.mean([*(played or []), *returns]))


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
