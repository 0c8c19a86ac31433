"""The ``parl-lite`` command line: one click group; each feature adds its commands here."""
import datetime
import json

import click

from parl_lite.io.onnx_cli import export_command
from parl_lite.version import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="parl-lite")
def main() -> None:
    """parl_lite: PARL-style reinforcement learning, parallel actors and evolution strategies."""


@main.command()
@click.option("--pid", type=int, default=None, help="Show only the pool of this process.")
@click.option("--json", "as_json", is_flag=True, help="Print the raw status as JSON.")
def status(pid: "int | None", as_json: bool) -> None:
    """Show the local pools running on this machine: workers, actors, memory, calls served.

    Only this user's pools are shown; entries in /dev/shm that are not (another user's, not a pool
    status, unreadable) are skipped with a note on stderr, and those of dead pools are removed."""
    from parl_lite.remote.status import StatusError, read_status, survey

    if pid is None:
        pools, problems = survey()
    else:
        problems = []
        try:
            pools = [read_status(pid)]
        except FileNotFoundError:
            raise click.ClickException(f"no parl_lite pool runs in process {pid}")
        except StatusError as error:
            raise click.ClickException(str(error))
    for problem in problems:
        click.echo(f"note: {problem}", err=True)
    if as_json:
        click.echo(json.dumps(pools, indent=2))
        return
    if not pools:
        click.echo("no parl_lite pool is running")
        return
    for pool in pools:
        started = datetime.datetime.fromtimestamp(pool["started_at"]).strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"pool of process {pool['pid']} (started {started}, {len(pool['workers'])} workers)")
        click.echo(f"  {'pid':>7}  {'actor':<24} {'own MB':>8} {'shared MB':>9} {'limit MB':>9} {'calls':>9}")
        for worker in pool["workers"]:
            limit = "-" if worker["max_memory_mb"] is None else f"{worker['max_memory_mb']:g}"
            actor = worker["actor"] or "(idle)"
            actor = actor if len(actor) <= 24 else actor[:23] + "…"
            click.echo(f"  {worker['pid']:>7}  {actor:<24} {worker['rss_mb']:>8.1f} "
                       f"{worker.get('shared_mb', 0.0):>9.1f} {limit:>9} {worker['calls_served']:>9}")


@main.command("es-train")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="ES config (YAML). Without it: the built-in job, a linear policy on CartPole-v1.")
@click.option("--resume", is_flag=True, help="Continue from train.checkpoint_dir/solver.h5 if it exists.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value, e.g. --set train.workers=1 --set solver.optimizer.base_lr=0.05.")
@click.option("--in-process", is_flag=True, help="Evaluate in this process instead of the worker pool (debugging).")
def es_train(config_path, resume, overrides, in_process) -> None:
    """Train a policy with evolution strategies (evokit_py): candidates are evaluated in parallel on
    the local pool, progress is printed per generation, a checkpoint is written every
    train.checkpoint_every generations and on Ctrl-C, and the best policy is exported to ONNX."""
    from evokit_py.config import ConfigError, resolve_config
    from evokit_py.train import train

    try:
        config = resolve_config(config_path, overrides)
        result = train(config, resume=resume, backend="inprocess" if in_process else "remote", echo=click.echo)
    except (ConfigError, ValueError) as error:
        raise click.ClickException(str(error)) from error
    if result.interrupted:
        raise SystemExit(130)


main.add_command(export_command)

if __name__ == "__main__":
    main()
