"""The ``parl-lite`` command line: one click group. Its own commands are here (``es-train``,
``export``, ``plugins``); plugins add theirs through the ``parl_lite.commands`` entry-point group
(the cluster's ``start``, ``connect``, ``stop`` and ``status``, the monitor's ``monitor``, and any
installed distribution's), each imported only when it runs or ``--help`` lists it.

A Ctrl-C while a command starts (its imports take a few tenths of a second) ends it with status
130 and one line, not a traceback from whatever module was being imported.
"""
import contextlib
import functools
import json
import os
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parl_lite.plugins import Plugin


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

    from parl_lite.io.onnx_cli import export_command
    from parl_lite.version import __version__


class _PluginCommands(click.Group):
    """A click group that also holds the commands installed in the ``parl_lite.commands``
    entry-point group: a plugin's name -> its ``click.Command``. The group's own commands win a name
    both use. A plugin that does not load, or whose object is not a click command, is listed and
    runs as a command that only says so (naming it), instead of a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._installed})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        if own is not None or cmd_name not in self._installed:
            return own
        from parl_lite.plugins import PluginError

        plugin = self._installed[cmd_name]
        try:
            with _ctrl_c_exits("while starting"):
                command = plugin.load()
        except PluginError as error:
            return _broken_command(cmd_name, str(error))
        if not isinstance(command, click.Command):
            return _broken_command(cmd_name, f"{plugin.description} is {command!r}, not a click command")
        return command

    @functools.cached_property
    def _installed(self) -> "dict[str, Plugin]":
        """The command plugins by name, read once (each reading walks every installed distribution)."""
        from parl_lite import plugins

        return {plugin.name: plugin for plugin in plugins.installed(plugins.COMMANDS)}


def _broken_command(name: str, problem: str) -> click.Command:
    """A command that stands for a plugin that cannot run: listed, and ends with ``problem``."""
    def refuse(args: tuple[str, ...]) -> None:
        raise click.ClickException(problem)

    return click.Command(name, callback=refuse, params=[click.Argument(["args"], nargs=-1)],
                         short_help="(broken plugin: run it to see why)", help=problem, add_help_option=False,
                         context_settings={"ignore_unknown_options": True})


@click.group(cls=_PluginCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="parl-lite")
def main() -> None:
    """parl_lite: PARL-style reinforcement learning, parallel actors and evolution strategies."""


@main.command("es-train")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="ES config (YAML). Without it: the built-in job, a linear policy on CartPole-v1.")
@click.option("--resume", is_flag=True,
              help="Continue the latest run (from its train.checkpoint_dir/solver.h5, if any). Without it, a run "
                   "whose folders hold an earlier run writes to the next numbered ones (runs/es_cartpole_1, ...).")
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
        from evokit_py.train import StoppedAtOnce, train
    echo = _StdoutEcho("es-train")
    try:
        if address is not None:
            overrides = (*overrides, f"train.address={json.dumps(address)}")
        config = resolve_config(config_path, overrides)
        result = train(config, resume=resume, backend="inprocess" if in_process else "remote", echo=echo)
    except (ConfigError, ValueError, ImportError, ConnectionError) as error:  # ImportError: a backend plugin
        raise click.ClickException(str(error)) from error
    except OSError as error:  # a file the run writes (the policy, the log) could not be written
        raise click.ClickException(str(error)) from error
    except KeyboardInterrupt as interrupt:  # a Ctrl-C before training started, or the second one: stopped at once
        click.echo("es-train: interrupted at once (the last checkpoint written, if any, is kept)", err=True)
        raise SystemExit(128 + (interrupt.signal if isinstance(interrupt, StoppedAtOnce) else signal.SIGINT)) from None
    if result.summary is not None:
        echo(result.summary.to_json())
    problems = result.problems + ([echo.failure] if echo.failure else [])
    if problems:
        where = f"; the policy is in {result.onnx_path}" if result.onnx_path and not result.export_error else ""
        raise click.ClickException("; ".join(problems) + where)
    if result.interrupted:  # 130 after a Ctrl-C, 143 after a SIGTERM
        raise SystemExit(128 + (result.stop_signal or 2))


class _StdoutEcho:
    """``click.echo`` to stdout that outlives stdout: the first write that fails (a full disk, a
    reader gone) is said once on stderr and kept in :attr:`failure`, and stdout then goes to
    ``/dev/null``, so that what follows (and Python's flush at exit) does not fail again."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.failure: str | None = None

    def __call__(self, text: str) -> None:
        if self.failure is not None:
            return
        try:
            click.echo(text)
        except OSError as error:
            self.failure = f"standard output could not be written ({error.strerror or error}): its lines are lost"
            with contextlib.suppress(OSError):
                os.write(2, f"{self.command}: {self.failure}; going on\n".encode())
            with contextlib.suppress(OSError, ValueError, AttributeError):  # a stdout with no descriptor keeps failing
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def plugins(as_json: bool) -> None:
    """List the installed plugins (entry-point groups parl_lite.backends, parl_lite.commands and
    evokit_py.solvers): group, name, module, distribution and version, and whether each one loads."""
    from parl_lite.plugins import PluginError, installed

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

if __name__ == "__main__":
    main()
