"""The caller's side of the cluster: ``parl_lite.connect("host:port")`` returns a :class:`ClusterBackend`.

Creating an actor asks the master for a node with a free CPU, ships the user's files to that node
once (a *session* connection that stays open: the node sends on it why an actor died), then opens a
connection of the actor's own to the node, which hands it to the worker process hosting the actor.
From then on calls and replies travel between this process and that worker directly.
"""
import itertools
import os
import socket
import sys
import threading
import uuid
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import cloudpickle

from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.actor_host import UNKNOWN_CALL
from parl_lite.ext.cluster.local_state import load_token
from parl_lite.ext.cluster.shipping import DEFAULT_LIMIT_MB, collect_files
from parl_lite.remote import protocol
from parl_lite.remote.backend import ActorChannel, ActorOptions, Backend
from parl_lite.remote.errors import ActorDiedError, MemoryLimitError, SerializationError
from parl_lite.remote.futures import Future

__all__ = ["ClusterBackend", "ClusterActor", "connect_cluster"]

_VERDICT_WAIT = 2.0  # seconds to wait for the node to say why an actor's connection dropped


class ClusterActor(ActorChannel):
    """One actor on a node: calls go straight to the worker process hosting it.

    A synchronous call reads its own reply in the calling thread (one wake-up per call); replies to
    asynchronous calls that no synchronous caller is reading are read by a background thread.
    """

    def __init__(self, actor_id: str, class_name: str, framed: wire.FramedSocket, node: "NodeSession",
                 max_memory: Optional[float], on_closed: Callable[["ClusterActor"], None]) -> None:
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
        self._pending: Dict[int, Tuple[Future, str, bool]] = {}  # id -> (future, what, asynchronous)
        self._async_pending = 0
        self._waiters = 0
        self._dead = False
        self._closing = False
        self._verdict: Optional[Tuple[str, str]] = None  # (kind, text) from the node
        self._verdict_given = threading.Event()
        self._reader = threading.Thread(target=self._read_in_background, daemon=True,
                                        name=f"parl_lite-cluster-{actor_id}")

    def start(self, class_blob: bytes, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        """Wait for the worker's hello, then build the actor (raises what ``__init__`` raised)."""
        try:
            body, buffers = self._framed.receive()
        except (EOFError, OSError) as exc:
            self._dead = True
            self._framed.close()
            raise ActorDiedError(f"{self.class_name}: the node {self.node.address} closed the actor's "
                                 f"connection before it started ({exc})") from exc
        _, self.pid, self.host = wire.decode(body, buffers)
        self._reader.start()
        self.result(self._submit("__init__()", False, protocol.CREATE, class_blob, args, kwargs))

    @property
    def label(self) -> str:
        return f"{self.class_name} pid={self.pid} host={self.host}"

    # --- ActorChannel ---------------------------------------------------------------------------
    def call(self, method: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Future:
        return self._submit(f"{method}()", True, protocol.CALL, method, args, kwargs)

    def get_attribute(self, name: str) -> Future:
        return self._submit(f"attribute {name!r}", False, protocol.GETATTR, name)

    def set_attribute(self, name: str, value: Any) -> Future:
        return self._submit(f"setting attribute {name!r}", False, protocol.SETATTR, name, value)

    def call_sync(self, method: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        return self.result(self._submit(f"{method}()", False, protocol.CALL, method, args, kwargs))

    def result(self, future: Future) -> Any:
        """Wait for ``future``, reading replies in this thread while no other thread reads."""
        while not future.done():
            if self._read_lock.acquire(blocking=False):
                try:
                    while not future.done() and not self._dead:
                        self._read_one()
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

    def _submit(self, what: str, asynchronous: bool, kind: str, *fields: Any) -> Future:
        future = Future()
        call_id = next(self._ids)
        try:
            body, buffers = wire.encode((kind, call_id, *fields))
        except Exception as exc:
            raise SerializationError(f"{self.class_name}.{what}: an argument cannot be pickled: "
                                     f"{type(exc).__name__}: {exc}") from exc
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

    def _resolve(self, call_id: Optional[int], value: Any = None, failure: Any = None,
                 exc: Optional[BaseException] = None) -> None:
        with self._cond:
            if call_id is None or call_id == UNKNOWN_CALL:  # replies come in call order: the oldest's
                call_id = next(iter(self._pending), None)
            entry = self._pending.pop(call_id, None)
            if entry is None:
                return
            if entry[2]:
                self._async_pending -= 1
            if self._closing and not self._pending:
                self._finish_closed()
            elif self._waiters:
                self._cond.notify_all()
        future, what, _ = entry
        if exc is not None:
            future.set_exception(exc)
        elif failure is not None:
            future.set_exception(failure.to_exception(f"{self.class_name}.{what}"))
        else:
            future.set_result(value)

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
        stream = sys.stdout if stream_name == "stdout" else sys.stderr
        prefix = f"({self.label}) "
        stream.write("".join(prefix + line for line in text.splitlines(keepends=True)))
        if not text.endswith("\n"):
            stream.write("\n")
        stream.flush()

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
        if self._closing and not kind:
            return ActorDiedError(f"{where}: the actor was closed")
        return ActorDiedError(f"{where}: the worker process exited{': ' + text if text else ''}")


class NodeSession:
    """This client's session with one node: the shipped files live as long as it is open, and the
    node reports on it why an actor ended."""

    def __init__(self, address: str, host: str, token: bytes, client_id: str, files: Dict[str, bytes]) -> None:
        self.address = address
        self.host = host
        self.actors: Dict[str, ClusterActor] = {}
        self._lock = threading.Lock()
        names = list(files)
        self.framed, _ = wire.open_connection(address, token, "session", client_id=client_id, files=names)
        self.framed.send(b"files", [memoryview(files[name]) for name in names])
        reply = self.framed.receive_json()
        if not reply.get("ok"):
            self.framed.close()
            raise wire.ClusterError(f"the node at {address} refused our files: {reply.get('error')}")
        self.gone = False
        threading.Thread(target=self._listen, daemon=True, name=f"parl_lite-session-{address}").start()

    def _listen(self) -> None:
        self.framed.sock.settimeout(wire.SILENCE_LIMIT)  # the node beats every HEARTBEAT_PERIOD
        try:
            while True:
                message = self.framed.receive_json()
                actor = self.actors.get(message.get("actor_id"))
                if actor is not None and message.get("type") == "ended":
                    actor.give_verdict(message["kind"], message.get("text", ""))
        except (EOFError, OSError, ValueError):
            pass
        self.gone = True
        for actor in list(self.actors.values()):
            actor.give_verdict("node", "its connection closed")

    def close(self) -> None:
        self.framed.close()


class ClusterBackend(Backend):
    """Actors on the nodes of a parl_lite cluster.

    Args:
        address: the master's ``host:port``.
        distributed_files: globs of further files the actors need (configs, data), shipped with the
            ``*.py`` files of the driver script's folder.
        token_file: the cluster token (default: ``$PARL_LITE_TOKEN``, else this machine's token file).
        placement_timeout: seconds an actor's creation waits for a free CPU before it fails.
        max_ship_mb: limit on the size of the shipped files.
        num_workers, threads_per_worker: accepted because ``parl_lite.connect`` passes them; a
            cluster's nodes decide their own (``--cpus``; one thread per worker).
    """

    def __init__(self, address: str, distributed_files: Sequence[str] = (), token_file: Optional[str] = None,
                 placement_timeout: float = 30.0, max_ship_mb: float = DEFAULT_LIMIT_MB,
                 num_workers: Optional[int] = None, threads_per_worker: int = 1) -> None:
        if "://" in address:
            address = address.split("://", 1)[1]
        wire.split_address(address)
        self.address = address
        self.placement_timeout = placement_timeout
        self._token = load_token(token_file)
        self._files = collect_files(list(distributed_files), max_ship_mb)
        main = sys.modules.get("__main__")
        self._master, reply = wire.open_connection(
            address, self._token, "client", pid=os.getpid(), host=socket.gethostname(),
            script=getattr(main, "__file__", None) or "<interactive>")
        self.client_id = reply["client_id"]
        self._master_lock = threading.Lock()
        self._sessions: Dict[str, NodeSession] = {}
        self._sessions_lock = threading.Lock()
        self._class_blobs: Dict[type, bytes] = {}
        self._closings: "list[ClusterActor]" = []
        self._closing_wake = threading.Condition()
        self._actors: Dict[str, ClusterActor] = {}
        self._closed = False
        self._closer = threading.Thread(target=self._close_actors, daemon=True, name="parl_lite-closer")
        self._closer.start()

    # --- Backend --------------------------------------------------------------------------------
    def create_actor(self, cls: type, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                     options: ActorOptions) -> ClusterActor:
        if self._closed:
            raise RuntimeError("the parl_lite cluster connection is shut down")
        blob = self._class_blob(cls)
        place = self._ask_master({"type": "place", "timeout": self.placement_timeout})
        session = self._session(place["node_id"], place["address"], place["host"])
        actor_id = uuid.uuid4().hex[:12]
        framed, _ = wire.open_connection(place["address"], self._token, "actor", client_id=self.client_id,
                                         actor_id=actor_id, reservation=place["reservation"],
                                         max_memory=options.max_memory, class_name=cls.__qualname__)
        actor = ClusterActor(actor_id, cls.__qualname__, framed, session, options.max_memory, self._queue_close)
        session.actors[actor_id] = actor
        self._actors[actor_id] = actor
        try:
            actor.start(blob, args, kwargs)
        except BaseException:
            actor.close()
            raise
        return actor

    def status(self) -> Dict[str, Any]:
        return self._ask_master({"type": "status"})["status"]

    def shutdown(self) -> None:
        if self._closed:
            return
        for actor in list(self._actors.values()):
            actor.close()
        self._closed = True
        with self._closing_wake:
            self._closing_wake.notify()
        self._closer.join(timeout=10)
        for session in self._sessions.values():
            session.close()
        self._master.close()

    # --- internals ------------------------------------------------------------------------------
    def _class_blob(self, cls: type) -> bytes:
        blob = self._class_blobs.get(cls)
        if blob is None:
            try:
                blob = cloudpickle.dumps(cls, protocol=5)
            except Exception as exc:
                raise SerializationError(f"class {cls.__qualname__} cannot be pickled to send it to a "
                                         f"node: {type(exc).__name__}: {exc}") from exc
            self._class_blobs[cls] = blob
        return blob

    def _ask_master(self, request: Dict[str, Any]) -> Dict[str, Any]:
        with self._master_lock:
            try:
                self._master.send_json(request)
                reply = self._master.receive_json()
            except (EOFError, OSError) as exc:
                raise wire.ClusterError(f"the parl_lite cluster master at {self.address} is gone "
                                        f"({exc}); its actors are lost") from exc
        if "error" in reply:
            raise wire.ClusterError(reply["error"])
        return reply

    def _session(self, node_id: str, address: str, host: str) -> NodeSession:
        with self._sessions_lock:
            session = self._sessions.get(node_id)
            if session is None or session.gone:
                session = NodeSession(address, host, self._token, self.client_id, self._files)
                self._sessions[node_id] = session
            return session

    def _queue_close(self, actor: ClusterActor) -> None:
        self._closings.append(actor)  # list.append is atomic: safe from __del__
        if self._closing_wake.acquire(blocking=False):
            try:
                self._closing_wake.notify()
            finally:
                self._closing_wake.release()

    def _close_actors(self) -> None:
        while True:
            with self._closing_wake:
                self._closing_wake.wait_for(lambda: self._closings or self._closed, timeout=0.1)
            while self._closings:
                actor = self._closings.pop(0)
                actor.send_stop()
                self._actors.pop(actor.actor_id, None)
                actor.node.actors.pop(actor.actor_id, None)
            if self._closed and not self._closings:
                return


def connect_cluster(address: str, **options: Any) -> ClusterBackend:
    """The ``parl_lite.backends`` entry point: ``parl_lite.connect("host:port", ...)``."""
    return ClusterBackend(address, **options)
