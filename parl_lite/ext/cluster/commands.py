"""The cluster's ``parl-lite`` commands ``start``, ``connect``, ``stop`` and ``status`` (the cluster
this machine started and the local pools), registered in the ``parl_lite.commands`` entry-point group."""
import datetime
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from parl_lite.ext.cluster import local_state, wire
from parl_lite.ext.cluster.limits import LimitError, Limits, check_node_cpus, checked_value
from parl_lite.ext.cluster.node import PRIVATE_PREFIX
from parl_lite.remote.status import StatusError, read_status, survey

__all__ = ["start", "connect", "stop", "status", "cluster_status", "print_cluster_status"]

_READY_TIMEOUT = 60.0
_MODULE_MARK = "parl_lite.ext.cluster."
_PORT = click.IntRange(0, 65535)


def _spawn(role: str, arguments: list[str], token_file: str | None, **recorded: Any) -> dict[str, Any]:
    """Start ``python -m parl_lite.ext.cluster.<role>`` in the background and wait until it is ready;
    ``recorded`` goes into its entry of the state file."""
    home = local_state.cluster_home(create=True)
    ready = home / f"{role}-{os.getpid()}-{time.time_ns()}.ready"
    log_path = home / f"{role}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    command = [sys.executable, "-m", f"{_MODULE_MARK}{role}", *arguments, "--ready-file", str(ready)]
    if token_file:
        command += ["--token-file", token_file]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:  # a start that fails, or is interrupted, leaves no process behind
        deadline = time.monotonic() + _READY_TIMEOUT
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
                raise click.ClickException(f"the {role} did not start (log {log_path}):\n{tail}")
            time.sleep(0.02)
    except BaseException:
        if process.poll() is None:
            process.kill()
        process.wait()
        raise
    info = json.loads(ready.read_text())
    ready.unlink()
    entry = {"pid": process.pid, "role": role, "address": info["address"], "cwd": os.getcwd(),
             "log": str(log_path), "started_at": time.time(), "monitor": info.get("monitor"), **recorded}
    local_state.record_process(entry)
    return entry


def _live_entries() -> list[dict[str, Any]]:
    return [entry for entry in local_state.read_state()["processes"] if _is_ours(entry["pid"])]


def _is_ours(pid: int) -> bool:
    """The pid still runs one of our cluster processes (not a process that reused the pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return _MODULE_MARK.encode() in cmdline.read()
    except OSError:
        return False


class _Seconds(click.ParamType):
    """A limit's value (:mod:`~parl_lite.ext.cluster.limits`) given as an option, checked as its
    variable is."""

    name = "seconds"

    def __init__(self, limit: str) -> None:
        self.limit = limit

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            return float(checked_value(self.limit, value, param.opts[0] if param else self.limit))
        except LimitError as error:
            raise click.UsageError(str(error), ctx) from None


def _grace_option(function):
    return click.option("--reconnect-grace", type=_Seconds("reconnect_grace"), default=None,
                        help="Seconds a node keeps trying to rejoin a master that went away (its actors keep "
                             "serving meanwhile) before it stops them and exits (default: "
                             "$PARL_LITE_RECONNECT_GRACE, else 60; at least 0.1).")(function)


def _check_limits(cpus: int, reconnect_grace: float | None) -> None:
    """Refuse, before anything starts, what would make the node (or the master) fail: the limits'
    variables, and more CPUs than this machine holds actor processes for."""
    try:
        Limits.from_environment(reconnect_grace=reconnect_grace)
        check_node_cpus(cpus)
    except LimitError as error:
        raise click.ClickException(str(error)) from None


def _grace_arguments(reconnect_grace: float | None) -> list[str]:
    return [] if reconnect_grace is None else ["--reconnect-grace", repr(reconnect_grace)]


def _xparl_options(*names: str):
    """xparl's options that parl_lite cannot honour, hidden: given, they stop the command with what to do."""
    options = {
        "--gpu": click.option("--gpu", default="", hidden=True, help="xparl's GPU list: refused unless empty."),
        "--gpu_cluster": click.option("--gpu_cluster", is_flag=True, hidden=True, help="xparl's GPU cluster: refused."),
        "--log_server_port_range": click.option("--log_server_port_range", default=None, hidden=True,
                                                help="xparl's log server ports: refused."),
        "--debug": click.option("--debug", is_flag=True, hidden=True, help="xparl's debug logs: refused."),
    }

    def decorate(function):
        for name in names:
            function = options[name](function)
        return function

    return decorate


def _refuse_xparl_options(gpu: str = "", gpu_cluster: bool = False, log_server_port_range: str | None = None,
                          debug: bool = False) -> None:
    if gpu or gpu_cluster:
        option = "--gpu_cluster" if gpu_cluster else f"--gpu {gpu}"
        raise click.UsageError(f"{option}: parl_lite's cluster places actors on CPUs only; drop it "
                               "(give CPUs with --cpus/--cpu_num)")
    if log_server_port_range is not None:
        raise click.UsageError("--log_server_port_range: parl_lite has no log server; each actor's output "
                               "is printed by the script that created it, and shown in the web monitor; drop it")
    if debug:
        raise click.UsageError(f"--debug: the master and nodes always write their logs to "
                               f"{local_state.cluster_home()}/*.log; drop --debug")


def _token_option(function):
    return click.option("--token-file", type=click.Path(dir_okay=False), default=None,
                        help=f"The cluster token (default: ${local_state.TOKEN_VARIABLE}, else "
                             "~/.parl_lite/token written by `parl-lite start`).")(function)


@click.command()
@click.option("--port", type=_PORT, default=8010, show_default=True, help="TCP port of the master (0: any free one).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on; 0.0.0.0 lets other machines join (they need the token).")
@click.option("--cpus", "--cpu_num", "cpus", type=click.IntRange(min=0), default=None,
              help="CPUs of this machine given to actors (default: all usable; 0: master only).")
@click.option("--monitor-port", "--monitor_port", "monitor_port", type=_PORT, default=None,
              help="Port of the web monitor (default: the master's port + 1; 0: any free one). Off "
                   "127.0.0.1 the page asks for the cluster token.")
@click.option("--no-monitor", is_flag=True, help="Do not serve the web monitor.")
@click.option("--new-token", is_flag=True,
              help="Write a new token instead of reusing this machine's (nodes holding the old one can no "
                   "longer join or rejoin).")
@_grace_option
@_xparl_options("--gpu", "--gpu_cluster", "--log_server_port_range", "--debug")
def start(port: int, host: str, cpus: int | None, monitor_port: int | None, no_monitor: bool, new_token: bool,
          reconnect_grace: float | None, **xparl_options: Any) -> None:
    """Start a cluster master on this machine (and a node with this machine's CPUs).

    The token in ~/.parl_lite/token (mode 0600) is reused, so that the nodes of a master that
    crashed rejoin this one; the first start, or --new-token, writes a new random one. Every other
    machine needs a copy of it (--token-file or PARL_LITE_TOKEN) to join or use the cluster. xparl's
    spellings --cpu_num and --monitor_port work too.

    Everything is checked before anything starts, and a start that fails stops what it started.
    """
    _refuse_xparl_options(**xparl_options)
    cpus = len(os.sched_getaffinity(0)) if cpus is None else cpus
    _check_limits(cpus, reconnect_grace)
    entries = _live_entries()
    if any(entry["role"] == "master" for entry in entries):
        raise click.ClickException("a cluster master started from this machine is running; "
                                   "`parl-lite stop` it first")
    token, reused = _start_token(new_token, [entry for entry in entries if entry["role"] == "node"])
    if monitor_port is None:
        monitor_port = port + 1 if port and port < 65535 else 0
    monitor = [] if no_monitor else ["--monitor-port", str(monitor_port)]
    master = _spawn("master", ["--host", host, "--port", str(port), *monitor], str(token))
    local_state.forget_processes([entry["pid"] for entry in local_state.read_state()["processes"]
                                  if entry["role"] == "master" and not _is_ours(entry["pid"])])  # those it replaces
    try:
        _announce_master(master, host, token)
        _start_own_node(master["address"], cpus, host, reconnect_grace, str(token), reused)
    except BaseException as error:
        _terminate(master["pid"])
        local_state.forget_processes([master["pid"]])
        if isinstance(error, click.ClickException):
            raise click.ClickException(f"{error.message}\nstopped the master this start had started (pid "
                                       f"{master['pid']}): nothing of it is left running") from None
        raise
    if host in ("0.0.0.0", "::"):
        click.echo(f"other machines reach it at {socket.gethostname()}:{master['address'].rsplit(':', 1)[1]} "
                   "(or this machine's IP address)")
    click.echo(f"join:   parl-lite connect --address {master['address']} [--cpus N] [--token-file FILE]")
    click.echo(f"use:    parl_lite.connect(\"{master['address']}\")")


def _start_token(new: bool, nodes: list[dict[str, Any]]) -> tuple[Path, bool]:
    """The token file for the master and whether it was reused: this machine's, or a new one (then
    the nodes that hold the old one are named: they cannot rejoin)."""
    had_one = local_state.token_path().exists()
    try:
        token, reused = local_state.start_token(new)
    except (PermissionError, ValueError) as error:
        raise click.ClickException(f"{error}; or give --new-token to write a new one") from None
    if not reused and had_one:
        orphans = "".join(f"\n  node at {node['address']} (pid {node['pid']}, folder {node['cwd']})" for node in nodes)
        click.echo("a new token: nodes that hold the previous one cannot join or rejoin"
                   + (f"; on this machine:{orphans}" if orphans else "") + "\n(stop them, or copy the new token "
                   "to their machines and `parl-lite connect` them again)")
    return token, reused


def _announce_master(master: dict[str, Any], host: str, token: Path) -> None:
    click.echo(f"parl_lite cluster master at {master['address']} (pid {master['pid']})")
    if master["monitor"]:
        from parl_lite.ext.monitor.server import LOOPBACK_HOSTS  # http.server: only where needed

        asks = "" if host in LOOPBACK_HOSTS else " (asks for the cluster token)"
        click.echo(f"web monitor: {master['monitor']}{asks}")
    click.echo(f"token: {token} (mode 0600; copy it to machines that join)")


def _start_own_node(address: str, cpus: int, host: str, reconnect_grace: float | None, token: str,
                    same_token: bool) -> None:
    """Give this machine's CPUs to the master at ``address``, unless a node of this machine that
    joined a master there before rejoins it (with its actors; it holds the ``same_token``): a second
    node would count the same CPUs twice."""
    if cpus == 0:
        return
    rejoining = [entry for entry in _live_entries()
                 if same_token and entry["role"] == "node" and entry.get("master") == address]
    for node in rejoining:
        click.echo(f"node at {node['address']} (pid {node['pid']}, working folder {node['cwd']}) was serving "
                   f"the master that was here before: it rejoins this one with its actors")
    if rejoining:
        click.echo("no other node started for this machine's CPUs (`parl-lite connect` adds one)")
        return
    node = _spawn("node", ["--address", address, "--cpus", str(cpus), "--host", host,
                           *_grace_arguments(reconnect_grace)], token, master=address)
    click.echo(f"node with {cpus} CPU(s) at {node['address']} (pid {node['pid']}), working folder {node['cwd']}")


@click.command()
@click.option("--address", required=True, help="The master's host:port.")
@click.option("--cpus", "--cpu_num", "cpus", type=int, default=None, help="CPUs given to actors (default: all usable).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface clients reach this node on.")
@click.option("--port", type=_PORT, default=0, show_default=True, help="TCP port for clients (0: any free one).")
@_token_option
@_grace_option
@_xparl_options("--gpu", "--log_server_port_range")
def connect(address: str, cpus: int | None, host: str, port: int, token_file: str | None,
            reconnect_grace: float | None, **xparl_options: Any) -> None:
    """Add this machine's CPUs to a cluster; the current folder is the node's working folder
    (xparl's --cpu_num works too). A node keeps a process per CPU: --cpus is bounded by the
    memory this machine has available (32 MB a process at the least)."""
    _refuse_xparl_options(**xparl_options)
    try:
        wire.split_address(address)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--address") from exc
    cpus = len(os.sched_getaffinity(0)) if cpus is None else cpus
    if cpus < 1:
        raise click.BadParameter(f"a node needs at least one CPU, got {cpus}", param_hint="--cpus")
    _check_limits(cpus, reconnect_grace)
    node = _spawn("node", ["--address", address, "--cpus", str(cpus), "--host", host, "--port", str(port),
                           *_grace_arguments(reconnect_grace)], token_file, master=address)
    click.echo(f"node with {cpus} CPU(s) at {node['address']} (pid {node['pid']}) joined {address}")


@click.command()
def stop() -> None:
    """Stop the cluster processes this machine's `start` and `connect` started (their pids only)."""
    entries = local_state.read_state()["processes"]
    ordered = [e for e in entries if e["role"] == "node"] + [e for e in entries if e["role"] != "node"]
    stopped = 0
    for entry in ordered:
        if not _is_ours(entry["pid"]):
            continue
        _terminate(entry["pid"])
        click.echo(f"stopped the {entry['role']} at {entry['address']} (pid {entry['pid']})")
        stopped += 1
    for entry in entries:  # a node that was SIGKILLed could not remove its private folder
        if entry["role"] == "node" and not _is_ours(entry["pid"]):
            for folder in Path(entry["cwd"]).glob(f"{PRIVATE_PREFIX}{entry['pid']}_*"):
                shutil.rmtree(folder, ignore_errors=True)
    local_state.forget_processes([entry["pid"] for entry in entries])
    if not stopped:
        click.echo("no cluster process started from this machine is running")


def _terminate(pid: int) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 15 s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not _wait_for_exit(pid, 15.0):
        os.kill(pid, signal.SIGKILL)
        _wait_for_exit(pid, 5.0)


def _wait_for_exit(pid: int, timeout: float) -> bool:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([pidfd], [], [], timeout)[0])
    finally:
        os.close(pidfd)


@click.command()
@click.option("--pid", type=int, default=None, help="Show only the pool of this process.")
@click.option("--json", "as_json", is_flag=True,
              help='Print the raw status as one JSON document: {"cluster": ..., "pools": [...]}.')
@click.option("--address", default=None,
              help="Also show the cluster at this host:port (default: the one this machine started).")
@_token_option
def status(pid: int | None, as_json: bool, address: str | None, token_file: str | None) -> None:
    """Show the cluster this machine started (nodes, CPUs, memory, actors, clients) and the local
    pools running on this machine: workers, actors, memory, calls served.

    Only this user's pools are shown; entries in /dev/shm that are not (another user's, not a pool
    status, unreadable) are skipped with a note on stderr, and those of dead pools are removed."""
    cluster = None
    if pid is None:
        try:
            cluster = cluster_status(address, token_file)
        except (wire.ClusterError, OSError) as error:
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
        _print_pool_status(pool)


def _print_pool_status(pool: dict[str, Any]) -> None:
    started = datetime.datetime.fromtimestamp(pool["started_at"]).strftime("%Y-%m-%d %H:%M:%S")
    click.echo(f"pool of process {pool['pid']} (started {started}, {len(pool['workers'])} workers)")
    click.echo(f"  {'pid':>7}  {'actor':<24} {'own MB':>8} {'shared MB':>9} {'limit MB':>9} {'calls':>9}")
    for worker in pool["workers"]:
        limit = "-" if worker["max_memory_mb"] is None else f"{worker['max_memory_mb']:g}"
        actor = worker["actor"] or "(idle)"
        actor = actor if len(actor) <= 24 else actor[:23] + "…"
        click.echo(f"  {worker['pid']:>7}  {actor:<24} {worker['rss_mb']:>8.1f} "
                   f"{worker.get('shared_mb', 0.0):>9.1f} {limit:>9} {worker['calls_served']:>9}")


def cluster_status(address: str | None, token_file: str | None) -> dict[str, Any] | None:
    """The status of the cluster at ``address`` (default: the master this machine started), or None
    if there is none to ask."""
    if address is None:
        masters = [entry for entry in _live_entries() if entry["role"] == "master"]
        if not masters:
            return None
        address = masters[0]["address"]
    framed, _ = wire.open_connection(address, local_state.load_token(token_file), "observer")
    try:
        framed.send_json({"type": "status"})
        return framed.receive_json()["status"]
    finally:
        framed.close()


def print_cluster_status(status: dict[str, Any]) -> None:
    """Print a cluster status as tables of nodes, clients and actors."""
    alive = [node for node in status["nodes"] if node["alive"]]
    click.echo(f"cluster at {status['address']}: {len(alive)} node(s) alive, "
               f"{sum(n['cpus_used'] for n in alive)}/{sum(n['cpus_total'] for n in alive)} CPUs used, "
               f"{len(status['clients'])} client(s)")
    click.echo(f"  {'node':<9} {'address':<22} {'CPUs':>7} {'mem MB':>15} {'load':>6}  state")
    for node in status["nodes"]:
        load = f"{node['load'][-1][1]:.2f}" if node["load"] else "-"
        state = "dead" if not node["alive"] else "suspect" if node.get("suspect") else "alive"
        click.echo(f"  {node['id']:<9} {node['address']:<22} {node['cpus_used']:>3}/{node['cpus_total']:<3} "
                   f"{node['mem_used_mb']:>7.0f}/{node['mem_total_mb']:<7.0f} {load:>6}  {state}")
    for client in status["clients"]:
        per_node = ", ".join(f"{count} on {node}" for node, count in sorted(client.get("nodes", {}).items()))
        click.echo(f"  client {client['id']} pid {client['pid']} on {client['host']}: {client['script']} "
                   f"({client['actors']} actor(s){': ' + per_node if per_node else ''})")
    if status["actors"]:
        click.echo(f"  {'actor':<13} {'class':<20} {'node':<9} {'pid':>7} {'state':<8} {'calls':>7} {'rss MB':>7}")
    for actor in status["actors"]:
        click.echo(f"  {actor['id']:<13} {actor['class']:<20} {actor['node']:<9} {actor['pid']:>7} "
                   f"{actor['state']:<8} {actor['calls_served']:>7} {actor['rss_mb']:>7.1f}")
