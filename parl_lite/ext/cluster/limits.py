"""The bounds a master, a node and a client keep, with their defaults and where to change them.

Each limit has an environment variable (read by ``parl-lite start`` / ``connect``, which check
them before they start anything, by their background processes and by ``parl_lite.connect`` in your
program); ``--reconnect-grace`` is also an option of ``parl-lite start`` and ``connect``. A value
must be a positive number (an integer where one is needed), within the range of :data:`RANGES`
where one is given. ``docs/cluster.md`` has the table.

A node's ``--cpus`` is bounded here too (:func:`check_node_cpus`): it hosts a process per CPU.
"""
import math
import os
import resource
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["Limits", "LimitError", "Range", "RANGES", "CONTROL_FRAME_BYTES", "HELLO_FRAME_BYTES",
           "MEMORY_PER_ACTOR_MB", "checked_value", "check_node_cpus", "environment_variable"]

HELLO_FRAME_BYTES = 2**20  # the hello a peer sends once authenticated (file names, versions)
CONTROL_FRAME_BYTES = 64 * 2**20  # a JSON message to or from the master (a node's report: output lines)
_FD_SHARE = 4  # unauthenticated connections take at most 1/_FD_SHARE of the process's descriptors
# the least memory an actor's process takes (a node's spare actor host: 23 MB resident, 2.4 MB of
# it its own; an actor's imports and data come on top), as evokit_py counts a sampling worker
MEMORY_PER_ACTOR_MB = 32


@dataclass(frozen=True)
class Range:
    """The values of a limit that make sense, and why (said when a value is refused)."""

    lowest: float
    highest: float | None
    why: str


RANGES = {
    "handshake_timeout": Range(0.1, 3600.0, "below, a token holder on a busy machine or across a network cannot "
                                            "authenticate in time; above, a stranger may hold a connection that long"),
    "reconnect_grace": Range(0.1, None, "a node tries to rejoin 0.1 s after it lost its master at the earliest"),
    "monitor_request_timeout": Range(0.1, None, "a browser needs a round trip or two to send a request"),
}


class LimitError(ValueError):
    """A limit's environment variable holds something that is not a valid value (it is named)."""


@dataclass(frozen=True)
class Limits:
    """What a stranger, a token holder or a stall may cost (see the module docstring).

    Attributes:
        handshake_timeout: seconds a connection may take from accept() to the end of its hello
            (authentication included), as one deadline; then it is dropped.
        max_unauthenticated: connections still authenticating, in all (the oldest of the heaviest
            source is dropped to make room: :mod:`~parl_lite.ext.cluster.admission`); at most a
            quarter of the process's file descriptors (``ulimit -n``).
        max_unauthenticated_per_peer: the same, per peer address (its oldest is dropped).
        max_frame_mb: largest message on an actor's connection (arguments, return values), checked
            against the header before anything is allocated; control messages are bounded apart.
        reconnect_grace: seconds a node keeps trying to reach a master that went away (its actors
            keep serving meanwhile) before it stops them and exits.
        monitor_max_connections: HTTP connections the web monitor holds at once (the oldest is
            dropped to make room).
        monitor_request_timeout: seconds an HTTP connection may take to send a request and take
            its response (keep-alive waits included).
    """

    handshake_timeout: float = 5.0
    max_unauthenticated: int = 64
    max_unauthenticated_per_peer: int = 16
    max_frame_mb: float = 4096.0
    reconnect_grace: float = 60.0
    monitor_max_connections: int = 32
    monitor_request_timeout: float = 10.0

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **given: float | None) -> "Limits":
        """The defaults, overridden by ``PARL_LITE_<NAME>`` variables, then by ``given`` (not None).

        Raises:
            LimitError: a variable or value is not a positive number (an integer where one is
                needed), or is out of its :data:`RANGES`; the message names it.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in fields(cls):
            variable = environment_variable(field.name)
            raw: object = given.get(field.name)
            source = f"{field.name}="
            if raw is None and variable in environ:
                raw, source = environ[variable], variable
            if raw is not None:
                values[field.name] = checked_value(field.name, raw, source)
        return cls(**values)

    @property
    def max_frame_bytes(self) -> int:
        return int(self.max_frame_mb * 2**20)

    def unauthenticated_caps(self) -> tuple[int, int]:
        """(in all, per peer) after the file-descriptor bound."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        total = self.max_unauthenticated
        if soft != resource.RLIM_INFINITY:
            total = max(1, min(total, soft // _FD_SHARE))
        return total, max(1, min(self.max_unauthenticated_per_peer, total))

    def environment(self) -> dict[str, str]:
        """These limits as the variables :meth:`from_environment` reads (for a child process)."""
        return {environment_variable(field.name): str(getattr(self, field.name)) for field in fields(self)}


def environment_variable(name: str) -> str:
    """``max_frame_mb`` -> ``PARL_LITE_MAX_FRAME_MB``."""
    return f"PARL_LITE_{name.upper()}"


def checked_value(name: str, raw: object, source: str) -> float | int:
    """``raw`` (a number or its text) as the value of the limit ``name``.

    Raises:
        LimitError: it is not a positive number (an integer where one is needed), or is out of
            the limit's :data:`RANGES`; the message names ``source`` (the variable or option).
    """
    integer = next(field for field in fields(Limits) if field.name == name).type in (int, "int")
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0) or (integer and value != int(value)):
        kind = "a positive integer" if integer else "a positive number"
        kind = f"a finite {kind[2:]}" if math.isinf(value) else kind
        raise LimitError(f"{source} must be {kind}, got {raw!r}")
    bounds = RANGES.get(name)
    if bounds is not None and not (bounds.lowest <= value <= (bounds.highest or math.inf)):
        span = (f"from {bounds.lowest:g} to {bounds.highest:g}" if bounds.highest is not None
                else f"at least {bounds.lowest:g}")
        raise LimitError(f"{source} must be {span} seconds ({bounds.why}), got {raw!r}")
    return int(value) if integer else value


def check_node_cpus(cpus: int, option: str = "--cpus") -> None:
    """Refuse a node of more CPUs than this machine's memory holds actor processes for: the node
    keeps a process per CPU (an actor, or a spare host built ahead of need).

    Raises:
        LimitError: naming ``option``, the memory available and the bound.
    """
    from parl_lite.utils.machine_info import memory_mb  # parl_lite.utils imports numpy: only where asked

    used, total = memory_mb()
    available = total - used
    most = int(available // MEMORY_PER_ACTOR_MB)
    if cpus > most:
        raise LimitError(f"{option} {cpus}: a node keeps a process per CPU, at least {MEMORY_PER_ACTOR_MB} MB "
                         f"each, and this machine has {available:,.0f} MB of memory available, enough for "
                         f"{most}; give {option} {most} or fewer")
