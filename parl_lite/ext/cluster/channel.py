"""The caller's end of one actor on a cluster node: calls and replies over the actor's own
connection, which ends in the worker process hosting the actor."""
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol

from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.framing import FrameTooLargeError, frame_size
from parl_lite.remote import protocol
from parl_lite.remote.caller import CLOSED, CallerChannel, Cause, Ending, over_memory
from parl_lite.remote.errors import SerializationError
from parl_lite.remote.output import print_actor_output

__all__ = ["ClusterActor", "NodeLink"]

_VERDICT_WAIT = 2.0  # seconds to wait for the node to say why an actor's connection dropped
_Frame = tuple[bytes, list[memoryview]]


class NodeLink(Protocol):
    """What an actor knows of the client's session with its node (a
    :class:`parl_lite.ext.cluster.client.NodeSession`): the node's address, and the actors the
    session holds, this one among them."""

    address: str
    actors: dict[str, "ClusterActor"]


class ClusterActor(CallerChannel):
    """One actor on a node: calls go straight to the worker process hosting it (``pid`` on ``host``,
    as the node's answer to the actor's hello says), over the actor's own connection, which the node
    hands over to that process.

    The calls, who reads their replies and how the actor's end fails them are
    :class:`~parl_lite.remote.caller.CallerChannel`'s; this class adds the transport (frames over the
    actor's authenticated TCP connection) and keeps what the node says about why the actor ended.
    """

    def __init__(self, actor_id: str, class_name: str, framed: wire.FramedSocket, node: NodeLink,
                 max_memory: float | None, on_closed: Callable[["ClusterActor"], None], pid: int,
                 host: str) -> None:
        self.actor_id = actor_id
        self.node = node
        self.max_memory = max_memory
        self.pid = pid
        self.host = host
        self._framed = framed
        self._on_closed = on_closed
        self._verdict: tuple[str, str] | None = None  # (kind, text) from the node
        self._verdict_given = threading.Event()
        super().__init__(class_name, f"pid {pid} on {host}", f"parl_lite-cluster-{actor_id}")

    def create(self, class_blob: bytes, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Build the actor (raises what ``__init__`` raised)."""
        self._run("__init__()", protocol.CREATE, class_blob, args, kwargs)

    @property
    def label(self) -> str:
        return f"{self.actor_name} pid={self.pid} host={self.host}"

    def close(self) -> None:
        # may run in __del__, in any thread: the backend's closer thread sends the STOP
        super().close()
        self._on_closed(self)

    # --- what the node says ---------------------------------------------------------------------
    def give_verdict(self, kind: str, text: str) -> None:
        """The node says why this actor ended (``memory``, ``exited``, ``closed``, ``node``): the
        connection is shut, so that its reader sees the end."""
        if self._verdict is None:
            self._verdict = (kind, text)
        self._verdict_given.set()
        try:
            self._framed.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # --- Transport: frames over the actor's connection ------------------------------------------
    def encode(self, message: tuple[Any, ...]) -> _Frame:
        body, buffers = wire.encode(message)
        size = frame_size(body, buffers)
        if size > self._framed.limit:  # the worker would refuse it (the same limit), and end the actor
            raise SerializationError(f"the arguments take {size} bytes, over the limit of {self._framed.limit} "
                                     f"bytes of a message to a cluster actor (PARL_LITE_MAX_FRAME_MB, on this "
                                     f"machine and the nodes)")
        return body, buffers

    def discard(self, frame: _Frame) -> None:
        pass

    def send(self, frame: _Frame) -> None:
        self._framed.send(*frame)

    def wait(self, timeout: float | None = None) -> bool:
        return self._framed.wait_for_message(timeout)

    def receive(self) -> tuple[Any, ...] | None:
        try:
            body, buffers = self._framed.receive()
        except (EOFError, OSError):
            return None
        except FrameTooLargeError as exc:  # the rest of the connection cannot be read: end it
            self.give_verdict("refused", f"{exc} (PARL_LITE_MAX_FRAME_MB); the actor's connection was closed")
            return None
        return wire.decode(body, buffers)

    def handle(self, message: tuple[Any, ...]) -> None:
        if message[0] == protocol.OUTPUT:
            print_actor_output(self.label, message[1], message[2])

    def end(self, expected: bool) -> Ending | None:
        if not expected:
            self._verdict_given.wait(_VERDICT_WAIT)
        kind, text = self._verdict or ("", "")
        if kind == "memory" and self.max_memory is not None:
            return over_memory(self.max_memory)
        if kind == "node":
            return Ending(Cause.DIED, f"its node {self.node.address} is gone ({text})")
        if kind == "refused":
            return Ending(Cause.DIED, text)
        if kind == "closed":
            return Ending(Cause.CLOSED, f"{CLOSED.text} ({text})") if text else CLOSED
        if kind:
            return Ending(Cause.DIED, f"the worker process exited{': ' + text if text else ''}")
        return None

    def disconnect(self) -> None:
        self._framed.close()
