"""The seam between ``@remote_class`` and whatever hosts the actors.

The local process pool (:class:`parl_lite.remote.pool.LocalPool`) implements it; a socket bridge or
a plugin for another engine (Ray) implements the same two small classes and is chosen by
``parl_lite.connect(address)``: the address's scheme (``ray://...``) names a plugin registered under
the entry-point group ``parl_lite.backends`` whose object is a callable ``(address, **options) ->
Backend``.
"""
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from parl_lite.remote.futures import Future

__all__ = ["ActorOptions", "ActorChannel", "Backend", "Capacity", "MethodReference", "THREAD_VARIABLES", "this_machine",
           "thread_limits"]

# what ``connect(threads_per_worker=N)`` sets in every backend's workers (before numpy loads there)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS")


class MethodReference:
    """What :meth:`ActorChannel.get_attribute` yields for an attribute that is a method of the actor
    (any routine, e.g. one its class's ``__getattr__`` makes): the caller then calls it remotely, by
    name, instead of running a copy of it."""


@dataclass(frozen=True)
class ActorOptions:
    """How an actor is hosted.

    Attributes:
        max_memory: resident memory limit of the actor's process in MB (None: no limit).
        placement_timeout: seconds the actor's creation may wait for room (a free CPU of a cluster)
            before it fails (None: the backend's own wait; a backend that never waits ignores it).
    """

    max_memory: float | None = None
    placement_timeout: float | None = None


@dataclass(frozen=True)
class Capacity:
    """How many actors a backend runs usefully, as it knows it (:meth:`Backend.capacity`).

    Attributes:
        cpus: the CPUs its actors run on.
        on_this_machine: whether its actors are processes of this machine, sharing its CPUs and
            memory with the caller.
        one_actor_per_cpu: whether it places at most one actor per CPU (an actor beyond that waits for
            a free CPU, ``placement_timeout``).
        description: what it is, for messages ("this machine", "the parl_lite cluster at ...").
        grow_hint: how to give it more CPUs ("" if nothing can be said).
    """

    cpus: int
    on_this_machine: bool
    one_actor_per_cpu: bool
    description: str
    grow_hint: str = ""


def this_machine() -> Capacity:
    """The capacity of the CPUs this process may use."""
    return Capacity(len(os.sched_getaffinity(0)), on_this_machine=True, one_actor_per_cpu=False,
                    description="this machine")


class ActorChannel(ABC):
    """One live actor, as its backend hosts it. Every method may be called from any thread."""

    @abstractmethod
    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future:
        """Run ``actor.method(*args, **kwargs)``; calls run in the order they were made."""

    @abstractmethod
    def get_attribute(self, name: str) -> Future:
        """Read ``actor.name``."""

    @abstractmethod
    def set_attribute(self, name: str, value: Any) -> Future:
        """Set ``actor.name = value``."""

    @abstractmethod
    def close(self) -> None:
        """Stop the actor once the calls already made have run, and free what hosts it."""

    def call_sync(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run ``actor.method(*args, **kwargs)`` and return its value (synchronous calls use it;
        a backend may override it to wait in the calling thread)."""
        return self.result(self.call(method, args, kwargs))

    def result(self, future: Future) -> Any:
        """Wait for a future of this channel and return its value."""
        return future.result()


def thread_limits(threads_per_worker: int) -> dict[str, str]:
    """The environment that limits a worker's OMP/MKL/OpenBLAS threads to ``threads_per_worker``."""
    return {name: str(threads_per_worker) for name in THREAD_VARIABLES}


class Backend(ABC):
    """Creates actors and owns the processes (or machines) they run on."""

    @abstractmethod
    def create_actor(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any],
                     options: ActorOptions) -> ActorChannel:
        """Build ``cls(*args, **kwargs)`` remotely; raise what ``__init__`` raised."""

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """A JSON-able description of the backend's workers and actors."""

    def free_slots(self) -> int | None:
        """How many more actors could be placed now without waiting for room, or None if the
        backend does not say (the local pool forks a process for each actor; Ray places by its own
        rules). A cluster answers with its free CPUs; an error means it cannot be reached."""
        return None

    def capacity(self) -> Capacity:
        """How many actors the backend runs usefully (default: as processes of this machine).

        Raises:
            ConnectionError: the backend cannot be reached any more.
        """
        return this_machine()

    @abstractmethod
    def shutdown(self) -> None:
        """Stop every actor and release every resource; idempotent."""
