"""The node agent (``parl-lite connect``, and the master machine's own CPUs in ``parl-lite start``).

It hosts actors in a :class:`~parl_lite.remote.pool.LocalPool`, one worker process each, and lets
clients reach them directly: a client's actor connection is authenticated here, then its socket is
handed to the worker (:mod:`parl_lite.ext.cluster.actor_host`). The node watches the workers
(memory limit, death) through the pool, tells the client on its session connection why an actor
ended, and reports CPUs, memory, load and actors to the master every half second (and beats on each
client's session, so that a client takes a node silent for 3 s for dead, as the master does).

Files live in a private folder under the node's working folder: one work folder per client (removed
when the client leaves), the hand-over socket and the actors' statistics. When the master goes away
the node stops its actors and exits (it does not retry: restart it with ``parl-lite connect``).
"""
import argparse
import json
import logging
import os
import re
import secrets
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.actor_host import ActorHost
from parl_lite.ext.cluster.local_state import load_token
from parl_lite.ext.cluster.server import Server, run_until_stopped
from parl_lite.ext.cluster.shipping import DEFAULT_LIMIT_MB, write_files
from parl_lite.remote.backend import ActorOptions
from parl_lite.remote.errors import ActorDiedError, MemoryLimitError
from parl_lite.remote.pool import LocalPool, WorkerProcess

__all__ = ["NodeAgent", "PRIVATE_PREFIX"]

_ID = re.compile(r"[0-9a-f]{8,32}")  # client and actor ids (they name files)
PRIVATE_PREFIX = ".parl_lite_node_"  # + pid + "_" + random: the node's private folder in its work dir
_OUTPUT_LINES = 500
logger = logging.getLogger("parl_lite.cluster")


class _Actor:
    """What the node knows of one hosted actor."""

    def __init__(self, actor_id: str, class_name: str, client_id: str, reservation: str,
                 channel: WorkerProcess, stats_path: Path) -> None:
        self.id = actor_id
        self.class_name = class_name
        self.client_id = client_id
        self.reservation = reservation
        self.channel = channel
        self.stats_path = stats_path
        self.state = "starting"
        self.ticket = ""  # claims the client's socket at the hand-over
        self.last_error: str | None = None
        self.new_output: list[str] = []

    def describe(self) -> dict[str, Any]:
        try:
            stats = json.loads(self.stats_path.read_text())
        except (OSError, ValueError):
            stats = {}
        if self.state in ("starting", "alive"):
            self.state = stats.get("state", self.state)
        return {"id": self.id, "class": self.class_name, "pid": self.channel.pid, "state": self.state,
                "calls_served": stats.get("calls_served", 0), "rss_mb": round(self.channel.resident_mb(), 1),
                "last_error": self.last_error or stats.get("last_error"), "client": self.client_id}


class _ClientSession:
    def __init__(self, client_id: str, folder: Path, framed: wire.FramedSocket) -> None:
        self.client_id = client_id
        self.folder = folder
        self.framed = framed
        self.send_lock = threading.Lock()
        self.open = True


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
    """

    def __init__(self, master: str, token: bytes, cpus: int, host: str = "127.0.0.1", port: int = 0,
                 work_dir: str = ".", max_ship_mb: float = DEFAULT_LIMIT_MB) -> None:
        self.cpus = cpus
        self.max_ship_mb = max_ship_mb
        self.hostname = socket.gethostname()
        self.private = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}_", dir=work_dir))  # 0700
        # relative to the working folder, which the workers start in too: an absolute path may be
        # over the 107 bytes a Unix socket address holds
        self.handoff_path = os.path.relpath(self.private / "handoff.sock")
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self._actors: dict[str, _Actor] = {}
        self._by_pid: dict[int, _Actor] = {}
        self._ended: list[dict[str, Any]] = []  # ended actors not yet reported
        self._sessions: dict[str, _ClientSession] = {}
        self._handoffs: dict[str, socket.socket] = {}
        self.pool = LocalPool(num_workers=cpus, on_output=self._on_output)
        try:
            self._handoff = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._handoff.bind(self.handoff_path)
            self._handoff.listen(64)
            threading.Thread(target=self._hand_over, daemon=True, name="parl_lite-handoff").start()
            self._server = Server(host, port, token, {"session": self._serve_session, "actor": self._serve_actor})
            self._master, reply = wire.open_connection(
                master, token, "node", cpus=cpus, host=self.hostname, pid=os.getpid(),
                serve_address=f"{self._advertised_host(host, master)}:{self._server.port}")
        except BaseException:
            self.pool.shutdown()
            shutil.rmtree(self.private, ignore_errors=True)
            raise
        self.node_id = reply["node_id"]
        self.address = f"{host}:{self._server.port}"
        threading.Thread(target=self._watch_master, daemon=True, name="parl_lite-master").start()
        threading.Thread(target=self._report, daemon=True, name="parl_lite-report").start()

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
        client_id = str(hello.get("client_id"))
        if not _ID.fullmatch(client_id):
            framed.send_json({"ok": False, "error": f"malformed client id {client_id!r}"})
            framed.close()
            return
        framed.send_json({"ok": True})
        _, contents = framed.receive()
        folder = self.private / f"client-{client_id}"
        try:
            folder.mkdir()
            write_files(folder, [str(name) for name in hello.get("files", [])], [content.data for content in contents],
                        self.max_ship_mb)
        except (OSError, ValueError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            framed.send_json({"ok": False, "error": str(exc)})
            framed.close()
            return
        session = _ClientSession(client_id, folder, framed)
        with self._lock:
            self._sessions[client_id] = session
        framed.send_json({"ok": True})
        try:
            while True:
                framed.receive()  # the client sends nothing more: this waits for it to leave
        except (EOFError, OSError):
            pass
        framed.close()
        with self._lock:
            session.open = False
        self._forget_client_if_done(client_id)

    def _forget_client_if_done(self, client_id: str) -> None:
        with self._lock:
            session = self._sessions.get(client_id)
            if session is None or session.open or any(a.client_id == client_id for a in self._actors.values()):
                return
            del self._sessions[client_id]
        shutil.rmtree(session.folder, ignore_errors=True)

    # --- actors ---------------------------------------------------------------------------------
    def _serve_actor(self, framed: wire.FramedSocket, hello: dict[str, Any]) -> None:
        client_id, actor_id = str(hello.get("client_id")), str(hello.get("actor_id"))
        with self._lock:
            session = self._sessions.get(client_id)
        if session is None or not session.open or not _ID.fullmatch(actor_id):
            framed.send_json({"ok": False, "error": "no session of this client (its files were not shipped) "
                                                    f"or a malformed actor id {actor_id!r}"})
            framed.close()
            return
        try:
            channel = self.pool.create_actor(ActorHost, (), {}, ActorOptions(max_memory=hello.get("max_memory")))
        except Exception as exc:
            framed.send_json({"ok": False, "error": f"this node cannot start a worker: {exc}"})
            framed.close()
            return
        actor = _Actor(actor_id, str(hello.get("class_name")), client_id, str(hello.get("reservation")),
                       channel, self.private / f"{actor_id}.json")
        ticket = actor.ticket = secrets.token_hex(16)
        with self._lock:
            self._actors[actor.id] = actor
            self._by_pid[channel.pid] = actor
            self._handoffs[ticket] = framed.sock
        framed.send_json({"ok": True})
        future = channel.call("serve", (self.handoff_path, ticket, str(session.folder), str(actor.stats_path),
                                        self.hostname), {})
        future.add_done_callback(lambda done: self._actor_ended(actor, session, done))

    def _hand_over(self) -> None:
        """Give each worker the client socket its ticket names."""
        while True:
            try:
                connection, _ = self._handoff.accept()
            except OSError:
                return
            with connection:
                try:
                    connection.settimeout(5)
                    ticket = connection.recv(32).decode(errors="replace")
                except OSError:
                    continue
                with self._lock:
                    client_socket = self._handoffs.pop(ticket, None)
                if client_socket is None:
                    continue
                try:
                    socket.send_fds(connection, [b"F"], [client_socket.fileno()])
                except OSError:
                    pass
                client_socket.close()

    def _actor_ended(self, actor: _Actor, session: _ClientSession, done: Any) -> None:
        error = done.exception()
        if error is None:
            kind, text = "closed", ""
        elif isinstance(error, MemoryLimitError):
            kind, text = "memory", str(error)
        elif isinstance(error, ActorDiedError):
            kind, text = "exited", ""
        else:
            kind, text = "exited", f"{type(error).__name__}: {error}"
        actor.state = "closed" if kind == "closed" else "dead"
        if kind != "closed":
            actor.last_error = actor.last_error or (text or "the worker process exited")
        with session.send_lock:
            try:
                session.framed.send_json({"type": "ended", "actor_id": actor.id, "kind": kind, "text": text})
            except OSError:
                pass
        description = actor.describe()
        actor.channel.close()
        with self._lock:
            unclaimed = self._handoffs.pop(actor.ticket, None)  # the worker died before taking it
            self._actors.pop(actor.id, None)
            self._by_pid.pop(actor.channel.pid, None)
            self._ended.append({"description": description, "output": actor.new_output,
                                "reservation": actor.reservation})
        if unclaimed is not None:
            unclaimed.close()
        try:
            actor.stats_path.unlink()
        except FileNotFoundError:
            pass
        self._forget_client_if_done(actor.client_id)

    def _on_output(self, worker: WorkerProcess, stream_name: str, text: str) -> None:
        with self._lock:
            actor = self._by_pid.get(worker.pid)
            if actor is not None:
                actor.new_output.extend(text.splitlines())
                del actor.new_output[:-_OUTPUT_LINES]

    # --- the master -----------------------------------------------------------------------------
    def _report(self) -> None:
        while not self.stopped.wait(wire.HEARTBEAT_PERIOD):
            with self._lock:
                actors = list(self._actors.values())
                ended, self._ended = self._ended, []
                sessions = [session for session in self._sessions.values() if session.open]
            for session in sessions:  # the clients take a silent node for dead
                with session.send_lock:
                    try:
                        session.framed.send_json({"type": "alive"})
                    except OSError:
                        pass
            output: dict[str, list[str]] = {}
            descriptions = []
            for actor in actors:
                descriptions.append(actor.describe())
                with self._lock:
                    lines, actor.new_output = actor.new_output, []
                if lines:
                    output[actor.id] = lines
            for record in ended:
                descriptions.append(record["description"])
                if record["output"]:
                    output[record["description"]["id"]] = record["output"]
            used, total = _memory_mb()
            report = {"type": "report", "mem_used_mb": used, "mem_total_mb": total, "load1": os.getloadavg()[0],
                      "actors": descriptions, "output": output,
                      "reservations": [actor.reservation for actor in actors],
                      "released": [record["reservation"] for record in ended]}
            try:
                self._master.send_json(report)
            except OSError:
                self.stopped.set()

    def _watch_master(self) -> None:
        try:
            while True:
                self._master.receive()
        except (EOFError, OSError):
            pass
        if not self.stopped.is_set():
            logger.warning("the master is gone: stopping this node's actors and exiting")
        self.stopped.set()

    def close(self) -> None:
        """Stop every actor, remove the private folder."""
        self.stopped.set()
        self._server.close()
        self._handoff.close()
        self._master.close()
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            session.framed.close()
        try:
            self.pool.shutdown()
        finally:
            shutil.rmtree(self.private, ignore_errors=True)


def _memory_mb() -> "tuple[float, float]":
    fields = {}
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            name, value = line.split(":", 1)
            fields[name] = int(value.split()[0]) / 1024
    return round(fields["MemTotal"] - fields.get("MemAvailable", 0), 1), round(fields["MemTotal"], 1)


def main(argv: list[str] | None = None) -> None:
    """``python -m parl_lite.ext.cluster.node``: what ``parl-lite connect`` runs in the background."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True, help="the master's host:port")
    parser.add_argument("--cpus", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token-file", default=None)
    parser.add_argument("--ready-file", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s node %(levelname)s %(message)s")
    cwd = os.getcwd()
    sys.path[:] = [entry for entry in sys.path if entry not in ("", cwd)]  # actors see shipped files only
    try:
        agent = NodeAgent(args.address, load_token(args.token_file), args.cpus, args.host, args.port, cwd)
    except (wire.ClusterError, OSError, ValueError) as error:  # the log's last line is what `connect` shows
        logger.error("%s", error)
        raise SystemExit(1) from None
    logger.info("node %s serving %d CPU(s) on %s", agent.node_id, args.cpus, agent.address)
    run_until_stopped(args.ready_file, {"pid": os.getpid(), "address": agent.address, "node_id": agent.node_id},
                      agent.stopped)
    agent.close()


if __name__ == "__main__":
    main()
