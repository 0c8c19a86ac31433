"""An elastic group of actors: kept alive whatever backend hosts them, grown when room appears.

::

    group = ActorGroup(lambda index: Sampler(seed=index), size=4, max_size=16)
    for actor in group.start():             # the first 4, made now
        submit(actor)
    ...
    try:
        result = future.result()
    except parl_lite.ActorDiedError as error:
        group.lost(actor, error)            # dropped; another is made in the background
    for actor in group.take_new():          # replacements, and actors made because room appeared
        submit(actor)

A background thread of the group makes a replacement for each lost actor (on a cluster the master
places it on a node that is alive and not suspect), and, every ``check_every`` seconds, asks the
backend how many actors it could place now (:meth:`Backend.free_slots`: a cluster's free CPUs; the
local pool and Ray do not say, so the group keeps to ``size`` there) and makes that many more, up
to ``max_size``. The group fails for good, and :meth:`ActorGroup.take_new` raises
:class:`ActorGroupError`, when the backend cannot be reached any more (a cluster's master is gone),
or when it has no actor left and could make none for ``capacity_wait`` seconds. Every actor gets a
new index (0, 1, 2, ...), so one made to replace another is told apart (e.g. seeded differently).
What happened (an actor lost, made, a failed try) is kept as lines for the caller's log
(:meth:`ActorGroup.drain_events`).

Nothing here imports paddle: an RL trainer and an evolution-strategies trainer use the same group.
"""
import threading
import time
from collections.abc import Callable
from typing import Any

from parl_lite.remote.backend import Backend
from parl_lite.remote.errors import RemoteError

__all__ = ["ActorGroup", "ActorGroupError"]

_CLOSE_WAIT = 5.0  # seconds close() waits for an actor being made (a placement may wait longer)


class ActorGroupError(RuntimeError):
    """The group cannot go on: its backend is gone, or it has no actor and cannot make one."""


class ActorGroup:
    """Up to ``max_size`` actors made by ``make``, replaced when they die (see the module docstring).

    Args:
        make: ``make(index)`` builds one actor (e.g. a ``@remote_class`` instance); it runs in this
            thread for the first ``size``, in the group's thread afterwards.
        size: actors made by :meth:`start`, and kept by replacing the lost ones.
        max_size: the most actors the group grows to while the backend has room (default ``size``).
        name: what an actor is, in the events (``"rollout actor"``).
        check_every: seconds between two questions to the backend about its room (it is also how
            soon a backend that went away is noticed).
        capacity_wait: seconds the group may have no actor while it tries to make one, before it
            fails.
        backend: the backend that hosts the actors (default: the one ``parl_lite.connect()`` gives).
    """

    def __init__(self, make: Callable[[int], Any], size: int, max_size: int | None = None, *,
                 name: str = "actor", check_every: float = 1.0, capacity_wait: float = 60.0,
                 backend: Backend | None = None) -> None:
        max_size = size if max_size is None else max_size
        if size < 1:
            raise ValueError(f"ActorGroup: size must be at least 1, got {size}")
        if max_size < size:
            raise ValueError(f"ActorGroup: max_size ({max_size}) must be at least size ({size})")
        if not check_every > 0 or not capacity_wait >= 0:
            raise ValueError(f"ActorGroup: check_every must be above 0 and capacity_wait 0 or more, got "
                             f"{check_every} and {capacity_wait}")
        if backend is None:
            from parl_lite.remote.api import connect

            backend = connect()
        self.size, self.max_size, self.name = size, max_size, name
        self.check_every, self.capacity_wait = check_every, capacity_wait
        self._make_actor, self._backend = make, backend
        self._cond = threading.Condition()
        self._live: list[Any] = []  # every actor made and not lost, taken or not
        self._new: list[Any] = []  # made in the background, not yet taken
        self._index: dict[int, int] = {}  # id(actor) -> its index
        self._next_index = 0
        self._events: list[str] = []
        self._last_error: BaseException | None = None  # why the last try to make an actor failed
        self._failure: tuple[str, BaseException | None] | None = None  # why the group cannot go on
        self._empty_since: float | None = None  # when the group last had no actor
        self._closed = False
        self._thread: threading.Thread | None = None

    # --- what the caller uses ---------------------------------------------------------------------
    def start(self) -> list[Any]:
        """Make the first ``size`` actors (here, waiting for room as any actor creation does) and
        start keeping them; returns them."""
        if self._thread is not None:
            raise RuntimeError("ActorGroup.start() was already called")
        try:
            for _ in range(self.size):
                actor = self._make()
                with self._cond:
                    self._live.append(actor)
        except BaseException:
            self.close()
            raise
        actors = self.actors
        self._thread = threading.Thread(target=self._keep, daemon=True, name=f"parl_lite-group-{self.name}")
        self._thread.start()
        return actors

    @property
    def actors(self) -> list[Any]:
        """The actors alive as far as the group knows (those not yet taken included)."""
        with self._cond:
            return list(self._live)

    def index(self, actor: Any) -> int:
        """The index ``make`` built ``actor`` with.

        Raises:
            KeyError: ``actor`` is not an actor of the group (any more: it was lost).
        """
        try:
            return self._index[id(actor)]
        except KeyError:
            raise KeyError(f"not an actor of this {self.name} group (lost, or never made by it)") from None

    def take_new(self) -> list[Any]:
        """The actors made since the last call (replacements, and growth), for the caller to use.

        Raises:
            ActorGroupError: the group cannot go on (its cause is chained).
        """
        with self._cond:
            if self._failure is not None:
                text, cause = self._failure
                raise ActorGroupError(text) from cause
            new, self._new = self._new, []
            return new

    def lost(self, actor: Any, error: BaseException) -> None:
        """``actor`` died (``error`` says how); the group drops it and makes another in the background."""
        with self._cond:
            if not any(actor is live for live in self._live):
                return
            self._live = [live for live in self._live if live is not actor]
            self._new = [new for new in self._new if new is not actor]
            index = self._index.pop(id(actor))  # forgotten: a long run loses and replaces many
            self._note(f"{self.name} {index} lost: {error}; {len(self._live)} left, making another")
            if not self._live and self._empty_since is None:
                self._empty_since = time.monotonic()
            self._cond.notify_all()
        _close_quietly(actor)

    def wait_for_change(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a new actor or the group's failure."""
        with self._cond:
            self._cond.wait_for(lambda: self._new or self._failure is not None or self._closed, timeout)

    def drain_events(self) -> list[str]:
        """What happened since the last call, one line per event, oldest first."""
        with self._cond:
            events, self._events = self._events, []
            return events

    def close(self) -> None:
        """Stop making actors and close every actor of the group."""
        with self._cond:
            self._closed = True
            actors, self._live, self._new = self._live, [], []
            self._index.clear()
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(_CLOSE_WAIT)
        for actor in actors:
            _close_quietly(actor)

    # --- the group's thread ----------------------------------------------------------------------
    def _make(self) -> Any:
        index, self._next_index = self._next_index, self._next_index + 1
        actor = self._make_actor(index)
        self._index[id(actor)] = index
        return actor

    def _note(self, event: str) -> None:
        self._events.append(event)  # self._cond is held

    def _keep(self) -> None:
        next_look = time.monotonic()  # room may be there already
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or len(self._live) < self.size,
                                    max(0.0, next_look - time.monotonic()))
                if self._closed or self._failure is not None:
                    return
                missing = self.size - len(self._live)
            if missing > 0:
                self._replace()
                continue
            next_look = time.monotonic() + self.check_every
            try:
                free = self._backend.free_slots()
            except Exception as error:  # the backend cannot be reached (a cluster's master is gone)
                self._fail(f"the {self.name}s' backend cannot be reached: {error}", error)
                return
            with self._cond:
                room = min(free or 0, self.max_size - len(self._live))
            for _ in range(room):
                if not self._add(grown=True):
                    break

    def _replace(self) -> None:
        """Make one actor for a lost one; on failure note it, and fail when the group has had no
        actor for ``capacity_wait`` seconds."""
        if self._add(grown=False):
            return
        with self._cond:
            empty_since = self._empty_since
        if empty_since is not None and time.monotonic() - empty_since >= self.capacity_wait:
            self._fail(f"no {self.name} left, and none could be made for {self.capacity_wait:g} s", None)
            return
        with self._cond:  # try again later (sooner if the group is closed)
            self._cond.wait_for(lambda: self._closed, self.check_every)

    def _add(self, grown: bool) -> bool:
        """Make one actor and hand it over; False if it could not be made."""
        try:
            actor = self._make()
        except Exception as error:
            with self._cond:
                self._note(f"could not make a {self.name}: {type(error).__name__}: {error}")
                self._last_error = error
            return False
        with self._cond:
            if self._closed:
                closed = True
            else:
                closed = False
                self._live.append(actor)
                self._new.append(actor)
                self._empty_since = None
                why = "room appeared" if grown else "a replacement"
                self._note(f"{self.name} {self.index(actor)} made ({why}): {len(self._live)} of at most "
                           f"{self.max_size}")
                self._cond.notify_all()
        if closed:
            _close_quietly(actor)
        return not closed

    def _fail(self, text: str, cause: BaseException | None) -> None:
        with self._cond:
            self._failure = (text, cause or self._last_error)
            self._note(text)
            self._cond.notify_all()


def _close_quietly(actor: Any) -> None:
    """Close an actor that may be dead already (its own ``close()`` cannot run then)."""
    try:
        actor.close()
    except RemoteError:
        pass
