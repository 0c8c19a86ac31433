"""Online sampling, offline update: sampler processes evaluate and log, another updates the solver.

A sampler loads the solver checkpoint (if any), evaluates candidates of its version (all of them, or
one shard) and appends one JSON line to the sampling log: ``{"generation", "infos", "rewards",
"obs_sum", "obs_sumsq", "obs_count"}`` (infos as ``[seed, offset, sign, parent, version]``, never
the noise). The updater tells the solver *every* line it has not applied yet, whatever versions they
were sampled at (samplers that loaded an older checkpoint: BASIC_ES corrects samples up to
``solver.max_staleness`` versions old; older ones are refused or dropped, as asked), folds in the
observation statistics and writes the checkpoint (with the number of log lines applied) and an ONNX
policy atomically. Both use the same episode seeds as ``es-train``, so sample/update cycles with one
sampler reproduce the trainer's generations exactly.
"""
import json
import os
from pathlib import Path
from typing import Literal

import numpy as np

from evokit_py.config import ESConfig
from evokit_py.noise import SamplingInfo
from evokit_py.sampler import Sampler, aggregate
from evokit_py.seeds import candidate_seeds
from evokit_py.training.saving import export_policy, restore_checkpoint, save_checkpoint
from evokit_py.training.setup import Run, setup_run

__all__ = ["sample_generation", "update_from_log", "LINES_APPLIED"]

LINES_APPLIED = "log_lines_applied"  # checkpoint extra: how many lines of the sampling log are in the solver


def _run(config: ESConfig, checkpoint: Path) -> "tuple[Run, dict]":
    """A run at the checkpoint (or at the start) and the checkpoint's extra datasets."""
    run = setup_run(config)
    try:
        return run, (restore_checkpoint(run, checkpoint) if checkpoint.is_file() else {})
    except BaseException:
        run.close()
        raise


def sample_generation(config: ESConfig, checkpoint: "str | os.PathLike", log_path: "str | os.PathLike",
                      shard: int = 0, shards: int = 1) -> int:
    """Evaluate the checkpoint's current generation, or one shard of it, and append the infos and
    rewards to ``log_path``.

    Args:
        shard, shards: the generation is split into ``shards`` shards (every ``shards``-th mirrored
            pair or candidate); ``shard`` ``s`` is shard ``s % shards`` of the candidates of
            ``solver.ask(s // shards)``: samplers that outrun the updater get further candidates
            around the same parameters.

    Returns:
        The generation (version) sampled.
    """
    if shard < 0 or shards < 1:
        raise ValueError(f"need shard >= 0 and shards >= 1, got shard {shard} of {shards}")
    checkpoint, log_path = Path(checkpoint), Path(log_path)
    run, _ = _run(config, checkpoint)
    with run:
        solver = run.solver
        generation = solver.generation
        extra_round = shard // shards
        asked = solver.ask(extra_round)
        indices = [i for i in range(len(asked)) if (i // solver.group_size) % shards == shard % shards]
        infos = [asked[i] for i in indices]
        mean, std = run.normalisation()
        all_seeds = candidate_seeds(config, generation, len(asked) * (extra_round + 1))[len(asked) * extra_round:]
        seeds = [all_seeds[i] for i in indices]
        sampler = Sampler(config.worker_config(), run.policy.to_bytes(), run.noise_spec())
        try:
            result = aggregate(sampler.evaluate(solver.basis().to_dict(), mean, std, [i.to_list() for i in infos],
                                                seeds))
        finally:
            sampler.release()
    record = {"generation": generation, "infos": [i.to_list() for i in infos],
              "rewards": run.fitness(result).tolist(), "obs_sum": result["obs_sum"].tolist(),
              "obs_sumsq": result["obs_sumsq"].tolist(), "obs_count": int(result["obs_count"])}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:  # one write of the whole line: samplers running at the same time never interleave lines
        os.write(descriptor, (json.dumps(record) + "\n").encode())
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return generation


def update_from_log(config: ESConfig, checkpoint: "str | os.PathLike", log_path: "str | os.PathLike",
                    onnx_path: "str | os.PathLike | None" = None, stale: Literal["refuse", "drop"] = "refuse") -> int:
    """Apply every line of the sampling log not applied yet, in one update; save the checkpoint.

    Args:
        stale: ``"refuse"`` or ``"drop"`` samples older than the solver keeps (see ``Solver.tell``).

    Returns:
        The solver's generation after the update.

    Raises:
        ValueError: the log has no new line.
        StaleSampleError: a sample is too old and ``stale`` is ``"refuse"``.
    """
    checkpoint, log_path = Path(checkpoint), Path(log_path)
    run, extra = _run(config, checkpoint)
    with run:
        applied = int(extra.get(LINES_APPLIED, 0))
        lines = [line for line in Path(log_path).read_text().splitlines() if line.strip()]
        records = [json.loads(line) for line in lines[applied:]]
        if not records:
            raise ValueError(f"sampling log {log_path} has no line after the {applied} already applied")
        infos = [SamplingInfo.from_list(i) for record in records for i in record["infos"]]
        run.solver.tell(infos, [reward for record in records for reward in record["rewards"]], stale)
        if config.observation_normalization:
            for record in records:
                run.obs_stats.add(np.asarray(record["obs_sum"]), np.asarray(record["obs_sumsq"]), record["obs_count"])
        save_checkpoint(run, checkpoint, extra={LINES_APPLIED: np.asarray(len(lines))})
        if onnx_path is not None:
            export_policy(run, onnx_path)
        return run.solver.generation
