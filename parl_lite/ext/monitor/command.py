"""``parl-lite monitor``: the web monitor of this machine's local pools, registered in the
``parl_lite.commands`` entry-point group. (A cluster's master serves its own monitor: ``parl-lite
start --monitor-port``.)"""
import secrets

import click

from parl_lite.ext.monitor.local import LocalPools
from parl_lite.ext.monitor.server import LOOPBACK_HOSTS, MonitorServer

__all__ = ["monitor", "MONITOR_PORT"]

MONITOR_PORT = 8020  # the default port of the local pools' monitor (a cluster's: the master's port + 1)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to serve on. Anywhere but 127.0.0.1 the page asks for a token.")
@click.option("--port", type=int, default=MONITOR_PORT, show_default=True, help="Port to serve on (0: any free port).")
@click.option("--token", envvar="PARL_LITE_MONITOR_TOKEN", default=None,
              help="Token asked for when not on 127.0.0.1 (default: a random one, printed). "
                   "Also read from $PARL_LITE_MONITOR_TOKEN.")
@click.option("--pid", "pids", type=int, multiple=True,
              help="Show only the pool of this process (repeatable; default: every pool of this user).")
def monitor(host: str, port: int, token: str | None, pids: tuple[int, ...]) -> None:
    """Serve the web monitor of the local pools of this machine: the machine's CPUs, memory and load,
    each process that runs a pool, each actor (state, calls served, memory, last error) and its
    recent output. Read-only; Ctrl-C stops it."""
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
