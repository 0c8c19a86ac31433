"""The node side of one actor: runs in a worker process of the node's ``LocalPool``.

The node creates an :class:`ActorHost` in a pool worker ahead of need (a spare), which links to the
node's hand-over socket, a Unix socket in the node's private folder. When a client's actor comes,
the node passes the client's already authenticated TCP socket down that link (a file descriptor) and
calls :meth:`ActorHost.serve`, which takes it, builds the client's actor and serves its calls over
that socket directly: one hop between caller and actor, as with the local pool's pipe. The node
still owns the process (memory limit, death, output) through the pool.
"""
import os
import socket
import struct
import sys
import threading
import time
from typing import Any, TextIO, cast

from parl_lite.ext.cluster import framing
from parl_lite.ext.cluster.limits import Limits
from parl_lite.remote import protocol
from parl_lite.remote.errors import RemoteFailure
from parl_lite.remote.worker import _Channel, _ForwardedStream, _run, send_note

__all__ = ["ActorHost", "LINK_PID_FORMAT"]
LINK_PID_FORMAT = "!I"  # how a host says its pid when it links to the node's hand-over socket
_FIGURES_PERIOD = 0.5  # seconds: the figures of the calls of this long go to the node in one note


class _TeeChannel:
    """Where an actor's output lines go: to the client (OUTPUT messages, in order with the replies)
    and to the node's pool (which keeps recent lines for the master)."""

    def __init__(self, host: "ActorHost", node_stream: TextIO) -> None:
        self.host = host
        self.node_stream = node_stream

    def send(self, message: tuple) -> None:
        self.host.send(message)
        self.node_stream.write(message[2])
        self.node_stream.flush()


class ActorHost:
    """Hosts one client actor in this worker process (see the module docstring)."""

    def __init__(self, handoff_path: str) -> None:
        """Link to the node's hand-over socket at ``handoff_path`` (relative to the node's working
        folder, which is this process's working folder until :meth:`serve`), saying our pid: the node
        sends the client's socket down this link when an actor comes, with no connection to make then."""
        self._link = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._link.connect(handoff_path)
            self._link.sendall(struct.pack(LINK_PID_FORMAT, os.getpid()))
        except BaseException:
            self._link.close()
            raise
        self._framed: framing.FramedSocket | None = None
        self._send_lock = threading.Lock()
        self._calls_served = 0
        self._last_error: str | None = None
        self._state = "starting"
        self._figures_sent: dict[str, Any] | None = None

    @property
    def framed(self) -> framing.FramedSocket:
        """The client's socket (set by :meth:`serve`)."""
        if self._framed is None:
            raise RuntimeError("the actor host has no client socket yet")
        return self._framed

    def send(self, message: Any) -> None:
        body, buffers = framing.encode(message)
        with self._send_lock:
            self.framed.send(body, buffers)

    def serve(self, work_folder: str) -> dict[str, Any]:
        """Take the client's socket the node sent down our link, then serve the actor until the
        client stops it or leaves, and return the final figures (calls served, last error, state): the
        node has them as serving ends, however recent the last note was.

        Args:
            work_folder: the client's shipped files; the actor's cwd and first ``sys.path`` entry.

        While the actor serves, its figures go to the node as notes over this worker's connection
        to the node's pool (:func:`~parl_lite.remote.worker.send_note`), also when serving fails.
        """
        with self._link:
            _, fds, _, _ = socket.recv_fds(self._link, 1, 1)
        if not fds:
            raise RuntimeError("the node handed over no client socket")
        self._framed = framing.FramedSocket(socket.socket(fileno=fds[0]), "the client",
                                            Limits.from_environment().max_frame_bytes)
        os.chdir(work_folder)
        sys.path.insert(0, work_folder)
        # _ForwardedStream only calls send() on its channel, which _TeeChannel has
        sys.stdout = _ForwardedStream(cast(_Channel, _TeeChannel(self, sys.stdout)), "stdout")
        sys.stderr = _ForwardedStream(cast(_Channel, _TeeChannel(self, sys.stderr)), "stderr")
        try:
            self._serve_calls()
        except BaseException:
            self._send_figures()
            raise
        finally:
            self.framed.close()
        return self._figures()

    def _serve_calls(self) -> None:
        actor: Any = None
        figures_due: float | None = None  # when the figures changed since the last note are due
        while True:
            if figures_due is not None and not self.framed.wait_for_message(max(0.0, figures_due - time.monotonic())):
                self._send_figures()
                figures_due = None
                continue
            try:
                body, buffers = self.framed.receive()
            except (EOFError, OSError):
                return
            except framing.FrameTooLargeError as exc:  # nothing after it can be read: answer, and end
                self.send((protocol.ERROR, protocol.UNKNOWN_CALL, RemoteFailure.from_exception(exc)))
                raise
            try:
                message = framing.decode(body, buffers)
            except Exception as exc:  # e.g. an argument's class does not exist here
                self.send((protocol.ERROR, protocol.UNKNOWN_CALL, RemoteFailure.from_exception(exc)))
                continue
            kind = message[0]
            if kind == protocol.STOP:
                return
            call_id = message[1]
            try:
                actor, value = _run(actor, message)
                reply = (protocol.OK, call_id, value)
                if kind == protocol.CREATE:
                    self._state = "alive"
            except BaseException as exc:  # sys.exit() and KeyboardInterrupt in a method are its errors too
                self._last_error = f"{type(exc).__qualname__}: {exc}"
                reply = (protocol.ERROR, call_id, RemoteFailure.from_exception(exc))
            message = value = None
            sys.stdout.flush()
            sys.stderr.flush()
            self._calls_served += 1
            if figures_due is None:  # the calls of the next moment go in the same note
                figures_due = time.monotonic() + _FIGURES_PERIOD
            try:
                self.send(reply)
            except (EOFError, OSError):
                return
            except Exception as exc:  # the value cannot be pickled
                self.send((protocol.ERROR, call_id, RemoteFailure.from_exception(exc, serialization=True)))

    def _figures(self) -> dict[str, Any]:
        return {"calls_served": self._calls_served, "last_error": self._last_error, "state": self._state}

    def _send_figures(self) -> None:
        """Send the figures to the node if they changed: from the serving loop, at most every
        ``_FIGURES_PERIOD`` while calls are served and none while the actor is idle (a node hosts
        thousands of idle actors in all), so no thread of its own."""
        figures = self._figures()
        if figures == self._figures_sent:
            return
        try:
            send_note(figures)
        except OSError:  # the node's pool is gone: the actor ends when its connection is read next
            return
        self._figures_sent = figures
