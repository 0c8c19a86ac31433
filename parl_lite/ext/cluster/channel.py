"""The caller's end of one actor on a cluster node: calls and replies over the actor's own
connection, which ends in the worker process hosting the actor."""
import itertools
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from parl_lite.ext.cluster import wire
from parl_lite.remote.protocol import UNKNOWN_CALL
from parl_lite.ext.cluster.framing import FrameTooLargeError, frame_size
from parl_lite.remote import protocol
from parl_lite.remote.backend import ActorChannel
from parl_lite.remote.errors import ActorDiedError, MemoryLimitError, SerializationError
from parl_lite.remote.futures import Future
from parl_lite.remote.interrupts import ctrl_c_held_back
from parl_lite.remote.output import print_actor_output

if TYPE_CHECKING:
    from parl_lite.ext.cluster.client import NodeSession

__all__ = ["ClusterActor"]

_VERDICT_WAIT = 2.0  # seconds to wait for the node to say why an actor's connection dropped
_Slot = TypeVar("_Slot", Future, "_Reply")  # where a call's reply lands


class ClusterActor(ActorChannel):
    """One actor on a node: calls go straight to the worker process hosting it.

    A synchronous call reads its own reply in the calling thread (one wake-up per call); replies to
    asynchronous calls that no synchronous caller is reading are read by a background thread.
    """

    def __init__(self, actor_id: str, class_name: str, framed: wire.FramedSocket, node: "NodeSession",
                 max_memory: float | None, on_closed: Callable[["ClusterActor"], None]) -> None:
        self.actor_id = actor_id
        self.class_name = class_name
        self.node = node
        self.max_memory = max_memory
        self.pid = 0
        self.host = node.host
        self._framed = framed
        self._on_closed = on_closed
        self._ids = itertools.count()
        self._send_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._cond = threading.Condition(threading.Lock())
        self._pending: dict[int, tuple[Future | _Reply, str, bool]] = {}  # id -> (future, what, asynchronous)
        self._async_pending = 0
        self._waiters = 0
        self._dead = False
        self._closing = False
        self._verdict: tuple[str, str] | None = None  # (kind, text) from the node
        self._verdict_given = threading.Event()
        self._reader = threading.Thread(target=self._read_in_background, daemon=True,
                                        name=f"parl_lite-cluster-{actor_id}")

    def start(self, class_blob: bytes, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Wait for the worker's hello, then build the actor (raises what ``__init__`` raised)."""
        try:
            body, buffers = self._framed.receive()
        except (EOFError, OSError, ValueError) as exc:
            self._dead = True
            self._framed.close()
            raise ActorDiedError(f"{self.class_name}: the node {self.node.address} closed the actor's "
                                 f"connection before it started ({exc})") from exc
        _, self.pid, self.host = wire.decode(body, buffers)
        self._reader.start()
        self.result(self._submit(Future(), "__init__()", False, protocol.CREATE, class_blob, args, kwargs))

    @property
    def label(self) -> str:
        return f"{self.class_name} pid={self.pid} host={self.host}"

    # --- ActorChannel ---------------------------------------------------------------------------
    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future:
        return self._submit(Future(), f"{method}()", True, protocol.CALL, method, args, kwargs)

    def get_attribute(self, name: str) -> Future:
        return self._submit(Future(), f"attribute {name!r}", False, protocol.GETATTR, name)

    def set_attribute(self, name: str, value: Any) -> Future:
        return self._submit(Future(), f"setting attribute {name!r}", False, protocol.SETATTR, name, value)

    def call_sync(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.result(self._submit(_Reply(), f"{method}()", False, protocol.CALL, method, args, kwargs))

    def result(self, future: "Future | _Reply") -> Any:
        """Wait for ``future``, reading replies in this thread while no other thread reads (a Ctrl-C
        interrupts the wait, not a message: :mod:`parl_lite.remote.interrupts`)."""
        while not future.done():
            if self._read_lock.acquire(blocking=False):
                try:
                    while not future.done() and not self._dead:
                        self._framed.wait_for_message()
                        ctrl_c_held_back(self._read_one)
                finally:
                    self._release_reading()
            else:
                with self._cond:
                    self._waiters += 1
                    self._cond.wait_for(lambda: future.done() or not self._read_lock.locked())
                    self._waiters -= 1
        return future.result()

    def close(self) -> None:
        # may run in __del__, in any thread, even one that holds our locks: the backend's closer
        # thread sends the STOP
        if not self._closing:
            self._closing = True
            self._on_closed(self)

    # --- internals ------------------------------------------------------------------------------
    def send_stop(self) -> None:
        """Ask the worker to end after the calls already sent (the closer thread calls this)."""
        with self._send_lock:
            if self._dead:
                return
            try:
                self._framed.send(wire.encode((protocol.STOP,))[0])
            except OSError:
                pass
        with self._cond:
            if not self._pending:
                self._finish_closed()

    def _submit(self, future: _Slot, what: str, asynchronous: bool, kind: str, *fields: Any) -> _Slot:
        call_id = next(self._ids)
        try:
            body, buffers = wire.encode((kind, call_id, *fields))
        except Exception as exc:
            raise SerializationError(f"{self.class_name}.{what}: an argument cannot be pickled: "
                                     f"{type(exc).__name__}: {exc}") from exc
        size = frame_size(body, buffers)
        if size > self._framed.limit:  # the worker would refuse it (the same limit), and end the actor
            raise SerializationError(f"{self.class_name}.{what}: the arguments take {size} bytes, over the "
                                     f"limit of {self._framed.limit} bytes of a message to a cluster actor "
                                     f"(PARL_LITE_MAX_FRAME_MB, on this machine and the nodes)")
        with self._send_lock:
            if self._dead or self._closing:
                future.set_exception(self._death_error(what))
                return future
            with self._cond:
                self._pending[call_id] = (future, what, asynchronous)
                if asynchronous:
                    self._async_pending += 1
                    self._cond.notify_all()
            try:
                self._framed.send(body, buffers)
            except OSError:
                pass  # a reader sees the connection drop and fails this call
        return future

    def _release_reading(self) -> None:
        self._read_lock.release()
        # only threads that wait for the read lock need waking: a needless wake-up of the parked
        # background reader would cost a context switch on every synchronous call
        if self._waiters or self._async_pending:
            with self._cond:
                self._cond.notify_all()

    def _read_in_background(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._dead or (self._async_pending > 0 and not self._read_lock.locked()))
            if self._dead:
                with self._read_lock:  # no other thread is inside recv when the socket closes
                    self._framed.sock.close()
                return
            if self._read_lock.acquire(blocking=False):
                try:
                    while self._async_pending > 0 and not self._dead:
                        self._read_one()
                finally:
                    self._release_reading()

    def _read_one(self) -> None:
        """Read and dispatch one message (the read lock is held)."""
        try:
            body, buffers = self._framed.receive()
        except (EOFError, OSError):
            self._on_disconnect()
            return
        except FrameTooLargeError as exc:  # the rest of the connection cannot be read: end it
            self.give_verdict("refused", f"{exc} (PARL_LITE_MAX_FRAME_MB); the actor's connection was closed")
            self._on_disconnect()
            return
        try:
            message = wire.decode(body, buffers)
        except Exception as exc:
            self._resolve(None, exc=SerializationError(
                f"{self.class_name}: a reply cannot be unpickled here: {type(exc).__name__}: {exc}"))
            return
        kind = message[0]
        if kind == protocol.OUTPUT:
            self._print(message[1], message[2])
        elif kind == protocol.OK:
            self._resolve(message[1], value=message[2])
        elif kind == protocol.ERROR:
            self._resolve(message[1], failure=message[2])

    def _resolve(self, call_id: int | None, value: Any = None, failure: Any = None,
                 exc: BaseException | None = None) -> None:
        with self._cond:
            if call_id is None or call_id == UNKNOWN_CALL:  # replies come in call order: the oldest's
                call_id = next(iter(self._pending), UNKNOWN_CALL)
            entry = self._pending.pop(call_id, None)
            if entry is None:
                return
            if entry[2]:
                self._async_pending -= 1
            finished = self._closing and not self._pending
        future, what, _ = entry
        if exc is not None:
            future.set_exception(exc)
        elif failure is not None:
            future.set_exception(failure.to_exception(f"{self.class_name}.{what}"))
        else:
            future.set_result(value)
        # after the result is set: a woken waiter must find its future done
        if finished or self._waiters:
            with self._cond:
                if finished:
                    self._finish_closed()
                self._cond.notify_all()

    def _finish_closed(self) -> None:
        """Closed and no call pending: done (``self._cond`` is held)."""
        self._dead = True
        self._cond.notify_all()
        self._shut()

    def _shut(self) -> None:
        try:
            self._framed.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _print(self, stream_name: str, text: str) -> None:
        print_actor_output(self.label, stream_name, text)

    def give_verdict(self, kind: str, text: str) -> None:
        """The node says why this actor ended (``memory``, ``exited``, ``node``); wakes readers."""
        if self._verdict is None:
            self._verdict = (kind, text)
        self._verdict_given.set()
        self._shut()

    def _on_disconnect(self) -> None:
        if not self._closing and not self._verdict_given.is_set():
            self._verdict_given.wait(_VERDICT_WAIT)
        with self._cond:
            self._dead = True
            pending = list(self._pending.values())
            self._pending.clear()
            self._async_pending = 0
            self._cond.notify_all()
        for future, what, _ in pending:
            future.set_exception(self._death_error(what))

    def _death_error(self, what: str) -> ActorDiedError:
        where = f"{self.class_name}.{what} (pid {self.pid} on {self.host})"
        kind, text = self._verdict or ("", "")
        if kind == "memory":
            return MemoryLimitError(f"{where}: the actor went over its max_memory of {self.max_memory} MB "
                                    f"and was stopped")
        if kind == "node":
            return ActorDiedError(f"{where}: its node {self.node.address} is gone ({text})")
        if kind == "refused":
            return ActorDiedError(f"{where}: {text}")
        if self._closing and not kind:
            return ActorDiedError(f"{where}: the actor was closed")
        return ActorDiedError(f"{where}: the worker process exited{': ' + text if text else ''}")


class _Reply:
    """Where a synchronous call's reply lands: the parts of a Future the channel uses, without its
    locks (the waiting thread is woken through the channel's condition; a Future costs a few µs)."""

    __slots__ = ("_value", "_error", "_done")

    def __init__(self) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        self._value = value
        self._done = True

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._done = True

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value
