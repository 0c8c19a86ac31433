"""Online sampling / offline update with evokit_py: each step runs in its own process.

    python scripts/es_online_offline.py --config scripts/es_cartpole.yaml --cycles 5 --workdir runs/es_offline

Every cycle starts ``... sample`` (loads the solver checkpoint, evaluates one generation, appends
its sampling infos and rewards to a log file) and then ``... update`` (reads that log line, updates
the solver, writes the checkpoint and an ONNX policy): nothing but the log file and the checkpoint
passes between them.
"""
import subprocess
import sys
from pathlib import Path

import click

from evokit_py.config import resolve_config
from evokit_py.offline import sample_generation, update_from_log


@click.group(invoke_without_command=True)
@click.option("--config", "config_path", default=None, help="ES config (YAML); default: the built-in CartPole job.")
@click.option("--cycles", default=5, show_default=True, help="Sample/update cycles to run.")
@click.option("--workdir", default="runs/es_offline", show_default=True, help="Checkpoint, log and ONNX folder.")
@click.pass_context
def main(ctx, config_path, cycles, workdir) -> None:
    """Run CYCLES sample/update cycles, each step in a new process."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = (config_path, Path(workdir))
        return
    base = [sys.executable, __file__, "--workdir", workdir] + (["--config", config_path] if config_path else [])
    for _ in range(cycles):
        subprocess.run(base + ["sample"], check=True)
        subprocess.run(base + ["update"], check=True)


@main.command()
@click.pass_obj
def sample(obj) -> None:
    """Evaluate the checkpoint's generation; append infos and rewards to the sampling log."""
    config_path, workdir = obj
    generation = sample_generation(resolve_config(config_path), workdir / "solver.h5", workdir / "samples.jsonl")
    click.echo(f"sampled generation {generation} -> {workdir / 'samples.jsonl'}")


@main.command()
@click.pass_obj
def update(obj) -> None:
    """Update the solver from the sampling log; write the checkpoint and policy.onnx."""
    config_path, workdir = obj
    generation = update_from_log(resolve_config(config_path), workdir / "solver.h5", workdir / "samples.jsonl",
                                 workdir / "policy.onnx")
    click.echo(f"updated to generation {generation} -> {workdir / 'solver.h5'}")


if __name__ == "__main__":
    main()
