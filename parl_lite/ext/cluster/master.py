"""The cluster master (``parl-lite start``): knows the nodes, places actors, keeps the status.

Nodes report every half second (CPUs, memory, load, the actors whose state changed and new
output); a node whose connection drops, or that has not reported for :data:`NODE_TIMEOUT` seconds,
is dead: its CPUs leave the cluster (its actors' clients learn it from their own connections). A
node whose reports are late (:data:`SUSPECT_AFTER` seconds of silence), or that rejoins after it
was taken for dead, is *suspect*: it is handed no new actor until it has reported on time for
:data:`PROBATION` seconds (a node that flaps, stopped and continued, gets no work meanwhile). A node
that comes back (it retries for its reconnect grace) rejoins under its id, with the actors it still
hosts. A master that did not run for a while (stopped, swapped out) does not take its nodes for
dead or suspect: their reports are waiting in its sockets. Clients ask for a placement before each
actor: the node with the most free CPUs gets it, and one CPU is reserved until the node reports the
actor gone. Everything is kept in memory; :meth:`Master.status` and :meth:`Master.actor_output`
give it to ``parl-lite status`` and the web monitor; :meth:`Master.capacity` is the cheap question
of how many actors could be placed now.
"""
import argparse
import collections
import logging
import math
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from parl_lite.ext.cluster import hello, wire
from parl_lite.ext.cluster.limits import CONTROL_FRAME_BYTES, Limits
from parl_lite.ext.cluster.local_state import load_token
from parl_lite.ext.cluster.server import Role, Server, run_until_stopped
from parl_lite.ext.monitor.cluster import serve_master_monitor

__all__ = ["Master", "NODE_TIMEOUT", "SUSPECT_AFTER", "PROBATION"]

NODE_TIMEOUT = wire.SILENCE_LIMIT  # seconds without a report after which a node is taken for dead
SUSPECT_AFTER = 2 * wire.HEARTBEAT_PERIOD  # seconds without a report after which a node is suspect ...
PROBATION = 10.0  # ... until it has reported on time for this long
_RESERVATION_GRACE = 5.0  # seconds a placement may wait for its node to report the actor
_LOAD_POINTS = 120  # load samples kept per node: the last 10 minutes
_LOAD_EVERY = 5.0  # seconds between two kept samples (reports come every 0.5 s)
_OUTPUT_LINES = 500
_ENDED_KEPT = 256  # ended actors (and their output) kept for the status; older ones are forgotten
_ENDED_STATES = ("dead", "closed")
_WATCH_PERIOD = 0.1  # seconds between two looks for silent nodes (a dead one is seen within this of its timeout)
logger = logging.getLogger("parl_lite.cluster")

NODE_HELLO = {"serve_address": hello.ADDRESS, "cpus": hello.COUNT, "host": hello.TEXT, "pid": hello.WHOLE,
              "node_id": hello.optional(hello.ID)}  # node_id: the id it had, when it rejoins
CLIENT_HELLO = {"pid": hello.optional(hello.WHOLE), "host": hello.optional(hello.TEXT),
                "script": hello.optional(hello.TEXT),
                "client_id": hello.optional(hello.ID)}  # the id it had, when it comes back to a restarted master


@dataclass
class NodeRecord:
    id: str
    host: str
    address: str
    cpus_total: int
    framed: wire.FramedSocket
    # reservation id -> (client id, when made); dropped once the node no longer reports the actor
    # (or, if it never did, after a grace time: the client died before reaching the node)
    reservations: dict[str, tuple[str, float]] = field(default_factory=dict)
    seen: set = field(default_factory=set)  # reservations the node has reported
    live: dict[str, str] = field(default_factory=dict)  # its reservations -> client, as it last listed them
    alive: bool = True
    last_report: float = field(default_factory=time.monotonic)
    suspect_until: float = 0.0  # time.monotonic() until which it gets no new actor
    filed: int = 0  # the placeable CPUs it is filed under for placement (0: not filed)
    mem_used_mb: float = 0.0
    mem_total_mb: float = 0.0
    # [wall time, load] points, one per _LOAD_EVERY seconds of time.monotonic(): a wall clock set back
    # does not stop the sampling
    load: collections.deque[list[float]] = field(default_factory=lambda: collections.deque(maxlen=_LOAD_POINTS))
    load_sampled_at: float = -math.inf  # time.monotonic() of the last point

    @property
    def cpus_free(self) -> int:
        return self.cpus_total - len(self.reservations) if self.alive else 0

    def suspect(self, now: float) -> bool:
        """Late with its reports, or on probation after being late or lost."""
        return self.alive and (now < self.suspect_until or now - self.last_report > SUSPECT_AFTER)

    def placeable(self, now: float) -> int:
        """CPUs a new actor may take here now (none while it is suspect)."""
        return 0 if self.suspect(now) else self.cpus_free


class Master:
    """The master's state and its server.

    Args:
        host: interface to bind.
        port: TCP port (0: the OS picks; see :attr:`address`).
        token: the cluster's shared secret.
        limits: the bounds on unauthenticated connections (default: :meth:`Limits.from_environment`).
    """

    def __init__(self, host: str, port: int, token: bytes, limits: Limits | None = None) -> None:
        self._cond = threading.Condition()
        self._nodes: dict[str, NodeRecord] = {}
        self._clients: dict[str, dict[str, Any]] = {}
        self._actors: dict[str, dict[str, Any]] = {}
        self._ended: dict[str, None] = {}  # ids of ended actors still kept, oldest first
        # placeable CPUs -> the nodes with that many (a placement takes one with the most: no walk
        # over every node); kept by _file on every change, and by the watcher as time passes
        self._by_free: dict[int, dict[str, NodeRecord]] = {}
        self._outputs: dict[str, collections.deque[str]] = {}
        self._server = Server(host, port, token, {"node": Role(self._serve_node, NODE_HELLO),
                                                  "client": Role(self._serve_client, CLIENT_HELLO),
                                                  "observer": Role(self._serve_client, CLIENT_HELLO)},
                              limits or Limits.from_environment(), identity=wire.MASTER)
        self.address = f"{host}:{self._server.port}"
        self._stopped = threading.Event()
        self._watched_at = time.monotonic()  # when the watcher last ran (it runs every _WATCH_PERIOD)
        threading.Thread(target=self._watch_nodes, daemon=True, name="parl_lite-watch").start()

    # --- what the monitor and `parl-lite status` read --------------------------------------------
    def status(self) -> dict[str, Any]:
        """The cluster as a JSON-able dict (nodes, clients with their actors per node, actors), as the
        web monitor renders it."""
        now = time.monotonic()
        with self._cond:
            placed = collections.Counter(  # (client, node) -> placed actors, also those not yet reported
                (client, node.id) for node in self._nodes.values() for client, _ in node.reservations.values())
            per_client: dict[str, dict[str, int]] = {}
            for (client, node_id), count in placed.items():
                per_client.setdefault(client, {})[node_id] = count
            return {
                "kind": "cluster", "address": self.address, "generated_at": time.time(),
                "nodes": [{"id": node.id, "host": node.host, "address": node.address,
                           "cpus_total": node.cpus_total, "cpus_used": node.cpus_total - node.cpus_free
                           if node.alive else 0, "mem_used_mb": node.mem_used_mb,
                           "mem_total_mb": node.mem_total_mb, "load": list(node.load), "alive": node.alive,
                           "suspect": node.suspect(now)}
                          for node in self._nodes.values()],
                "clients": [{**client, "actors": sum(per_client.get(client["id"], {}).values()),
                             "nodes": per_client.get(client["id"], {})}
                            for client in self._clients.values()],
                "actors": [dict(actor) for actor in self._actors.values()],
            }

    def capacity(self) -> dict[str, int]:
        """How many actors could be placed now (free CPUs of the nodes that are alive and not
        suspect), with the nodes alive, suspect, and their CPUs: a cheap question, unlike
        :meth:`status`."""
        now = time.monotonic()
        with self._cond:
            alive = [node for node in self._nodes.values() if node.alive]
            return {"cpus_free": sum(node.placeable(now) for node in alive), "nodes_alive": len(alive),
                    "nodes_suspect": sum(node.suspect(now) for node in alive),
                    "cpus_total": sum(node.cpus_total for node in alive)}

    def actor_output(self, actor_id: str) -> list[str]:
        """The last 500 output lines of an actor (empty if unknown)."""
        with self._cond:
            return list(self._outputs.get(actor_id, ()))

    def close(self) -> None:
        """Stop serving; nodes see their connection close and exit."""
        self._stopped.set()
        self._server.close()
        with self._cond:
            nodes = list(self._nodes.values())
        for node in nodes:
            node.framed.close()

    # --- nodes ----------------------------------------------------------------------------------
    def _serve_node(self, framed: wire.FramedSocket, hello: dict[str, Any]) -> None:
        framed.limit = CONTROL_FRAME_BYTES
        node = self._register_node(framed, hello)
        framed.send_json({"ok": True, "node_id": node.id})
        try:
            while True:
                self._take_report(node, framed, framed.receive_json())
        except (EOFError, OSError):
            why = "its connection closed"
        except ValueError as error:  # not JSON, too large, or not a report
            why = f"it sent a malformed report ({error})"
        self._node_died(node, framed, why)

    def _register_node(self, framed: wire.FramedSocket, hello: dict[str, Any]) -> NodeRecord:
        """A new node's record, or the record of a node that comes back (under the id it had)."""
        wanted = hello.get("node_id")
        with self._cond:
            node = self._nodes.get(wanted) if wanted else None
            superseded = None
            if node is None:
                node = NodeRecord(id=wanted or uuid.uuid4().hex[:8], host=hello["host"],
                                  address=hello["serve_address"], cpus_total=hello["cpus"], framed=framed)
                self._nodes[node.id] = node
            else:  # it rejoins (its old connection, if we still hold it, is dead to it)
                superseded = node.framed if node.alive else None
                now = time.monotonic()
                if not node.alive:  # it was lost: no new work until it has stayed for a while
                    node.suspect_until = now + PROBATION
                node.framed, node.alive, node.last_report = framed, True, now
                node.host, node.address, node.cpus_total = hello["host"], hello["serve_address"], hello["cpus"]
            self._file(node, time.monotonic())
            self._cond.notify_all()
        if superseded is not None:
            superseded.close()
        logger.info("node %s %s from %s with %d CPUs", node.id, "rejoined" if wanted else "joined", node.address,
                    node.cpus_total)
        return node

    def _take_report(self, node: NodeRecord, framed: wire.FramedSocket, report: Any) -> None:
        _check_report(report)
        now = time.monotonic()
        with self._cond:
            if node.framed is not framed:  # superseded by a newer connection of the node
                raise EOFError("superseded")
            # late (while this process ran: after a stall of ours the reports were only waiting)
            if now - node.last_report > SUSPECT_AFTER and now - self._watched_at < SUSPECT_AFTER:
                node.suspect_until = now + PROBATION
            node.last_report = now
            node.mem_used_mb = report["mem_used_mb"]
            node.mem_total_mb = report["mem_total_mb"]
            if now - node.load_sampled_at >= _LOAD_EVERY:
                node.load.append([time.time(), report["load1"]])
                node.load_sampled_at = now
            # reservation -> client id: ours, or those it had when it rejoined; left out when unchanged
            live = node.live = report.get("reservations", node.live)
            for key, client in live.items():
                node.reservations.setdefault(key, (client, now))
            node.seen |= set(live) | set(report["released"])
            node.reservations = {key: value for key, value in node.reservations.items()
                                 if key in live or (key not in node.seen and now - value[1] < _RESERVATION_GRACE)}
            node.seen &= set(node.reservations)
            for actor in report["actors"]:  # those whose description changed
                self._actors[actor["id"]] = {**actor, "node": node.id}
                if actor["state"] in _ENDED_STATES:
                    self._actor_ended(actor["id"])
            for actor_id, lines in report["output"].items():
                self._outputs.setdefault(actor_id, collections.deque(maxlen=_OUTPUT_LINES)).extend(lines)
            self._file(node, now)
            self._cond.notify_all()

    def _actor_ended(self, actor_id: str) -> None:
        """Keep the last :data:`_ENDED_KEPT` ended actors (and their output); forget older ones."""
        self._ended[actor_id] = None
        while len(self._ended) > _ENDED_KEPT:
            oldest = next(iter(self._ended))
            del self._ended[oldest]
            self._actors.pop(oldest, None)
            self._outputs.pop(oldest, None)

    def _node_died(self, node: NodeRecord, framed: wire.FramedSocket, why: str) -> None:
        with self._cond:
            if not node.alive or node.framed is not framed:  # already dead, or it rejoined meanwhile
                return
            node.alive = False
            node.reservations.clear()
            node.live = {}
            lost = [actor for actor in self._actors.values()
                    if actor["node"] == node.id and actor["state"] not in _ENDED_STATES]
            for actor in lost:
                actor["state"] = "dead"
                actor["last_error"] = actor.get("last_error") or f"node {node.id} died"
                self._actor_ended(actor["id"])
            self._file(node, time.monotonic())
            self._cond.notify_all()
        framed.close()
        logger.warning("node %s (%s) is gone: %s", node.id, node.address, why)

    def _watch_nodes(self) -> None:
        while not self._stopped.wait(_WATCH_PERIOD):
            now = time.monotonic()
            stalled, self._watched_at = now - self._watched_at > SUSPECT_AFTER, now
            with self._cond:
                if stalled:  # this process did not run: the reports wait unread, give them time
                    for node in self._nodes.values():
                        node.last_report = max(node.last_report, now)
                    continue
                for node in self._nodes.values():  # late ones are suspect, those whose probation ended are not
                    self._file(node, now)
                late = [node for node in self._nodes.values()
                        if node.alive and now - node.last_report > NODE_TIMEOUT]
            for node in late:
                self._node_died(node, node.framed, f"no report for {NODE_TIMEOUT:g} s")

    # --- clients --------------------------------------------------------------------------------
    def _serve_client(self, framed: wire.FramedSocket, hello: dict[str, Any]) -> None:
        framed.limit = CONTROL_FRAME_BYTES
        # a client back after a restart of the master keeps its id: its sessions on the nodes have it
        client_id = hello.get("client_id") or uuid.uuid4().hex[:8]
        record = {"id": client_id, "script": hello.get("script"), "host": hello.get("host"), "pid": hello.get("pid"),
                  "started_at": time.time()}
        if hello["role"] == "client":
            with self._cond:
                self._clients[client_id] = record
        framed.send_json({"ok": True, "client_id": client_id})
        try:
            while True:
                try:
                    request = framed.receive_json()
                except wire.FrameTooLargeError as error:  # the rest of the stream cannot be read
                    framed.send_json({"error": str(error)})
                    break
                except ValueError as error:  # read whole, but not JSON
                    framed.send_json({"error": f"a request must be JSON: {error}"})
                    continue
                framed.send_json(self._answer(client_id, request))
        except (EOFError, OSError):
            pass
        with self._cond:
            if self._clients.get(client_id) is record:  # not the same client's newer connection
                del self._clients[client_id]
        framed.close()

    def _answer(self, client_id: str, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict):
            return {"error": f"a request must be a JSON object, got {type(request).__name__}"}
        kind = request.get("type")
        if kind == "place":
            timeout = request.get("timeout", 30.0)
            if not _seconds(timeout):
                return {"error": f"placement_timeout must be a finite number of seconds, 0 or more; got {timeout!r}"}
            return self._place(client_id, float(timeout))
        if kind == "status":
            return {"status": self.status()}
        if kind == "capacity":
            return {"capacity": self.capacity()}
        if kind == "output":
            return {"lines": self.actor_output(str(request.get("actor_id")))}
        return {"error": f"unknown request {kind!r}"}

    def _place(self, client_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                node = self._most_free(now)
                if node is not None:
                    reservation = uuid.uuid4().hex[:12]
                    node.reservations[reservation] = (client_id, now)
                    self._file(node, now)
                    return {"node_id": node.id, "address": node.address, "host": node.host,
                            "reservation": reservation}
                remaining = deadline - now
                alive = any(node.alive for node in self._nodes.values())
                if not alive or remaining <= 0 or self._stopped.is_set():  # no node: no use waiting
                    return {"error": self._capacity_text(timeout)}
                # reports notify; a suspect's probation ends without one
                self._cond.wait(min(remaining, wire.HEARTBEAT_PERIOD))

    def _file(self, node: NodeRecord, now: float) -> None:
        """File ``node`` under the CPUs a new actor may take there now (``self._cond`` is held)."""
        free = node.placeable(now)
        if free == node.filed:
            return
        if node.filed:
            bucket = self._by_free[node.filed]
            del bucket[node.id]
            if not bucket:
                del self._by_free[node.filed]
        if free:
            self._by_free.setdefault(free, {})[node.id] = node
        node.filed = free

    def _most_free(self, now: float) -> NodeRecord | None:
        """A node with the most CPUs a new actor may take, or None (``self._cond`` is held)."""
        while self._by_free:
            most = max(self._by_free)
            node = next(iter(self._by_free[most].values()))
            if node.placeable(now) == most:
                return node
            self._file(node, now)  # it changed since it was filed (time made it suspect)
        return None

    def _capacity_text(self, timeout: float) -> str:
        alive = [node for node in self._nodes.values() if node.alive]
        if not alive:
            lost = f" (its {len(self._nodes)} node(s) are gone)" if self._nodes else ""
            return (f"the parl_lite cluster at {self.address} has no node{lost}: add CPUs with "
                    f"`parl-lite connect --address {self.address}`")
        total = sum(node.cpus_total for node in alive)
        now = time.monotonic()
        suspects = [node for node in alive if node.suspect(now)]
        aside = (f" ({len(suspects)} of them suspect, late with their reports or lately lost, with "
                 f"{sum(node.cpus_free for node in suspects)} free CPU(s): they get no new actor until they "
                 f"have reported on time for {PROBATION:g} s)") if suspects else ""
        return (f"no free CPU in the parl_lite cluster at {self.address} within {timeout:g} s: "
                f"{len(alive)} node(s) with {total} CPU(s), all in use{aside}; close actors, add nodes, or "
                f"raise placement_timeout=")


def _seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


_REPORT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "mem_used_mb": (int, float), "mem_total_mb": (int, float), "load1": (int, float), "actors": list,
    "output": dict, "released": list}


def _check_report(report: Any) -> None:
    """Raise ValueError naming what a node's report lacks (it is a token holder, but may be buggy)."""
    if not isinstance(report, dict):
        raise ValueError(f"a JSON {type(report).__name__}, not an object")
    wrong = [key for key, kind in _REPORT_FIELDS.items() if not isinstance(report.get(key), kind)]
    if wrong:
        raise ValueError(f"fields {', '.join(wrong)} missing or of the wrong type")
    if not all(isinstance(actor, dict) and isinstance(actor.get("id"), str) and isinstance(actor.get("state"), str)
               for actor in report["actors"]):
        raise ValueError("an actor without a string id and state")
    if not all(isinstance(lines, list) and all(isinstance(line, str) for line in lines)
               for lines in report["output"].values()):
        raise ValueError("output that is not lists of strings")
    reservations = report.get("reservations", {})  # left out when unchanged
    if not isinstance(reservations, dict) or not all(isinstance(client, str) for client in reservations.values()) \
            or not all(isinstance(key, str) for key in report["released"]):
        raise ValueError("reservations that are not strings")


def main(argv: list[str] | None = None) -> None:
    """``python -m parl_lite.ext.cluster.master``: what ``parl-lite start`` runs in the background."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8010)
    parser.add_argument("--token-file", default=None)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--monitor-port", type=int, default=None, help="web monitor port (default: none)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s master %(levelname)s %(message)s")
    try:
        token = load_token(args.token_file)
        limits = Limits.from_environment()
        master = Master(args.host, args.port, token, limits)
    except (OSError, ValueError) as error:  # the port is taken, a limit is wrong: the log's last line says so
        logger.error("%s", error)
        raise SystemExit(1) from None
    try:
        monitor = serve_master_monitor(master, args.host, args.monitor_port, token, limits)
    except OSError as error:
        master.close()
        logger.error("cannot serve the web monitor on %s:%s: %s (choose another with --monitor-port, or "
                     "--no-monitor)", args.host, args.monitor_port, error)
        raise SystemExit(1) from None
    logger.info("master listening on %s", master.address)
    run_until_stopped(args.ready_file, {"pid": os.getpid(), "address": master.address,
                                        "monitor": monitor and monitor.url}, threading.Event())
    if monitor is not None:
        monitor.stop()
    master.close()


if __name__ == "__main__":
    main()
