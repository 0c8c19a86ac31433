"""Online sampling / offline update with evokit_py: each step runs in its own process.

    python scripts/examples/es_online_offline.py --config scripts/examples/es_cartpole.yaml --cycles 5 --workdir runs/es_offline
    python scripts/examples/es_online_offline.py --samplers 3 --shards 4 --cycles 10 --workdir runs/es_offline_async

With one sampler, every cycle starts ``... sample`` (loads the solver checkpoint, evaluates one
generation, appends its sampling infos and rewards to a log file) and then ``... update`` (applies
the new log lines, writes the checkpoint and an ONNX policy): nothing but the log file and the
checkpoint passes between them, and the cycles reproduce ``es-train``'s generations exactly.

With ``--samplers K``, K sampler processes run at once, each evaluating one of ``--shards`` shards
of the generation in the checkpoint it loaded (then further candidates around the same parameters); as soon as a population's worth of samples is in the
log, an update runs while the other samplers go on, so the next update mixes samples drawn around
the old and the new version (BASIC_ES corrects those up to ``solver.max_staleness`` versions old).
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import click

from evokit_py.config import resolve_config
from evokit_py.offline import sample_generation, update_from_log


@click.group(invoke_without_command=True)
@click.option("--config", "config_path", default=None, help="ES config (YAML); default: the built-in CartPole job.")
@click.option("--cycles", default=5, show_default=True, help="Updates to run.")
@click.option("--workdir", default="runs/es_offline", show_default=True, help="Checkpoint, log and ONNX folder.")
@click.option("--samplers", default=1, show_default=True, help="Sampler processes running at the same time.")
@click.option("--shards", default=1, show_default=True, help="Shards a generation is split into (one per sampler run).")
@click.pass_context
def main(ctx, config_path, cycles, workdir, samplers, shards) -> None:
    """Run CYCLES updates, each step in a new process."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = (config_path, Path(workdir))
        return
    base = [sys.executable, __file__, "--workdir", workdir] + (["--config", config_path] if config_path else [])
    if samplers == 1 and shards == 1:
        for _ in range(cycles):
            subprocess.run(base + ["sample"], check=True)
            subprocess.run(base + ["update"], check=True)
        return
    _pipeline(base, resolve_config(config_path), cycles, samplers, shards)


def _pipeline(base: list, config, cycles: int, samplers: int, shards: int) -> None:
    """Keep ``samplers`` sampler processes busy; update whenever a population's worth arrived."""
    population = config.solver.population_size
    version, next_shard, unapplied, updates = 0, 0, 0, 0
    running = {}  # process -> number of candidates it evaluates
    shard_size = -(-population // shards)
    started = time.perf_counter()
    while updates < cycles:
        while len(running) < samplers:  # past the version's shards: further candidates (offline.sample_generation)
            process = subprocess.Popen(base + ["sample", "--shard", str(next_shard), "--shards", str(shards)])
            running[process] = shard_size
            next_shard += 1
        pid, status = os.wait()  # blocks until a sampler (our only running child) ends
        process = next(p for p in running if p.pid == pid)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise SystemExit(f"sampler exited with {process.returncode}")
        unapplied += running.pop(process)
        if unapplied >= population:
            subprocess.run(base + ["update", "--stale", "drop"], check=True)
            version, next_shard, unapplied, updates = version + 1, 0, 0, updates + 1
            elapsed = time.perf_counter() - started
            click.echo(f"update {updates}/{cycles}: version {version}, {elapsed:.1f}s, "
                       f"ETA {elapsed / updates * (cycles - updates):.1f}s")
    for process in running:
        process.wait()


@main.command()
@click.option("--shard", default=0, show_default=True, help="Which shard of the generation to evaluate.")
@click.option("--shards", default=1, show_default=True, help="Shards the generation is split into.")
@click.pass_obj
def sample(obj, shard, shards) -> None:
    """Evaluate (a shard of) the checkpoint's generation; append infos and rewards to the sampling log."""
    config_path, workdir = obj
    generation = sample_generation(resolve_config(config_path), workdir / "solver.h5", workdir / "samples.jsonl",
                                   shard, shards)
    click.echo(f"sampled generation {generation}" + (f" shard {shard}/{shards}" if shards > 1 else "")
               + f" -> {workdir / 'samples.jsonl'}")


@main.command()
@click.option("--stale", type=click.Choice(["refuse", "drop"]), default="refuse", show_default=True,
              help="What to do with samples older than solver.max_staleness versions.")
@click.pass_obj
def update(obj, stale) -> None:
    """Update the solver from the new lines of the sampling log; write the checkpoint and policy.onnx."""
    config_path, workdir = obj
    generation = update_from_log(resolve_config(config_path), workdir / "solver.h5", workdir / "samples.jsonl",
                                 workdir / "policy.onnx", stale)
    click.echo(f"updated to generation {generation} -> {workdir / 'solver.h5'}")


if __name__ == "__main__":
    main()
