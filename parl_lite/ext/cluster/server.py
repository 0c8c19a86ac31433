"""A TCP server shared by the master and the node agent: authenticate, check versions, dispatch.

Each accepted connection gets a thread that runs the handshake (a peer without the token is dropped
after at most :data:`~parl_lite.ext.cluster.wire.HANDSHAKE_TIMEOUT` seconds, having had nothing of
its bytes parsed), the version hello, and then the handler of the role the peer asked for.
"""
import json
import logging
import os
import select
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

from parl_lite.ext.cluster import wire
from parl_lite.io.atomic import write_atomically

__all__ = ["Server", "run_until_stopped"]

Handler = Callable[[wire.FramedSocket, dict[str, Any]], None]
logger = logging.getLogger("parl_lite.cluster")


class Server:
    """Listens on ``host:port`` (port 0: the OS picks) and dispatches authenticated connections.

    Args:
        host: the interface to bind (``127.0.0.1`` unless told otherwise).
        port: the TCP port.
        token: the shared secret.
        handlers: role named in the peer's hello -> function run on the connection (it owns it).
    """

    def __init__(self, host: str, port: int, token: bytes, handlers: dict[str, Handler]) -> None:
        self._token = token
        self._handlers = handlers
        self._listener = socket.create_server((host, port), backlog=128)
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="parl_lite-accept").start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock, f"{peer[0]}:{peer[1]}"), daemon=True).start()

    def _serve(self, sock: socket.socket, peer: str) -> None:
        try:
            wire.server_handshake(sock, self._token)
        except (OSError, wire.ClusterError) as exc:
            logger.warning("dropped a connection from %s: %s", peer, exc)
            sock.close()
            return
        framed = wire.FramedSocket(sock, peer)
        try:
            hello = wire.server_hello(framed)
            handler = self._handlers.get(str(hello.get("role")))
            if handler is None:
                framed.send_json({"ok": False, "error": f"unknown role {hello.get('role')!r}"})
                raise wire.ClusterError(f"unknown role {hello.get('role')!r}")
        except (OSError, EOFError, ValueError, wire.ClusterError) as exc:
            logger.warning("refused %s: %s", peer, exc)
            framed.close()
            return
        try:
            handler(framed, hello)
        except (OSError, EOFError):
            framed.close()

    def close(self) -> None:
        """Stop accepting connections."""
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()


EXIT_WITH_VARIABLE = "PARL_LITE_EXIT_WITH"  # a pid: the master and nodes stop when it exits (tests)


def run_until_stopped(ready_file: str, info: dict[str, Any], stop: threading.Event) -> None:
    """Write ``info`` (JSON) to ``ready_file``, which ``parl-lite start`` / ``connect`` wait for, then
    wait until SIGTERM, SIGINT or ``stop`` (or the exit of the process ``$PARL_LITE_EXIT_WITH`` names:
    a test run that is killed does not leave its cluster running)."""
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    owner = os.environ.get(EXIT_WITH_VARIABLE)
    if owner:
        threading.Thread(target=_stop_with, args=(int(owner), stop), daemon=True).start()
    write_atomically(ready_file, lambda path: path.write_text(json.dumps(info)))
    stop.wait()


def _stop_with(pid: int, stop: threading.Event) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        stop.set()
        return
    select.select([pidfd], [], [])  # readable once the process has exited
    os.close(pidfd)
    stop.set()
