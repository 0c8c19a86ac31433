"""The caller's side of one actor, whatever carries its messages.

A backend's channel (the local pool's :class:`~parl_lite.remote.pool.WorkerProcess`, the cluster's
``ClusterActor``) derives from :class:`CallerChannel` and adds only its *transport*: how that
backend encodes, sends, awaits and reads frames, and what the end of its connection means.
Everything else about a call lives here, once:

- **The call table.** A call gets an id and an entry (where its reply lands, what was called) before
  its frame is sent. Replies come back in the order the calls were sent, so a reply that cannot be
  decoded here is the oldest call's.
- **Who reads** (:class:`Reader`). One thread at a time reads the connection. A synchronous call reads
  its own reply in the calling thread when nobody else reads: one wake-up per call, as with a raw
  pipe. A thread that finds another one reading sleeps until its reply is in or the reader is done,
  and then takes over. The background thread starts reading when a future is sent while nobody
  reads, or when the actor stops (to see the connection end), and after the futures' replies it
  reads on until a caller waits (more futures are likely to follow). It never wakes for a
  synchronous call: that would cost a context switch on every call.
- **The actor's life** (:class:`State`) and **how it ends** (:class:`Ending`): which error the calls
  awaited and the calls made later get (:class:`ActorDiedError`, :class:`MemoryLimitError`), and
  :class:`SerializationError` for arguments that cannot be pickled or replies that cannot be unpickled.
- **Ctrl-C while a reply is read.** A synchronous call reads in the caller's thread, which is the main
  thread a Ctrl-C (SIGINT) interrupts. A KeyboardInterrupt between a frame's header and the end of its
  body would leave the rest of the body to be read as the next frame (the actor's next call would wait
  for ever), and one between taking a call's entry and completing it would leave that call pending for
  ever. So a reader waits for a frame to begin arriving where a Ctrl-C loses nothing
  (:meth:`CallerChannel.wait`), then reads and dispatches it whole with :func:`ctrl_c_held_back`.
"""
import _signal  # the C module under signal: 0.3 us a call where signal's wrappers take 3 us
import enum
import itertools
import signal
import threading
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from parl_lite.remote import protocol
from parl_lite.remote.backend import ActorChannel
from parl_lite.remote.errors import ActorDiedError, MemoryLimitError, SerializationError
from parl_lite.remote.futures import Future
from parl_lite.remote.threads import start_daemon

__all__ = ["CallerChannel", "State", "Reader", "Cause", "Ending", "CLOSED", "EXITED", "over_memory",
           "unpicklable_arguments", "ReplySlot", "ctrl_c_held_back"]

T = TypeVar("T")


class State(enum.Enum):
    """The life of an actor as its caller sees it. The transitions, all made by
    :class:`CallerChannel`::

        OPEN ---close()---> CLOSING ---stop()---> STOPPING ---the connection ends---> ENDED
        OPEN ---stop()----> STOPPING               OPEN, CLOSING ---the connection ends---> ENDED
    """

    OPEN = "open"
    """Calls are sent."""
    CLOSING = "closing"
    """Closed by its user: new calls fail. Nothing is sent yet: ``close()`` may run in ``__del__``, in
    any thread, so the backend's own thread calls :meth:`CallerChannel.stop` later."""
    STOPPING = "stopping"
    """Told to stop (or killed): new calls fail; the calls already sent get their replies, then the
    connection ends (the background thread reads until it does)."""
    ENDED = "ended"
    """The connection is gone: every call that was awaited failed with the ending's error, and new
    calls fail at once."""


class Reader(enum.Enum):
    """Who reads the connection (one thread at a time). The transitions, all made by
    :class:`CallerChannel` ("a caller waits": a synchronous call is sent, or a thread waits for a
    reply)::

        NOBODY ---a caller waits---> CALLER ---its reply is in---> NOBODY
        NOBODY ---a future is sent, or the actor is told to stop---> BACKGROUND
        BACKGROUND ---a caller waits---> HANDING_OVER ---no future awaited, not stopping---> NOBODY
        HANDING_OVER ---a future is sent---> BACKGROUND
        the connection ends: the background thread keeps it (BACKGROUND) and closes the connection
    """

    NOBODY = "nobody"
    """Nobody reads; the background thread sleeps."""
    CALLER = "caller"
    """A thread that waits for a reply reads (or the backend's housekeeping, for what came unasked)."""
    BACKGROUND = "background"
    """The background thread reads: replies to futures, output, the connection's end. Once no future
    is awaited it reads on: more are likely to follow, and sleeping between them would cost a
    wake-up each."""
    HANDING_OVER = "handing over"
    """The background thread reads, and a caller waits: it stops once no future is awaited (and the
    actor is not stopping); the caller, woken by its reply or by the hand-over, reads from then on."""


class Cause(enum.Enum):
    """Why an actor ended: the kind of error its calls get."""

    CLOSED = "closed"
    """Its user or its backend closed it (:class:`ActorDiedError`)."""
    OVER_MEMORY = "over_memory"
    """It went over its ``max_memory`` and was stopped (:class:`MemoryLimitError`)."""
    DIED = "died"
    """Its process or connection ended otherwise (:class:`ActorDiedError`)."""


@dataclass(frozen=True)
class Ending:
    """Why an actor ended, as the errors of its calls say it (``text`` follows the call's name)."""

    cause: Cause
    text: str

    def error(self, where: str) -> ActorDiedError:
        """The error of a call of the ended actor; ``where`` names the call and the actor's process."""
        kind = MemoryLimitError if self.cause is Cause.OVER_MEMORY else ActorDiedError
        return kind(f"{where}: {self.text}")


CLOSED = Ending(Cause.CLOSED, "the actor was closed")
EXITED = Ending(Cause.DIED, "the worker process exited")  # when nothing more is known


def over_memory(max_memory: float, detail: str = "") -> Ending:
    """The ending of an actor stopped for going over ``max_memory`` MB (``detail``: e.g. how far)."""
    return Ending(Cause.OVER_MEMORY, f"the actor went over its max_memory of {max_memory:g} MB{detail} "
                                     f"and was stopped")


def unpicklable_arguments(call: str, error: BaseException) -> SerializationError:
    """The error of ``call`` (``Class.method()``) whose arguments ``error`` failed to pickle."""
    text = str(error).splitlines()[0] if str(error) else ""
    return SerializationError(f"{call}: an argument cannot be pickled: {type(error).__name__}: {text}")


class ReplySlot:
    """Where a synchronous call's reply lands: the parts of a Future a :class:`CallerChannel` uses,
    without its locks (a waiting thread is woken through the channel's condition; a Future costs a
    few µs)."""

    __slots__ = ("_value", "_error", "_done")

    def __init__(self) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        self._value = value
        self._done = True

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._done = True

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


# the members, looked up once: a lookup in the enum takes 0.2 µs on Python 3.11, and a call makes several
_OPEN, _CLOSING, _STOPPING, _ENDED = State.OPEN, State.CLOSING, State.STOPPING, State.ENDED
_NOBODY, _CALLER, _BACKGROUND, _HANDING_OVER = Reader.NOBODY, Reader.CALLER, Reader.BACKGROUND, Reader.HANDING_OVER


class CallerChannel(ActorChannel):
    """The caller's side of one actor (see the module docstring); a backend's channel derives from it
    and adds its transport (the abstract methods below) and ``close()``. Every method may be called
    from any thread.

    The subclass sets up its connection, then calls ``super().__init__``, which starts the background
    thread.

    Args:
        actor_name: the actor's class name, as errors name its calls (``Name.method()``); may be set
            later.
        peer: where the actor runs, as errors say it (``worker pid 12``).
        thread_name: the name of the background thread.
    """

    def __init__(self, actor_name: str | None, peer: str, thread_name: str) -> None:
        self.actor_name = actor_name
        self.peer = peer
        self.caller_state = _OPEN
        self.ending: Ending | None = None  # set when it is told to stop, or when it ended
        self.calls_served = 0
        self.last_error: str | None = None  # the last exception an actor's method raised
        self._ids = itertools.count()
        self._calls: dict[int, tuple[Future | ReplySlot, str, bool]] = {}  # id -> (slot, what, is a future)
        # futures sent and futures completed (or failed): the first grows under the lock, the second
        # only in the thread that reads, so completing a future takes no lock
        self._futures_sent = 0
        self._futures_done = 0
        self._reader = _NOBODY
        self._waiters = 0  # threads sleeping until their reply is in or nobody reads
        self._send_lock = threading.Lock()  # frames go out whole and in the order of their ids
        # guards the table, the state and the reader; reentrant because close() may run in __del__
        # in a thread that holds it
        self._lock = threading.RLock()
        self._condition = threading.Condition(self._lock)
        start_daemon(self._read_in_background, name=thread_name)

    # --- the transport: how this backend's frames travel ----------------------------------------
    # encode() runs in any thread; send() under the send lock; the rest only in the thread that
    # reads (one at a time), disconnect() once, after end().
    @abstractmethod
    def encode(self, message: tuple[Any, ...]) -> Any:
        """The frame of ``message``. Raises :class:`SerializationError` (its text follows the call's
        name) or whatever pickling raised."""

    @abstractmethod
    def discard(self, frame: Any) -> None:
        """Let go of a frame that will not be sent (the actor stopped first)."""

    @abstractmethod
    def send(self, frame: Any) -> None:
        """Send ``frame``. Raises OSError if the connection broke (its reader will see it end)."""

    @abstractmethod
    def wait(self, timeout: float | None = None) -> bool:
        """Wait until a frame begins to arrive or the connection ends (True), or ``timeout`` seconds
        pass (False). Reads nothing, so an interruption here loses nothing."""

    @abstractmethod
    def receive(self) -> tuple[Any, ...] | None:
        """The next message, read whole and decoded (waiting for it if :meth:`wait` did not); None
        once the connection has ended. Raises what decoding raised for a message that arrived whole
        but cannot be rebuilt here."""

    @abstractmethod
    def handle(self, message: tuple[Any, ...]) -> None:
        """A message that is not a reply (the actor's output, released buffers)."""

    @abstractmethod
    def end(self, expected: bool) -> "Ending | None":
        """The connection ended (``expected``: the actor was told to stop): release what it held, and
        say why the actor ended if this transport knows more than that (else None)."""

    @abstractmethod
    def disconnect(self) -> None:
        """Close the connection (the actor has ended)."""

    # --- ActorChannel ---------------------------------------------------------------------------
    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future:
        future = Future()  # what _call() does, inline: the hot path of wait=False
        self._send(future, f"{method}()", True, protocol.CALL, (method, args, kwargs))
        return future

    def get_attribute(self, name: str) -> Future:
        return self._call(f"attribute {name!r}", protocol.GETATTR, name)

    def set_attribute(self, name: str, value: Any) -> Future:
        return self._call(f"setting attribute {name!r}", protocol.SETATTR, name, value)

    def call_sync(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a method and return its value, reading the reply in this thread unless another thread
        already reads."""
        return self._run(f"{method}()", protocol.CALL, method, args, kwargs)

    def result(self, slot: Future | ReplySlot) -> Any:
        """Wait for a call of this actor and return its value: read in this thread while nobody else
        reads, else sleep until the reply is in or the reader is done."""
        while not slot.done():
            with self._lock:
                if slot.done():
                    break
                if self._reader is not _NOBODY:
                    if self._reader is _BACKGROUND:
                        self._reader = _HANDING_OVER
                    self._waiters += 1
                    try:
                        self._condition.wait()
                    finally:
                        self._waiters -= 1
                    continue
                self._reader = _CALLER
            self._read_until(slot)
        return slot.result()

    def close(self) -> None:
        """Refuse new calls (OPEN -> CLOSING); the subclass arranges for :meth:`stop` to be called
        from a thread of its backend. Safe in ``__del__``."""
        with self._lock:
            if self.caller_state is _OPEN:
                self.caller_state = _CLOSING
                self._record(CLOSED)

    # --- calls ----------------------------------------------------------------------------------
    def _call(self, what: str, kind: str, *fields: Any) -> Future:
        """Send a call (``(kind, call_id, *fields)``); its future is completed by whichever thread
        reads (the background thread if no caller does). ``what`` names it in errors (``run()``)."""
        future = Future()
        self._send(future, what, True, kind, fields)
        return future

    def _run(self, what: str, kind: str, *fields: Any) -> Any:
        """Send a call and return its value (see :meth:`call_sync`)."""
        slot = ReplySlot()
        if self._send(slot, what, False, kind, fields):
            self._read_until(slot)
        return self.result(slot)

    def _send(self, slot: Future | ReplySlot, what: str, is_future: bool, kind: str,
              fields: tuple[Any, ...]) -> bool:
        """Enter and send a call; True if this thread became the reader (only for a synchronous call
        when nobody read)."""
        call_id = next(self._ids)
        reading = False
        try:
            frame = self.encode((kind, call_id, *fields))
        except SerializationError as error:
            raise SerializationError(f"{self.actor_name}.{what}: {error}") from error
        except Exception as error:
            raise unpicklable_arguments(f"{self.actor_name}.{what}", error) from error
        with self._send_lock:
            with self._lock:
                if self.caller_state is not _OPEN:
                    self.discard(frame)
                    slot.set_exception(self._error(what))
                    return False
                self._calls[call_id] = (slot, what, is_future)
                if is_future:
                    self._futures_sent += 1
                    if self._reader is _NOBODY:
                        self._condition.notify_all()  # the background thread reads its reply
                    elif self._reader is _HANDING_OVER:
                        self._reader = _BACKGROUND
                elif self._reader is _NOBODY:
                    self._reader = _CALLER
                    reading = True
                elif self._reader is _BACKGROUND:
                    self._reader = _HANDING_OVER
            try:
                self.send(frame)
            except OSError:
                pass  # the reader sees the connection end and fails this call
            except BaseException:  # not the connection's (e.g. a Ctrl-C while the frame goes out): stop reading
                if reading:
                    self._stop_reading()
                raise
        return reading

    def _error(self, what: str) -> ActorDiedError:
        """The error of call ``what`` of an actor that is stopping or ended."""
        return (self.ending or EXITED).error(f"{self.actor_name}.{what} ({self.peer})")

    # --- the actor's life -----------------------------------------------------------------------
    def stop(self, ending: Ending = CLOSED, send_stop: bool = True) -> None:
        """Stop the actor after the calls already sent (-> STOPPING): send it the STOP, or with
        ``send_stop=False`` only record ``ending`` (the backend kills the process; this then waits
        for no sender). Idempotent."""
        if not send_stop:
            self._begin_stopping(ending)
            return
        with self._send_lock:  # the calls entered before are sent before the STOP
            if self._begin_stopping(ending):
                try:
                    self.send(self.encode((protocol.STOP,)))
                except OSError:
                    pass

    def _begin_stopping(self, ending: Ending) -> bool:
        """OPEN or CLOSING -> STOPPING, for ``ending``; False if it was stopping or ended already."""
        with self._lock:
            if self.caller_state is _STOPPING or self.caller_state is _ENDED:
                return False
            self.caller_state = _STOPPING
            self._record(ending)
            self._condition.notify_all()  # the background thread reads until the connection ends
            return True

    def send_control(self, message: tuple[Any, ...]) -> None:
        """Send a message that is not a call (the pool's RELEASE and PREFETCH), unless the actor ended."""
        with self._send_lock:
            if self.caller_state is not _ENDED:
                try:
                    self.send(self.encode(message))
                except OSError:
                    pass

    def _record(self, ending: Ending) -> None:
        """Keep ``ending`` as the reason (the lock is held): the first one, but a definite cause
        outranks a close (an actor closed while it went over its memory was stopped for its memory)."""
        if self.ending is None or (self.ending.cause is Cause.CLOSED and ending.cause is not Cause.CLOSED):
            self.ending = ending

    # --- reading --------------------------------------------------------------------------------
    def read_available(self) -> None:
        """Dispatch what arrived while nobody read (an idle actor's output, its end), unless another
        thread reads; for the backend's housekeeping."""
        with self._lock:
            if self._reader is not _NOBODY or self.caller_state is _ENDED:
                return
            self._reader = _CALLER
        try:
            while self.caller_state is not _ENDED and self.wait(0):
                self._read_one()
        finally:
            self._stop_reading()

    def _read_until(self, slot: Future | ReplySlot) -> None:
        """Read and dispatch frames until ``slot`` is done (this thread is the reader)."""
        try:
            while not slot.done() and self.caller_state is not _ENDED:
                self.wait()  # a Ctrl-C here loses nothing
                ctrl_c_held_back(self._read_one)  # the frame is read whole and dispatched
        finally:
            self._stop_reading()

    def _stop_reading(self) -> None:
        with self._lock:
            self._reader = _NOBODY
            # only threads that want to read need waking: a needless wake-up of the sleeping
            # background thread would cost a context switch on every synchronous call
            if self._waiters or self._futures_sent != self._futures_done or self.caller_state is _STOPPING \
                    or self.caller_state is _ENDED:
                self._condition.notify_all()

    def _background_wanted(self) -> bool:
        return self._reader is _NOBODY and (self._futures_sent != self._futures_done
                                            or self.caller_state is _STOPPING or self.caller_state is _ENDED)

    def _read_in_background(self) -> None:
        while True:
            with self._lock:
                self._condition.wait_for(self._background_wanted)
                self._reader = _BACKGROUND
                if self.caller_state is _ENDED:
                    break
            try:
                while self.caller_state is not _ENDED and (self._reader is _BACKGROUND or self.caller_state is _STOPPING
                                                           or self._futures_sent != self._futures_done):
                    self._read_one()  # no Ctrl-C lands in this thread: receive() may wait as it likes
            finally:
                self._stop_reading()
        with self._send_lock:  # no thread is inside send() when the connection closes
            self.disconnect()

    def _read_one(self) -> None:
        """Read one frame and dispatch it (this thread is the reader)."""
        try:
            message = self.receive()
        except Exception as error:  # arrived whole, but e.g. the return value's class does not exist here
            self._resolve(protocol.UNKNOWN_CALL, None, None, error)
            return
        if message is None:
            self._end()
            return
        kind = message[0]
        if kind == protocol.OK:
            self._resolve(message[1], message[2], None, None)
        elif kind == protocol.ERROR:
            self._resolve(message[1], None, message[2], None)
        else:
            self.handle(message)

    def _resolve(self, call_id: int, value: Any, failure: Any, undecodable: BaseException | None) -> None:
        """Complete call ``call_id`` (UNKNOWN_CALL: the oldest) with its value, the failure the actor
        sent, or the error that its reply could not be decoded."""
        if call_id == protocol.UNKNOWN_CALL:
            call_id = next(iter(self._calls), protocol.UNKNOWN_CALL)
        entry = self._calls.pop(call_id, None)
        if entry is None:
            return
        slot, what, is_future = entry
        self._futures_done += is_future
        self.calls_served += 1
        if undecodable is not None:
            slot.set_exception(SerializationError(f"{self.actor_name}.{what}: the reply cannot be unpickled "
                                                  f"here: {type(undecodable).__name__}: {undecodable}"))
        elif failure is not None:
            self.last_error = f"{failure.type_name}: {failure.message}"
            slot.set_exception(failure.to_exception(f"{self.actor_name}.{what}"))
        else:
            slot.set_result(value)
        if self._waiters:  # after the result is set: a woken waiter must find its reply in
            with self._lock:
                self._condition.notify_all()

    def _end(self) -> None:
        """The connection ended: -> ENDED, and every call awaited fails with the ending's error."""
        ending = self.end(expected=self.caller_state is not _OPEN)
        with self._lock:
            self.caller_state = _ENDED
            self._record(ending or self.ending or EXITED)  # EXITED: nothing more is known
            calls, self._calls = self._calls, {}
            self._futures_done = self._futures_sent
            self._condition.notify_all()
        for slot, what, _ in calls.values():
            slot.set_exception(self._error(what))


def ctrl_c_held_back(action: Callable[[], T]) -> T:
    """``action()``, with a Ctrl-C that arrives meanwhile raised only once it has returned.

    Only the main thread runs Python's SIGINT handler; elsewhere, and where that handler was not set
    from Python (ignored, or the default action), ``action`` just runs.
    """
    previous = _signal.getsignal(signal.SIGINT)
    if not callable(previous) or threading.current_thread() is not threading.main_thread():
        return action()
    caught: list[int] = []
    _signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        return action()
    finally:
        _signal.signal(signal.SIGINT, previous)
        if caught:
            signal.raise_signal(signal.SIGINT)  # the handler it was meant for runs now
