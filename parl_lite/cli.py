"""The ``parl-lite`` command line: one click group; each feature adds its commands here.

A Ctrl-C while a command starts (its imports take a few tenths of a second) ends it with status
130 and one line, not a traceback from whatever module was being imported.
"""
import contextlib
import datetime
import json
import os
import signal
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def _ctrl_c_exits(what: str) -> Iterator[None]:
    """While the block runs, a Ctrl-C ends the process at once: status 130 and one line saying it
    was interrupted ``what``. For imports, which make nothing that needs cleaning up, and in which a
    KeyboardInterrupt can come out as another error (a C extension's "ImportError: initialization
    failed"). Outside the main thread the block runs as it is."""
    def exit_now(signum: int, frame: Any) -> None:
        os.write(2, f"parl-lite: interrupted {what}\n".encode())
        os._exit(130)

    try:
        previous = signal.signal(signal.SIGINT, exit_now)
    except ValueError:  # not the main thread: signals are not ours to handle
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


with _ctrl_c_exits("while starting"):
    import click

    from parl_lite.ext.cluster import commands as cluster_commands
    from parl_lite.io.onnx_cli import export_command
    from parl_lite.version import __version__

MONITOR_PORT = 8020  # `parl-lite monitor`'s default port


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="parl-lite")
def main() -> None:
    """parl_lite: PARL-style reinforcement learning, parallel actors and evolution strategies."""


@main.command()
@click.option("--pid", type=int, default=None, help="Show only the pool of this process.")
@click.option("--json", "as_json", is_flag=True,
              help='Print the raw status as one JSON document: {"cluster": ..., "pools": [...]}.')
@click.option("--address", default=None,
              help="Also show the cluster at this host:port (default: the one this machine started).")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None, help="The cluster token.")
def status(pid: "int | None", as_json: bool, address: "str | None", token_file: "str | None") -> None:
    """Show the cluster this machine started (nodes, CPUs, memory, actors, clients) and the local
    pools running on this machine: workers, actors, memory, calls served.

    Only this user's pools are shown; entries in /dev/shm that are not (another user's, not a pool
    status, unreadable) are skipped with a note on stderr, and those of dead pools are removed."""
    from parl_lite.ext.cluster.commands import cluster_status, print_cluster_status
    from parl_lite.ext.cluster.wire import ClusterError
    from parl_lite.remote.status import StatusError, read_status, survey

    cluster = None
    if pid is None:
        try:
            cluster = cluster_status(address, token_file)
        except (ClusterError, OSError) as error:
            raise click.ClickException(str(error)) from error
        pools, problems = survey()
    else:
        problems = []
        try:
            pools = [read_status(pid)]
        except FileNotFoundError:
            raise click.ClickException(f"no parl_lite pool runs in process {pid}") from None
        except StatusError as error:
            raise click.ClickException(str(error)) from None
    for problem in problems:
        click.echo(f"note: {problem}", err=True)
    if as_json:  # one document: the cluster (or null) and the local pools
        click.echo(json.dumps({"cluster": cluster, "pools": pools}, indent=2))
        return
    if cluster is not None:
        print_cluster_status(cluster)
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


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to serve on. Anywhere but 127.0.0.1 the page asks for a token.")
@click.option("--port", type=int, default=MONITOR_PORT, show_default=True, help="Port to serve on (0: any free port).")
@click.option("--token", envvar="PARL_LITE_MONITOR_TOKEN", default=None,
              help="Token asked for when not on 127.0.0.1 (default: a random one, printed). "
                   "Also read from $PARL_LITE_MONITOR_TOKEN.")
@click.option("--pid", "pids", type=int, multiple=True,
              help="Show only the pool of this process (repeatable; default: every pool of this user).")
def monitor(host: str, port: int, token: "str | None", pids: "tuple[int, ...]") -> None:
    """Serve the web monitor of the local pools of this machine: the machine's CPUs, memory and load,
    each process that runs a pool, each actor (state, calls served, memory, last error) and its
    recent output. Read-only; Ctrl-C stops it."""
    import secrets

    from parl_lite.ext.monitor.local import LocalPools
    from parl_lite.ext.monitor.server import LOOPBACK_HOSTS, MonitorServer

    if host not in LOOPBACK_HOSTS and not token:
        token = secrets.token_urlsafe(24)
        click.echo(f"monitor token (enter it in the page, or send 'Authorization: Bearer <token>'): {token}")
    try:
        server = MonitorServer(LocalPools(pids), host=host, port=port, token=token)
    except OSError as error:
        raise click.ClickException(f"cannot serve the monitor on {host}:{port}: {error}") from error
    click.echo(f"parl_lite monitor of the local pools: {server.url} (Ctrl-C stops it)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@main.command("es-train")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="ES config (YAML). Without it: the built-in job, a linear policy on CartPole-v1.")
@click.option("--resume", is_flag=True, help="Continue from train.checkpoint_dir/solver.h5 if it exists.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value, e.g. --set train.workers=1 --set solver.optimizer.base_lr=0.05.")
@click.option("--in-process", is_flag=True, help="Evaluate in this process instead of the worker pool (debugging).")
@click.option("--address", default=None,
              help="Evaluate on this backend (a parl_lite.connect address: host:port, ray://local); "
                   "same as --set train.address=...")
def es_train(config_path, resume, overrides, in_process, address) -> None:
    """Train a policy with evolution strategies (evokit_py): candidates are evaluated in parallel on
    the local pool, progress is printed per generation, a checkpoint is written every
    train.checkpoint_every generations and on Ctrl-C, and the best policy is exported to ONNX."""
    with _ctrl_c_exits("while starting"):
        from evokit_py.config import ConfigError, resolve_config
        from evokit_py.train import train
    try:
        if address is not None:
            overrides = (*overrides, f"train.address={json.dumps(address)}")
        config = resolve_config(config_path, overrides)
        result = train(config, resume=resume, backend="inprocess" if in_process else "remote", echo=click.echo)
    except (ConfigError, ValueError, ImportError, ConnectionError) as error:  # ImportError: a backend plugin
        raise click.ClickException(str(error)) from error
    except OSError as error:  # a file the run writes (the policy, the log) could not be written
        raise click.ClickException(str(error)) from error
    except KeyboardInterrupt:  # a Ctrl-C before training started, or the second one: stopped at once
        click.echo("es-train: interrupted at once (the last checkpoint written, if any, is kept)", err=True)
        raise SystemExit(130) from None
    if result.summary is not None:
        click.echo(result.summary.to_json())
    if result.checkpoint_error is not None:
        raise click.ClickException(f"{result.checkpoint_error} (the trained policy was exported to "
                                   f"{result.onnx_path})" if result.onnx_path else result.checkpoint_error)
    if result.interrupted:  # 130 after a Ctrl-C, 143 after a SIGTERM
        raise SystemExit(128 + (result.stop_signal or 2))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def plugins(as_json: bool) -> None:
    """List the installed plugins (entry-point groups parl_lite.backends and evokit_py.solvers):
    group, name, module, distribution and version, and whether each one loads."""
    from parl_lite.ext.plugins import PluginError, installed

    rows: list[dict[str, Any]] = []
    for plugin in installed():
        try:
            plugin.load()
            problem = None
        except PluginError as error:
            problem = str(error.__cause__ or error)
        rows.append({"group": plugin.group, "name": plugin.name, "module": plugin.value,
                     "distribution": plugin.distribution, "version": plugin.version,
                     "loads": problem is None, "error": problem})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no plugin is installed")
        return
    click.echo(f"{'group':<20} {'name':<12} {'module':<40} {'distribution':<24} loads")
    for row in rows:
        origin = f"{row['distribution']} {row['version']}" if row["distribution"] else "?"
        click.echo(f"{row['group']:<20} {row['name']:<12} {row['module']:<40} {origin:<24} "
                   f"{'yes' if row['loads'] else 'NO: ' + row['error']}")


main.add_command(export_command)
main.add_command(cluster_commands.start)
main.add_command(cluster_commands.connect)
main.add_command(cluster_commands.stop)

if __name__ == "__main__":
    main()
