"""The cluster master (``parl-lite start``): knows the nodes, places actors, keeps the status.

Nodes report every half second (CPUs, memory, load, their actors' state and new output); a node
whose connection drops, or that has not reported for :data:`NODE_TIMEOUT` seconds, is dead: its
CPUs leave the cluster (its actors' clients learn it from their own connections). Clients ask for a
placement before each actor: the node with the most free CPUs gets it, and one CPU is reserved until
the node reports the actor gone. Everything is kept in memory; :meth:`Master.status` and
:meth:`Master.actor_output` give it to ``parl-lite status`` and the web monitor.
"""
import argparse
import collections
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.local_state import load_token
from parl_lite.ext.cluster.server import Server, run_until_stopped

__all__ = ["Master", "NODE_TIMEOUT"]

NODE_TIMEOUT = wire.SILENCE_LIMIT  # seconds without a report after which a node is taken for dead
_RESERVATION_GRACE = 5.0  # seconds a placement may wait for its node to report the actor
_LOAD_POINTS = 120  # load samples kept per node (one a report)
_OUTPUT_LINES = 500
_ENDED_KEPT = 256  # ended actors (and their output) kept for the status; older ones are forgotten
logger = logging.getLogger("parl_lite.cluster")


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
    alive: bool = True
    last_report: float = field(default_factory=time.monotonic)
    mem_used_mb: float = 0.0
    mem_total_mb: float = 0.0
    load: collections.deque[list[float]] = field(default_factory=lambda: collections.deque(maxlen=_LOAD_POINTS))

    @property
    def cpus_free(self) -> int:
        return self.cpus_total - len(self.reservations) if self.alive else 0


class Master:
    """The master's state and its server.

    Args:
        host: interface to bind.
        port: TCP port (0: the OS picks; see :attr:`address`).
        token: the cluster's shared secret.
    """

    def __init__(self, host: str, port: int, token: bytes) -> None:
        self._cond = threading.Condition()
        self._nodes: dict[str, NodeRecord] = {}
        self._clients: dict[str, dict[str, Any]] = {}
        self._actors: dict[str, dict[str, Any]] = {}
        self._outputs: dict[str, collections.deque[str]] = {}
        self._server = Server(host, port, token, {"node": self._serve_node, "client": self._serve_client,
                                                  "observer": self._serve_client})
        self.address = f"{host}:{self._server.port}"
        self._stopped = threading.Event()
        threading.Thread(target=self._watch_nodes, daemon=True, name="parl_lite-watch").start()

    # --- what the monitor and `parl-lite status` read --------------------------------------------
    def status(self) -> dict[str, Any]:
        """The cluster as a JSON-able dict (nodes, clients, actors, as the web monitor renders it)."""
        with self._cond:
            actors_per_client = collections.Counter(  # placed actors, also those not yet reported
                client for node in self._nodes.values() for client, _ in node.reservations.values())
            return {
                "kind": "cluster", "address": self.address, "generated_at": time.time(),
                "nodes": [{"id": node.id, "host": node.host, "address": node.address,
                           "cpus_total": node.cpus_total, "cpus_used": node.cpus_total - node.cpus_free
                           if node.alive else 0, "mem_used_mb": node.mem_used_mb,
                           "mem_total_mb": node.mem_total_mb, "load": list(node.load), "alive": node.alive}
                          for node in self._nodes.values()],
                "clients": [{**client, "actors": actors_per_client.get(client["id"], 0)}
                            for client in self._clients.values()],
                "actors": [dict(actor) for actor in self._actors.values()],
            }

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
        node = NodeRecord(id=uuid.uuid4().hex[:8], host=str(hello.get("host")), address=str(hello["serve_address"]),
                          cpus_total=int(hello["cpus"]), framed=framed)
        with self._cond:
            self._nodes[node.id] = node
            self._cond.notify_all()
        framed.send_json({"ok": True, "node_id": node.id})
        logger.info("node %s joined from %s with %d CPUs", node.id, node.address, node.cpus_total)
        try:
            while True:
                self._take_report(node, framed.receive_json())
        except (EOFError, OSError, ValueError):
            pass
        self._node_died(node, "its connection closed")

    def _take_report(self, node: NodeRecord, report: dict[str, Any]) -> None:
        now = time.monotonic()
        with self._cond:
            node.last_report = now
            node.mem_used_mb = report["mem_used_mb"]
            node.mem_total_mb = report["mem_total_mb"]
            node.load.append([time.time(), report["load1"]])
            live = set(report["reservations"])
            node.seen |= live | set(report["released"])
            node.reservations = {key: value for key, value in node.reservations.items()
                                 if key in live or (key not in node.seen and now - value[1] < _RESERVATION_GRACE)}
            node.seen &= set(node.reservations)
            for actor in report["actors"]:
                self._actors[actor["id"]] = {**actor, "node": node.id}
            for actor_id, lines in report["output"].items():
                self._outputs.setdefault(actor_id, collections.deque(maxlen=_OUTPUT_LINES)).extend(lines)
            self._forget_old_actors()
            self._cond.notify_all()

    def _forget_old_actors(self) -> None:
        ended = [key for key, actor in self._actors.items() if actor["state"] in ("dead", "closed")]
        for key in ended[:max(0, len(ended) - _ENDED_KEPT)]:  # oldest first
            del self._actors[key]
            self._outputs.pop(key, None)

    def _node_died(self, node: NodeRecord, why: str) -> None:
        with self._cond:
            if not node.alive:
                return
            node.alive = False
            node.reservations.clear()
            for actor in self._actors.values():
                if actor["node"] == node.id and actor["state"] in ("starting", "alive"):
                    actor["state"] = "dead"
                    actor["last_error"] = actor.get("last_error") or f"node {node.id} died"
            self._cond.notify_all()
        node.framed.close()
        logger.warning("node %s (%s) is gone: %s", node.id, node.address, why)

    def _watch_nodes(self) -> None:
        while not self._stopped.wait(0.5):
            with self._cond:
                late = [node for node in self._nodes.values()
                        if node.alive and time.monotonic() - node.last_report > NODE_TIMEOUT]
            for node in late:
                self._node_died(node, f"no report for {NODE_TIMEOUT:g} s")

    # --- clients --------------------------------------------------------------------------------
    def _serve_client(self, framed: wire.FramedSocket, hello: dict[str, Any]) -> None:
        client_id = uuid.uuid4().hex[:8]
        if hello["role"] == "client":
            with self._cond:
                self._clients[client_id] = {"id": client_id, "script": hello.get("script"),
                                            "host": hello.get("host"), "pid": hello.get("pid"),
                                            "started_at": time.time()}
        framed.send_json({"ok": True, "client_id": client_id})
        try:
            while True:
                request = framed.receive_json()
                framed.send_json(self._answer(client_id, request))
        except (EOFError, OSError, ValueError):
            pass
        with self._cond:
            self._clients.pop(client_id, None)
        framed.close()

    def _answer(self, client_id: str, request: dict[str, Any]) -> dict[str, Any]:
        kind = request.get("type")
        if kind == "place":
            return self._place(client_id, float(request.get("timeout", 30.0)))
        if kind == "status":
            return {"status": self.status()}
        if kind == "output":
            return {"lines": self.actor_output(str(request.get("actor_id")))}
        return {"error": f"unknown request {kind!r}"}

    def _place(self, client_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                free = [node for node in self._nodes.values() if node.cpus_free > 0]
                if free:
                    node = max(free, key=lambda candidate: candidate.cpus_free)
                    reservation = uuid.uuid4().hex[:12]
                    node.reservations[reservation] = (client_id, time.monotonic())
                    return {"node_id": node.id, "address": node.address, "host": node.host,
                            "reservation": reservation}
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopped.is_set():
                    return {"error": self._capacity_text(timeout)}
                self._cond.wait(remaining)

    def _capacity_text(self, timeout: float) -> str:
        alive = [node for node in self._nodes.values() if node.alive]
        if not alive:
            return (f"the parl_lite cluster at {self.address} has no node: add CPUs with "
                    f"`parl-lite connect --address {self.address}`")
        total = sum(node.cpus_total for node in alive)
        return (f"no free CPU in the parl_lite cluster at {self.address} within {timeout:g} s: "
                f"{len(alive)} node(s) with {total} CPU(s), all in use; close actors, add nodes, or "
                f"raise placement_timeout=")


def main(argv: list[str] | None = None) -> None:
    """``python -m parl_lite.ext.cluster.master``: what ``parl-lite start`` runs in the background."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8010)
    parser.add_argument("--token-file", default=None)
    parser.add_argument("--ready-file", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s master %(levelname)s %(message)s")
    try:
        master = Master(args.host, args.port, load_token(args.token_file))
    except (OSError, ValueError) as error:  # e.g. the port is taken: the log's last line says so
        logger.error("%s", error)
        raise SystemExit(1) from None
    logger.info("master listening on %s", master.address)
    run_until_stopped(args.ready_file, {"pid": os.getpid(), "address": master.address}, threading.Event())
    master.close()


if __name__ == "__main__":
    main()
