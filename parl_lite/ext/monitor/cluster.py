"""A cluster master as the monitor's status source (the monitor runs in the master's process)."""
from typing import TYPE_CHECKING, Any, Protocol

from parl_lite.ext.monitor.server import LOOPBACK_HOSTS, MonitorServer

if TYPE_CHECKING:
    from parl_lite.ext.cluster.limits import Limits

__all__ = ["MasterSource", "serve_master_monitor"]


class _Master(Protocol):
    def status(self) -> dict[str, Any]: ...

    def actor_output(self, actor_id: str) -> list[str]: ...


class MasterSource:
    """The status source of a cluster master (see :class:`~parl_lite.ext.monitor.StatusSource`).

    Args:
        master: :class:`parl_lite.ext.cluster.master.Master`, whose ``status()`` gives the status
            dict and ``actor_output(actor_id)`` an actor's last 500 lines.
    """

    def __init__(self, master: _Master) -> None:
        self._master = master

    def status(self) -> dict[str, Any]:
        return self._master.status()

    def logs(self, actor_id: str) -> list[str]:
        if all(actor["id"] != actor_id for actor in self._master.status()["actors"]):
            raise KeyError(actor_id)
        return self._master.actor_output(actor_id)


def serve_master_monitor(master: _Master, host: str, port: int | None, token: bytes,
                         limits: "Limits") -> MonitorServer | None:
    """Serve the monitor of ``master`` in background threads of its process.

    Args:
        master: the cluster master.
        host: the interface the master listens on; the monitor listens there too and, unless it is
            127.0.0.1, asks for the cluster token.
        port: the monitor's port (0: any free one); ``None``: no monitor.
        token: the cluster token.
        limits: the monitor's bounds (connections held, time per request), which keep HTTP clients
            from taking the file descriptors the master needs.

    Returns:
        The running server (``None`` if ``port`` is ``None``).

    Raises:
        OSError: the port cannot be bound.
    """
    if port is None:
        return None
    return MonitorServer(MasterSource(master), host=host, port=port, token=None if host in LOOPBACK_HOSTS else token,
                         max_connections=limits.monitor_max_connections,
                         request_timeout=limits.monitor_request_timeout).start()
