"""The local pools of this machine as one status (``parl-lite monitor``).

Each pool publishes its status in shared memory (:mod:`parl_lite.remote.status`) and mirrors its
actors' output into a private folder (:mod:`parl_lite.remote.actor_log`); this module reads both.
The machine is the one node, each process that owns a pool is a client, and an actor's id is
``<owner pid>-<worker pid>``.
"""
import os
import time
from typing import Any
from collections.abc import Sequence

from parl_lite.ext.monitor.host import HostSampler
from parl_lite.remote.actor_log import read_actor_log
from parl_lite.remote.status import find_pools, read_status

__all__ = ["LocalPools"]

_SCRIPT_CHARS = 200


class LocalPools:
    """The status source of the pools running on this machine (see :class:`StatusSource`).

    Args:
        pids: show only the pools of these processes (default: every pool of this user).
    """

    def __init__(self, pids: Sequence[int] | None = None) -> None:
        self._pids = set(pids) if pids else None
        self._host = HostSampler().start()

    def status(self) -> dict[str, Any]:
        node = self._host.node()
        clients: list[dict[str, Any]] = []
        actors: list[dict[str, Any]] = []
        for owner in find_pools():
            if self._pids is not None and owner not in self._pids:
                continue
            if not _runs_as_this_user(owner):
                continue  # gone (killed before it could unlink its status), or another user's
            try:
                pool = read_status(owner)
                client_actors = [self._actor(owner, worker, node["id"])
                                 for worker in pool["workers"] + pool["ended"]
                                 if worker["actor"] is not None]
                client = {
                    "id": str(owner), "script": _command_line(owner), "host": node["host"], "pid": owner,
                    "started_at": float(pool["started_at"]),
                    "actors": sum(actor["state"] in ("starting", "alive") for actor in client_actors),
                }
            except (OSError, RuntimeError, KeyError, TypeError, ValueError):
                # it shut down while we looked, kept changing under us, or is not a pool's status
                # (anyone can create names in /dev/shm): leave it out, show the others
                continue
            actors.extend(client_actors)
            clients.append(client)
        return {"kind": "local", "address": None, "generated_at": time.time(),
                "nodes": [node], "clients": clients, "actors": actors}

    @staticmethod
    def _actor(owner: int, worker: dict[str, Any], node_id: str) -> dict[str, Any]:
        return {
            "id": f"{owner}-{worker['pid']}", "class": worker["actor"], "node": node_id,
            "pid": worker["pid"], "state": worker["state"],
            "calls_served": worker["calls_served"], "rss_mb": worker["rss_mb"],
            "last_error": worker["last_error"], "client": str(owner),
        }

    def logs(self, actor_id: str) -> list[str]:
        owner, worker = _parse_actor_id(actor_id)
        if (self._pids is not None and owner not in self._pids) or not _runs_as_this_user(owner):
            raise KeyError(actor_id)
        try:
            pool = read_status(owner)
            if not any(entry["pid"] == worker and entry["actor"] is not None
                       for entry in pool["workers"] + pool["ended"]):
                raise KeyError(actor_id)
            return read_actor_log(owner, worker)
        except (OSError, RuntimeError, TypeError, ValueError):  # see status(): not a pool we can read
            raise KeyError(actor_id) from None


def _runs_as_this_user(pid: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def _parse_actor_id(actor_id: str) -> tuple[int, int]:
    owner, _, worker = actor_id.partition("-")
    if not (owner.isdigit() and worker.isdigit()):
        raise KeyError(actor_id)
    return int(owner), int(worker)


def _command_line(pid: int) -> str:
    """What process ``pid`` runs, without the interpreter's path (``train.py --seed 1``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            args = cmdline.read().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return "?"
    if len(args) > 1 and os.path.basename(args[0]).startswith("python"):
        args = args[1:]
    text = " ".join(args)
    return text if len(text) <= _SCRIPT_CHARS else text[:_SCRIPT_CHARS - 1] + "…"
