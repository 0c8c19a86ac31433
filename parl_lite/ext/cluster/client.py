"""The caller's side of the cluster: ``parl_lite.connect("host:port")`` returns a :class:`ClusterBackend`.

Creating an actor asks the master for a node with a free CPU, ships the user's files to that node
once (a *session* connection that stays open: the node sends on it why an actor died), then opens a
connection of the actor's own to the node, which hands it to the worker process hosting the actor.
From then on calls and replies travel between this process and that worker directly.

So the actors do not need the master: when it goes away they keep answering (for their nodes'
reconnect grace), and only asking the master (creating an actor, the status, the free CPUs) fails,
until a master answers on its address again: the client then reconnects, under its id.
"""
import math
import numbers
import os
import socket
import sys
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.channel import ClusterActor
from parl_lite.ext.cluster.limits import Limits
from parl_lite.ext.cluster.local_state import load_token
from parl_lite.ext.cluster.shipping import DEFAULT_LIMIT_MB, collect_files
from parl_lite.remote.backend import ActorOptions, Backend, Capacity
from parl_lite.remote.protocol import ClassBlobs
from parl_lite.remote.threads import start_daemon

__all__ = ["ClusterBackend", "NodeSession", "connect_cluster"]


class NodeSession:
    """This client's session with one node: the shipped files live as long as it is open, and the
    node reports on it why an actor ended."""

    def __init__(self, node_id: str, address: str, host: str, token: bytes, client_id: str,
                 files: dict[str, bytes]) -> None:
        self.address = address
        self.host = host
        self.actors: dict[str, ClusterActor] = {}
        self._lock = threading.Lock()
        names = list(files)
        self.framed, _ = wire.open_connection(address, token, "session", identity=wire.node_identity(node_id),
                                              client_id=client_id, files=names)
        self.framed.send(b"files", [memoryview(files[name]) for name in names])
        reply = self.framed.receive_json()
        if not reply.get("ok"):
            self.framed.close()
            raise wire.ClusterError(f"the node at {address} refused our files: {reply.get('error')}")
        self.gone = False
        start_daemon(self._listen, name=f"parl_lite-session-{address}")

    def _listen(self) -> None:
        try:
            self.framed.sock.settimeout(wire.SILENCE_LIMIT)  # the node beats every HEARTBEAT_PERIOD
            while True:
                message = self.framed.receive_json()
                actor = self.actors.get(str(message.get("actor_id")))
                if actor is not None and message.get("type") == "ended":
                    actor.give_verdict(message["kind"], message.get("text", ""))
        except (EOFError, OSError, ValueError):
            pass
        self.gone = True
        for actor in list(self.actors.values()):
            actor.give_verdict("node", "its connection closed")
        self.framed.close()  # we give this session up: the node stops what is left of its actors

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

    def __init__(self, address: str, distributed_files: Sequence[str] = (), token_file: str | None = None,
                 placement_timeout: float = 30.0, max_ship_mb: float = DEFAULT_LIMIT_MB,
                 num_workers: int | None = None, threads_per_worker: int = 1) -> None:
        if "://" in address:
            address = address.split("://", 1)[1]
        wire.split_address(address)
        self.address = address
        self.placement_timeout = _finite_number("placement_timeout", placement_timeout, "seconds", zero=True)
        _finite_number("max_ship_mb", max_ship_mb, "MB", zero=False)
        self._frame_limit = Limits.from_environment().max_frame_bytes  # an actor's arguments or reply
        self._token = load_token(token_file)
        self._files = collect_files(list(distributed_files), max_ship_mb)
        self._master, self.client_id = self._open_master(None)
        self._master_lock = threading.Lock()
        self._sessions: dict[str, NodeSession] = {}
        self._sessions_lock = threading.Lock()
        self._openings: dict[str, threading.Lock] = {}  # node id -> held while a session with it opens
        self._class_blobs = ClassBlobs("node")
        self._closings: list[ClusterActor] = []
        self._closing_wake = threading.Condition()
        self._actors: dict[str, ClusterActor] = {}
        self._closed = False
        self._closer = threading.Thread(target=self._close_actors, daemon=True, name="parl_lite-closer")
        self._closer.start()

    # --- Backend --------------------------------------------------------------------------------
    def create_actor(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any],
                     options: ActorOptions) -> ClusterActor:
        if self._closed:
            raise RuntimeError("the parl_lite cluster connection is shut down")
        blob = self._class_blobs.blob(cls)
        timeout = self.placement_timeout if options.placement_timeout is None else options.placement_timeout
        place = self._ask_master({"type": "place", "timeout": timeout})
        session = self._session(place["node_id"], place["address"], place["host"])
        actor_id = uuid.uuid4().hex[:12]
        framed, worker = wire.open_connection(place["address"], self._token, "actor", limit=self._frame_limit,
                                              identity=wire.node_identity(place["node_id"]),
                                              client_id=self.client_id, actor_id=actor_id,
                                              reservation=place["reservation"], max_memory=options.max_memory,
                                              class_name=cls.__qualname__)
        actor = ClusterActor(actor_id, cls.__qualname__, framed, session, options.max_memory, self._queue_close,
                             worker["pid"], worker["host"])
        session.actors[actor_id] = actor
        self._actors[actor_id] = actor
        try:
            actor.create(blob, args, kwargs)
        except BaseException:
            actor.close()
            raise
        return actor

    def status(self) -> dict[str, Any]:
        return self._ask_master({"type": "status"})["status"]

    def capacity(self) -> Capacity:
        """The CPUs of the nodes alive (the master's cheap capacity answer); one actor per CPU.

        Raises:
            ClusterError: the master is gone.
        """
        answer = self._ask_master({"type": "capacity"})["capacity"]
        return Capacity(int(answer["cpus_total"]), on_this_machine=False, one_actor_per_cpu=True,
                        description=f"the parl_lite cluster at {self.address} ({answer['nodes_alive']} node(s))",
                        grow_hint=f"add nodes (parl-lite connect --address {self.address})")

    def free_slots(self) -> int:
        """Free CPUs of the nodes that are alive and not suspect (the master's answer).

        Raises:
            ClusterError: the master is gone.
        """
        return int(self._ask_master({"type": "capacity"})["capacity"]["cpus_free"])

    def shutdown(self) -> None:
        if self._closed:
            return
        for actor in list(self._actors.values()):
            actor.close()
        self._closed = True
        with self._closing_wake:
            self._closing_wake.notify()
        self._closer.join(timeout=10)
        with self._sessions_lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            session.close()
        self._master.close()

    # --- internals ------------------------------------------------------------------------------
    def _open_master(self, client_id: str | None) -> tuple[wire.FramedSocket, str]:
        """A connection to the master and this client's id there (``client_id`` if given)."""
        main = sys.modules.get("__main__")
        framed, reply = wire.open_connection(
            self.address, self._token, "client", pid=os.getpid(), host=socket.gethostname(),
            script=getattr(main, "__file__", None) or "<interactive>", client_id=client_id)
        return framed, reply["client_id"]

    def _ask_master(self, request: dict[str, Any]) -> dict[str, Any]:
        """The master's reply to ``request``; a master that went away is reached again (it may have
        been restarted on its address) once per request.

        Raises:
            ClusterError: the master is gone and does not answer again, or answered with an error.
        """
        with self._master_lock:
            try:
                reply = self._exchange(request)
            except (EOFError, OSError) as lost:
                self._master.close()
                try:
                    self._master, self.client_id = self._open_master(self.client_id)
                    reply = self._exchange(request)
                except (EOFError, OSError) as again:  # ClusterError too
                    raise wire.ClusterError(
                        f"the parl_lite cluster master at {self.address} is gone ({lost}; then: {again}): creating "
                        f"actors fails until a master answers on that address again (`parl-lite start` there: its "
                        f"nodes rejoin it), and the actors already created keep answering meanwhile, as long as "
                        f"their nodes wait for it (their reconnect grace)") from lost
        if "error" in reply:
            raise wire.ClusterError(reply["error"])
        return reply

    def _exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        self._master.send_json(request)
        return self._master.receive_json()

    def _session(self, node_id: str, address: str, host: str) -> NodeSession:
        """This client's open session with the node (opened now if there is none: sessions with
        different nodes open at once, from several threads)."""
        with self._sessions_lock:
            session = self._sessions.get(node_id)
            if session is not None and not session.gone:
                return session
            opening = self._openings.setdefault(node_id, threading.Lock())
        with opening:
            with self._sessions_lock:
                session = self._sessions.get(node_id)
            if session is None or session.gone:
                session = NodeSession(node_id, address, host, self._token, self.client_id, self._files)
                with self._sessions_lock:
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
                actor.stop()
                self._actors.pop(actor.actor_id, None)
                actor.node.actors.pop(actor.actor_id, None)
            if self._closed and not self._closings:
                return


def _finite_number(name: str, value: Any, unit: str, zero: bool) -> float:
    """``value`` as a float if it is a finite number above 0 (or 0 when ``zero``), else an error
    naming ``name``."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"parl_lite.connect(): {name} must be a number of {unit}, got {value!r}")
    number = float(value)
    if not (math.isfinite(number) and (number >= 0 if zero else number > 0)):
        bound = "0 or more" if zero else "above 0"
        raise ValueError(f"parl_lite.connect(): {name} must be a finite number of {unit}, {bound}; got {value!r}")
    return number


def connect_cluster(address: str, **options: Any) -> ClusterBackend:
    """The ``parl_lite.backends`` entry point: ``parl_lite.connect("host:port", ...)``."""
    return ClusterBackend(address, **options)
