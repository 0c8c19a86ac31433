"""The node agent (``parl-lite connect``, and the master machine's own CPUs in ``parl-lite start``).

It hosts actors in a :class:`~parl_lite.remote.pool.LocalPool`, one worker process each, and lets
clients reach them directly: a client's actor connection is authenticated here, then its socket is
handed to the worker (:mod:`parl_lite.ext.cluster.actor_host`). The node keeps an
:class:`ActorHost` built ahead of need for each free CPU (a *spare*), so that a new actor waits for
neither a process nor its imports. The node watches the workers
(memory limit, death) through the pool, tells the client on its session connection why an actor
ended, reports CPUs, memory, load and what changed of its actors to the master every half second,
and beats on each client's session (so that a client takes a node silent for 2.5 s for dead, as the
master does).

A client's session is its stay on this node: its shipped files live in a folder of their own, and
when the session ends (the client left, was killed, or gave this node up) the node stops the
session's actors at once, busy or not, and removes the folder.

When the master goes away the node keeps serving its actors and tries to reach the master again,
with backoff, for its reconnect grace (``--reconnect-grace``); it rejoins under its id, with its
actors and their CPUs. After the grace it stops its actors and exits.
"""
import argparse
import errno
import logging
import math
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from parl_lite.ext.cluster import hello, wire
from parl_lite.ext.cluster.actor_host import LINK_PID_FORMAT, ActorHost
from parl_lite.ext.cluster.limits import HELLO_FRAME_BYTES, Limits
from parl_lite.ext.cluster.local_state import load_token
from parl_lite.ext.cluster.server import Role, Server, run_until_stopped
from parl_lite.ext.cluster.shipping import DEFAULT_LIMIT_MB, write_files
from parl_lite.remote.backend import ActorOptions
from parl_lite.remote.caller import CLOSED
from parl_lite.remote.errors import ActorDiedError, MemoryLimitError
from parl_lite.remote.pool import LocalPool, WorkerProcess
from parl_lite.remote.zygote import PRELOAD_VARIABLE
from parl_lite.utils.machine_info import memory_mb

__all__ = ["NodeAgent", "PRIVATE_PREFIX"]

PRIVATE_PREFIX = ".parl_lite_node_"  # + pid + "_" + random: the node's private folder in its work dir
_OUTPUT_LINES = 500
_REJOIN_FIRST_DELAY = 0.1  # seconds before the first try to reach a master that went away, doubling ...
_REJOIN_MOST_DELAY = 2.0  # ... up to this
_CLIENT_LEFT = "its client left"
_SPARE_RETRY = 1.0  # seconds before building a spare actor host again after a failure
_LINK_WAIT = 5.0  # seconds an actor host built may take to link to the hand-over socket
_END_BY_ITSELF = 0.5  # seconds a session's actors get to end on their own (and report) before they are killed
# seconds a reading of the machine's memory, and of an actor's, is reported again before it is read
# anew: reading /proc/meminfo cost a node's report more CPU than the rest of it, and an actor's
# /proc/<pid>/statm 50 us more each (the memory limits are the pool's, checked on their own)
_MEMORY_PERIOD = 5.0
logger = logging.getLogger("parl_lite.cluster")
_T = TypeVar("_T")

SESSION_HELLO = {"client_id": hello.ID, "files": hello.TEXTS}
ACTOR_HELLO = {"client_id": hello.ID, "actor_id": hello.ID, "reservation": hello.TEXT,
               "max_memory": hello.optional(hello.MEGABYTES), "class_name": hello.TEXT}


class _Reading(Generic[_T]):
    """A value that ``read()`` gives, read again when asked ``_MEMORY_PERIOD`` or more after the last
    read (the first read is at the first ask)."""

    def __init__(self, read: Callable[[], _T]) -> None:
        self._read = read
        self._value: _T | None = None
        self._read_at = -math.inf

    def get(self) -> _T:
        if self._value is None or time.monotonic() - self._read_at >= _MEMORY_PERIOD:
            self._value, self._read_at = self._read(), time.monotonic()
        return self._value


class _Actor:
    """What the node knows of one hosted actor."""

    def __init__(self, actor_id: str, class_name: str, session: "_ClientSession", reservation: str,
                 channel: WorkerProcess) -> None:
        self.id = actor_id
        self.class_name = class_name
        self.session = session
        self.client_id = session.client_id
        self.reservation = reservation
        self.channel = channel
        self.state = "starting"
        self.last_error: str | None = None
        self.stopped_because: str | None = None  # set when the node stops it (its client left)
        self.new_output: list[str] = []
        self.reported: dict[str, Any] | None = None  # its description as the master last received it
        # the host's figures (calls served, last error, state): its latest note, then what its serve
        # call returned
        self.figures: dict[str, Any] = {}
        self.rss_mb = _Reading(lambda: round(channel.resident_mb(), 1))  # its worker's own memory, MB

    def describe(self) -> dict[str, Any]:
        figures = self.figures
        if self.state in ("starting", "alive"):
            self.state = figures.get("state", self.state)
        return {"id": self.id, "class": self.class_name, "pid": self.channel.pid, "state": self.state,
                "calls_served": figures.get("calls_served", 0), "rss_mb": self.rss_mb.get(),
                "last_error": self.last_error or figures.get("last_error"), "client": self.client_id}


class _ClientSession:
    """One client's stay on this node: its shipped files and the connection verdicts go on."""

    def __init__(self, client_id: str, folder: Path, framed: wire.FramedSocket) -> None:
        self.client_id = client_id
        self.folder = folder
        self.framed = framed
        self.send_lock = threading.Lock()
        self.open = True
        self.removed = False  # its folder is gone


class NodePool(LocalPool):
    """The pool of a node's workers: no shared memory kept or warmed up for arguments (they come over
    TCP), its status published every few seconds, its actors' output and its hosts' figures handed to
    ``on_output`` and ``on_figures`` (the node's)."""

    shm_reserve_bytes = 0
    large_messages = False
    # the master has the node's figures every report, and a node's workers' ends and output are read
    # as they come, so its pool's housekeeper need not wake twice a second
    status_period = 2.0

    def __init__(self, on_output: Callable[[WorkerProcess, str, str], None],
                 on_figures: Callable[[WorkerProcess, Any], None]) -> None:
        self._output, self._figures = on_output, on_figures
        super().__init__(num_workers=0)

    def on_output(self, worker: WorkerProcess, stream_name: str, text: str) -> None:
        self._output(worker, stream_name, text)

    def on_note(self, worker: WorkerProcess, value: Any) -> None:
        self._figures(worker, value)


class NodeAgent:
    """Hosts actors for the cluster's clients (see the module docstring).

    Args:
        master: the master's ``host:port``.
        token: the cluster's shared secret.
        cpus: actors this node hosts at once.
        host: interface to bind for clients.
        port: TCP port for clients (0: the OS picks).
        work_dir: the node's working folder (its private folder is made inside).
        max_ship_mb: limit on a client's shipped files.
        limits: the handshake and connection bounds, and the reconnect grace (default:
            :meth:`Limits.from_environment`).
    """

    def __init__(self, master: str, token: bytes, cpus: int, host: str = "127.0.0.1", port: int = 0,
                 work_dir: str = ".", max_ship_mb: float = DEFAULT_LIMIT_MB, limits: Limits | None = None) -> None:
        self.cpus = cpus
        self.max_ship_mb = max_ship_mb
        self.limits = limits or Limits.from_environment()
        self.hostname = socket.gethostname()
        self._master_address = master
        self._token = token
        self.private = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}_", dir=work_dir))  # 0700
        # relative to the working folder, which the workers start in too: an absolute path may be
        # over the 107 bytes a Unix socket address holds
        self.handoff_path = os.path.relpath(self.private / "handoff.sock")
        self.stopped = threading.Event()
        self._lock = threading.Condition()  # notified when an actor has ended and when a session opens
        self._master_lock = threading.Lock()  # sending to the master, and replacing its connection
        self._report_lock = threading.Lock()  # one report at a time
        self._reported_to: wire.FramedSocket | None = None  # the master connection the last report went to
        self._reported_reservations: dict[str, str] = {}  # the reservations it last listed
        self._memory = _Reading(memory_mb)  # the machine's (used, total) MB, as reported
        self._actors: dict[str, _Actor] = {}
        self._by_pid: dict[int, _Actor] = {}
        self._ended: list[dict[str, Any]] = []  # ended actors not yet reported
        self._sessions: dict[str, _ClientSession] = {}  # client id -> its open session here
        self._links: dict[int, socket.socket] = {}  # pid of an actor host -> its link to the hand-over socket
        self._spares: list[WorkerProcess] = []  # ActorHosts built ahead of need, one per free CPU
        self.pool = self._start_pool()
        try:
            self._handoff = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._handoff.bind(self.handoff_path)
            self._handoff.listen(64)
            threading.Thread(target=self._accept_links, daemon=True, name="parl_lite-handoff").start()
            self._server = Server(host, port, token, {"session": Role(self._serve_session, SESSION_HELLO),
                                                      "actor": Role(self._serve_actor, ACTOR_HELLO)}, self.limits)
            self._serve_address = f"{self._advertised_host(host, master)}:{self._server.port}"
            self._master, reply = self._join(None)
        except BaseException:
            self.pool.shutdown()
            shutil.rmtree(self.private, ignore_errors=True)
            raise
        self.node_id = reply["node_id"]
        # until now its server names no node and accepts nothing: no client can be relayed to it
        self._server.serve_as(wire.node_identity(self.node_id))
        self.address = f"{host}:{self._server.port}"
        for target, name in ((self._keep_master, "master"), (self._report, "report"), (self._beat, "beat"),
                             (self._keep_spares, "spares")):
            threading.Thread(target=target, daemon=True, name=f"parl_lite-{name}").start()

    def _start_pool(self) -> NodePool:
        """The pool of this node's workers: no idle workers of its own (the spares are), no shared
        memory kept or warmed up for arguments (they come over TCP), the actor host imported before
        the fork, its status published every few seconds, its hosts' figures taken from their notes."""
        os.environ[PRELOAD_VARIABLE] = ActorHost.__module__  # read when the pool starts its zygote
        try:
            return NodePool(self._on_output, self._on_figures)
        finally:
            del os.environ[PRELOAD_VARIABLE]

    @staticmethod
    def _advertised_host(host: str, master: str) -> str:
        if host not in ("0.0.0.0", "", "::"):
            return host
        # bound to every interface: clients reach us where the master's machine reaches us
        probe = socket.create_connection(wire.split_address(master), timeout=5)
        try:
            return probe.getsockname()[0]
        finally:
            probe.close()

    # --- client sessions: shipped files and verdicts ---------------------------------------------
    def _serve_session(self, framed: wire.FramedSocket, hello: dict[str, Any]) -> None:
        client_id = hello["client_id"]
        framed.limit = int(self.max_ship_mb * 2**20) + HELLO_FRAME_BYTES
        framed.send_json({"ok": True})
        folder = None
        try:
            _, contents = framed.receive()
            folder = self._new_folder(client_id)
            write_files(folder, hello["files"], [content.data for content in contents], self.max_ship_mb)
        except (OSError, ValueError) as exc:  # ValueError: over the limit, or a name outside the folder
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            try:
                framed.send_json({"ok": False, "error": str(exc)})
            except OSError:
                pass
            framed.close()
            return
        except EOFError:
            framed.close()
            return
        session = _ClientSession(client_id, folder, framed)
        with session.send_lock:  # the client reads our "ok" before any beat the session is now due
            with self._lock:
                given_up = self._sessions.get(client_id)
                self._sessions[client_id] = session
                self._lock.notify_all()  # the beat starts
            if given_up is not None:  # the client took this node for dead: its thread ends it
                given_up.framed.close()
            framed.send_json({"ok": True})
        try:
            while True:
                framed.receive()  # the client sends nothing more: this waits for it to leave
        except (EOFError, OSError, ValueError):
            pass
        self._end_session(session)

    def _new_folder(self, client_id: str) -> Path:
        """A new work folder for a session of ``client_id`` (``client-<id>``, or ``client-<id>.<n>``
        while an earlier session's folder is being removed)."""
        attempt = 0
        while True:
            folder = self.private / (f"client-{client_id}" + (f".{attempt}" if attempt else ""))
            try:
                folder.mkdir()
                return folder
            except FileExistsError:
                attempt += 1

    def _end_session(self, session: _ClientSession) -> None:
        """The session's client left or gave up on this node: its idle actors end by themselves (their
        connections closed too); those still busy a moment later are killed (they would run on,
        holding their CPUs and the folder). Then the folder is removed."""
        session.framed.close()
        with self._lock:
            session.open = False
            if self._sessions.get(session.client_id) is session:
                del self._sessions[session.client_id]
            self._lock.wait_for(lambda: not self._actors_of(session), timeout=_END_BY_ITSELF)
            actors = self._actors_of(session)
        for actor in actors:
            actor.stopped_because = _CLIENT_LEFT
            actor.channel.kill(CLOSED)
        self._remove_folder_if_done(session)

    def _actors_of(self, session: _ClientSession) -> list[_Actor]:
        return [actor for actor in self._actors.values() if actor.session is session]

    def _remove_folder_if_done(self, session: _ClientSession) -> None:
        with self._lock:
            if session.open or session.removed or self._actors_of(session):
                return
            session.removed = True
        shutil.rmtree(session.folder, ignore_errors=True)

    # --- actors ---------------------------------------------------------------------------------
    def _serve_actor(self, framed: wire.FramedSocket, hello: dict[str, Any]) -> None:
        client_id, actor_id = hello["client_id"], hello["actor_id"]
        with self._lock:
            session = self._sessions.get(client_id)
        if session is None:
            framed.send_json({"ok": False, "error": "no session of this client (its files were not shipped)"})
            framed.close()
            return
        try:
            channel, link = self._take_spare()
        except Exception as exc:
            framed.send_json({"ok": False, "error": f"this node cannot start a worker: {exc}"})
            framed.close()
            return
        self.pool.limit_memory(channel, hello.get("max_memory"))
        actor = _Actor(actor_id, hello["class_name"], session, hello["reservation"], channel)
        with self._lock:
            self._actors[actor.id] = actor
            self._by_pid[channel.pid] = actor
            ended_meanwhile = not session.open
        # the client sends its __init__ call at once: it waits in the socket until the worker takes it
        framed.send_json({"ok": True, "pid": channel.pid, "host": self.hostname})
        with link:  # the socket stays queued on the link for the host, also after our end is closed
            try:
                socket.send_fds(link, [b"F"], [framed.sock.fileno()])
            except OSError:
                pass  # the host died: its serve call fails, and the client hears why
        framed.sock.close()  # not framed.close(): its shutdown would end the connection for the host too
        future = channel.call("serve", (str(session.folder),), {})
        future.add_done_callback(lambda done: self._actor_ended(actor, done))
        if ended_meanwhile:  # the session ended before the actor was listed: it would be missed
            actor.stopped_because = _CLIENT_LEFT
            channel.kill(CLOSED)

    def _take_spare(self) -> tuple[WorkerProcess, socket.socket]:
        """A spare ActorHost and its link (its replacement is built in the background), or one built now."""
        with self._lock:
            while self._spares:
                spare = self._spares.pop()
                spare.read_available()  # a spare's death is seen when its connection is read
                if spare.alive:
                    return spare, self._link_of(spare)
                self._drop(spare)
        host = self.pool.create_actor(ActorHost, (self.handoff_path,), {}, ActorOptions())
        with self._lock:
            return host, self._link_of(host)

    def _link_of(self, host: WorkerProcess) -> socket.socket:
        """The link ``host`` made to the hand-over socket as it was built (self._lock is held); without
        one, the host is closed (the keeper builds another spare)."""
        linked = self._lock.wait_for(lambda: host.pid in self._links or self.stopped.is_set(), timeout=_LINK_WAIT)
        link = self._links.pop(host.pid, None)
        if link is None:
            self._drop(host)
            raise RuntimeError("the node is stopping" if linked else
                               f"its actor host did not link to the hand-over socket in {_LINK_WAIT:g} s")
        return link

    def _drop(self, host: WorkerProcess) -> None:
        """Close an actor host no actor will take, and its link if it made one (self._lock is held);
        the spare keeper builds another."""
        host.close()
        link = self._links.pop(host.pid, None)
        if link is not None:
            link.close()
        self._lock.notify_all()

    def _spares_missing(self) -> int:
        return self.cpus - len(self._actors) - len(self._spares)  # self._lock is held

    def _keep_spares(self) -> None:
        """Keep a spare ActorHost for each CPU no actor takes."""
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self.stopped.is_set() or self._spares_missing() > 0)
            if self.stopped.is_set():
                return
            try:
                spare = self.pool.create_actor(ActorHost, (self.handoff_path,), {}, ActorOptions())
            except Exception as error:  # the pool shut down, or forks fail now: actors are built on demand
                if self.stopped.wait(_SPARE_RETRY):
                    return
                logger.warning("could not build a spare actor host (%s); trying again", error)
                continue
            with self._lock:
                self._spares.append(spare)

    def _accept_links(self) -> None:
        """Take each actor host's link to the hand-over socket, made as the host was built: the
        client's socket goes down it when an actor comes. Only this user's processes can connect
        (the socket is in the node's private folder)."""
        pid_bytes = struct.calcsize(LINK_PID_FORMAT)
        while True:
            try:
                connection, _ = self._handoff.accept()
            except OSError as error:
                if self.stopped.is_set() or error.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS,
                                                                errno.ENOMEM, errno.ECONNABORTED):
                    return  # closed
                time.sleep(0.05)  # out of file descriptors: a host waits a moment, then links
                continue
            try:  # one deadline for the whole pid, not one per read
                said = wire.receive_exactly(connection, pid_bytes, time.monotonic() + _LINK_WAIT)
                connection.settimeout(None)
            except (OSError, EOFError):
                connection.close()
                continue
            (pid,) = struct.unpack(LINK_PID_FORMAT, said)
            with self._lock:
                previous = self._links.pop(pid, None)  # a pid reused after its host died unlinked
                self._links[pid] = connection
                self._lock.notify_all()
            if previous is not None:
                previous.close()

    def _actor_ended(self, actor: _Actor, done: Any) -> None:
        error = done.exception()
        if error is None:
            actor.figures = done.result()
        if error is None or actor.stopped_because:
            kind, text = "closed", actor.stopped_because or ""
        elif isinstance(error, MemoryLimitError):
            kind, text = "memory", str(error)
        elif isinstance(error, ActorDiedError):
            kind, text = "exited", ""
        else:
            kind, text = "exited", f"{type(error).__name__}: {error}"
        actor.state = "closed" if kind == "closed" else "dead"
        if kind != "closed":
            actor.last_error = actor.last_error or (text or "the worker process exited")
        session = actor.session
        with session.send_lock:
            try:
                session.framed.send_json({"type": "ended", "actor_id": actor.id, "kind": kind, "text": text})
            except OSError:
                pass
        description = actor.describe()
        actor.channel.close()
        with self._lock:
            self._actors.pop(actor.id, None)
            self._by_pid.pop(actor.channel.pid, None)
            self._ended.append({"description": description, "output": actor.new_output,
                                "reservation": actor.reservation})
            self._lock.notify_all()
        self._remove_folder_if_done(session)

    def _on_output(self, worker: WorkerProcess, stream_name: str, text: str) -> None:
        with self._lock:
            actor = self._by_pid.get(worker.pid)
            if actor is not None:
                actor.new_output.extend(text.splitlines())
                del actor.new_output[:-_OUTPUT_LINES]

    def _on_figures(self, worker: WorkerProcess, figures: Any) -> None:
        """An actor host's note: its figures (:meth:`ActorHost.serve`)."""
        with self._lock:
            actor = self._by_pid.get(worker.pid)
            if actor is not None and isinstance(figures, dict):
                actor.figures = figures

    # --- the master -----------------------------------------------------------------------------
    def _join(self, node_id: str | None,
              timeout: float = wire.CONNECT_TIMEOUT) -> tuple[wire.FramedSocket, dict[str, Any]]:
        """Register with the master (again, under ``node_id``, when it comes back).

        Raises:
            ClusterError: the master cannot be reached, refused this node, or accepted it without
                giving it an id.
        """
        framed, reply = wire.open_connection(self._master_address, self._token, "node", timeout=timeout,
                                             cpus=self.cpus, host=self.hostname, pid=os.getpid(),
                                             serve_address=self._serve_address, node_id=node_id)
        if not hello.ID.check(reply.get("node_id")):
            framed.close()
            shown = repr(reply)
            raise wire.ClusterError(f"the master at {self._master_address} accepted this node without giving it "
                                    f"a node id ({hello.ID.what}); its reply: "
                                    f"{shown if len(shown) <= 200 else shown[:197] + '...'}")
        # a report that cannot be sent for this long ends the connection (its sender would block,
        # and a half-sent report cannot be taken back): the node then reconnects
        seconds, fraction = divmod(wire.SILENCE_LIMIT, 1)
        framed.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                               struct.pack("ll", int(seconds), int(fraction * 1e6)))
        return framed, reply

    def _keep_master(self) -> None:
        """Watch the master's connection; when it ends, rejoin within the grace, or stop the node
        (also if this thread fails: a node that cannot rejoin must not run on for ever)."""
        try:
            self._watch_master()
        except BaseException:
            logger.exception("the node's watch over its master failed: stopping this node's actors and exiting")
            self.stopped.set()

    def _watch_master(self) -> None:
        while True:
            try:
                while True:
                    self._master.receive()  # the master sends nothing: this returns when it goes
            except (EOFError, OSError, ValueError):
                pass
            if self.stopped.is_set():
                return
            grace = self.limits.reconnect_grace
            logger.warning("lost the master at %s: trying to rejoin for %g s (the actors keep serving)",
                           self._master_address, grace)
            refusal = self._rejoin(time.monotonic() + grace)
            if refusal is None:
                continue
            if not self.stopped.is_set():
                ending = (f"the master at {self._master_address} did not take this node back within its reconnect "
                          f"grace ({grace:g} s); it came back but refused it: {refusal}" if refusal
                          else f"the master did not come back within {grace:g} s")
                logger.warning("%s: stopping this node's actors and exiting", ending)
            self.stopped.set()
            return

    def _rejoin(self, deadline: float) -> str | None:
        """Rejoin the master before ``deadline``: None once it did, else why not (the master's last
        refusal; empty if it never answered)."""
        delay = _REJOIN_FIRST_DELAY
        refusal = ""
        while not self.stopped.wait(delay):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return refusal
            try:
                framed, reply = self._join(self.node_id, timeout=min(wire.CONNECT_TIMEOUT, remaining))
            except wire.ClusterError as error:
                if not _is_refusal(error):
                    logger.debug("rejoining the master failed: %s", error)
                elif str(error) != refusal:  # said once, not at every try
                    refusal = str(error)
                    logger.warning("the master is back but refused this node: %s (trying again for %.0f s)",
                                   error, max(deadline - time.monotonic(), 0.0))
                delay = min(2 * delay, _REJOIN_MOST_DELAY, max(deadline - time.monotonic(), 0.0))
                continue
            with self._master_lock:
                old, self._master = self._master, framed
                self.node_id = reply["node_id"]
            self._server.serve_as(wire.node_identity(self.node_id))
            old.close()
            logger.info("rejoined the master at %s as node %s", self._master_address, self.node_id)
            self._send_report()  # at once: the master learns our actors and their CPUs
            return None
        return refusal

    def _report(self) -> None:
        while not self.stopped.wait(wire.HEARTBEAT_PERIOD):
            self._send_report()

    def _send_report(self) -> None:
        """Report to the master: memory, load, new output, ended actors, and what changed since the
        last report it received (all of it to a connection not yet reported to)."""
        with self._report_lock:
            with self._lock:
                actors = list(self._actors.values())
                ended, self._ended = self._ended, []
            with self._master_lock:
                master = self._master
            full = master is not self._reported_to
            output: dict[str, list[str]] = {}
            changed = []
            for actor in actors:
                description = actor.describe()
                if full or description != actor.reported:
                    changed.append((actor, description))
                with self._lock:
                    lines, actor.new_output = actor.new_output, []
                if lines:
                    output[actor.id] = lines
            descriptions = [description for _, description in changed]
            for record in ended:
                descriptions.append(record["description"])
                if record["output"]:
                    output[record["description"]["id"]] = record["output"]
            used, total = self._memory.get()
            report = {"type": "report", "mem_used_mb": used, "mem_total_mb": total, "load1": os.getloadavg()[0],
                      "actors": descriptions, "output": output,
                      "released": [record["reservation"] for record in ended]}
            reservations = {actor.reservation: actor.client_id for actor in actors}
            if full or reservations != self._reported_reservations:
                report["reservations"] = reservations
            try:
                master.send_json(report)
            except OSError:  # lost (or too slow): the ended actors go in the next report, to whichever master
                with self._lock:
                    self._ended[:0] = ended
                self._reported_to = None
                master.close()  # _keep_master sees it and rejoins
                return
            for actor, description in changed:
                actor.reported = description
            self._reported_reservations, self._reported_to = reservations, master

    def _beat(self) -> None:
        """Beat on every client's session (apart from the reports: a master that does not read must
        not silence us to the clients); with no session open, sleep until one opens."""
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._sessions or self.stopped.is_set())
            if self.stopped.wait(wire.HEARTBEAT_PERIOD):
                return
            with self._lock:
                sessions = list(self._sessions.values())
            for session in sessions:
                with session.send_lock:
                    try:
                        session.framed.send_json({"type": "alive"})
                    except OSError:
                        pass

    def close(self) -> None:
        """Stop every actor, remove the private folder."""
        self.stopped.set()
        self._server.close()
        self._handoff.close()
        with self._lock:
            links, self._links = list(self._links.values()), {}
        for link in links:
            link.close()
        with self._master_lock:
            self._master.close()
        with self._lock:
            sessions = list(self._sessions.values())
            self._lock.notify_all()  # the spare keeper sees the stop
        for session in sessions:
            session.framed.close()
        try:
            self.pool.shutdown()
        finally:
            shutil.rmtree(self.private, ignore_errors=True)


def _is_refusal(error: wire.ClusterError) -> bool:
    """The master answered and turned this node down (another token, another version, a reply
    without a node id), as opposed to not answering (not back yet: the error comes from the socket)."""
    return isinstance(error, (wire.AuthenticationError, wire.VersionMismatchError)) or error.__cause__ is None


def main(argv: list[str] | None = None) -> None:
    """``python -m parl_lite.ext.cluster.node``: what ``parl-lite connect`` runs in the background."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True, help="the master's host:port")
    parser.add_argument("--cpus", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token-file", default=None)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--reconnect-grace", type=float, default=None,
                        help="seconds to retry a master that went away (default: $PARL_LITE_RECONNECT_GRACE, else 60)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s node %(levelname)s %(message)s")
    cwd = os.getcwd()
    sys.path[:] = [entry for entry in sys.path if entry not in ("", cwd)]  # actors see shipped files only
    try:
        limits = Limits.from_environment(reconnect_grace=args.reconnect_grace)
        agent = NodeAgent(args.address, load_token(args.token_file), args.cpus, args.host, args.port, cwd,
                          limits=limits)
    except (wire.ClusterError, OSError, ValueError) as error:  # the log's last line is what `connect` shows
        logger.error("%s", error)
        raise SystemExit(1) from None
    logger.info("node %s serving %d CPU(s) on %s", agent.node_id, args.cpus, agent.address)
    run_until_stopped(args.ready_file, {"pid": os.getpid(), "address": agent.address, "node_id": agent.node_id},
                      agent.stopped)
    agent.close()


if __name__ == "__main__":
    main()
