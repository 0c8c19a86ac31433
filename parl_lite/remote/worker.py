"""The loop a worker process runs: build one actor, then serve its calls in order until told to stop.

Everything the actor prints reaches the caller as OUTPUT messages (the caller prefixes each line
with the actor's name), so actors are not debugged blind. Whatever a call raises, ``SystemExit`` and
``KeyboardInterrupt`` included, goes back to the caller as its error; the actor keeps serving.
"""
import codecs
import functools
import inspect
import io
import os
import pickle
import select
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle
import numpy as np

from parl_lite.remote import protocol
from parl_lite.remote.backend import MethodReference
from parl_lite.remote.errors import RemoteFailure
from parl_lite.remote.shm import FREE_IDLE_SECONDS, Borrowed, SegmentPool

__all__ = ["serve", "send_note"]

_channel: "_Channel | None" = None  # this worker process's connection to its pool, once it serves


class _Channel:
    """The worker's end of the connection; sends are locked because actor threads may print."""

    def __init__(self, connection: Connection, segments: SegmentPool) -> None:
        self.connection = connection
        self.segments = segments
        self.borrowed = Borrowed()
        self.lock = threading.Lock()
        self.poller = select.poll()
        self.poller.register(connection.fileno(), select.POLLIN)

    def send(self, message: tuple[Any, ...]) -> None:
        self.send_frame(protocol.encode(message, self.segments)[0])

    def send_frame(self, frame: bytes) -> None:
        with self.lock:
            self.connection.send_bytes(frame)

    def receive(self) -> tuple[Any, ...]:
        # an idle worker keeps no free segments, nor mappings of segments its caller unlinked
        while not self.poller.poll(FREE_IDLE_SECONDS * 1000):
            self.segments.trim(0.0)
            self.borrowed.trim()
        return protocol.decode(self.connection.recv_bytes(), self.borrowed, self.segments)

    def reply(self, reply: tuple[Any, ...]) -> bytes:
        """Encode a reply; buffers of the caller's segments are referred to, not copied."""
        try:
            return protocol.encode(reply, self.segments, borrowed=self.borrowed)[0]
        except Exception as exc:  # the value cannot be pickled
            failure = RemoteFailure.from_exception(exc, serialization=True)
            return protocol.encode((protocol.ERROR, reply[1], failure), self.segments)[0]

    def send_releases(self) -> None:
        released = self.borrowed.take_released()
        if released:
            self.send((protocol.RELEASE, released))


class _ForwardedStream(io.TextIOBase):
    """A text stream that sends whole lines to the caller as OUTPUT messages; bytes written to its
    ``buffer`` (as ``sys.stdout.buffer.write(b"...")`` does) are decoded as UTF-8 into the same lines."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, channel: _Channel, name: str) -> None:
        self.channel = channel
        self.name = name
        self.pending = ""
        self._buffer = _ForwardedBytes(self)

    @property
    def buffer(self) -> "_ForwardedBytes":
        return self._buffer

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        if "\n" in self.pending:
            complete, self.pending = self.pending.rsplit("\n", 1)
            self.channel.send((protocol.OUTPUT, self.name, complete + "\n"))
        return len(text)

    def flush(self) -> None:
        if self.pending:
            text, self.pending = self.pending, ""
            self.channel.send((protocol.OUTPUT, self.name, text))


class _ForwardedBytes(io.BufferedIOBase):
    """The ``buffer`` of a :class:`_ForwardedStream`: bytes in, text out (a character split across
    two writes is decoded whole)."""

    def __init__(self, text: _ForwardedStream) -> None:
        self._text = text
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def writable(self) -> bool:
        return True

    def write(self, data: "bytes | bytearray | memoryview") -> int:  # type: ignore[override]
        data = bytes(data)
        self._text.write(self._decoder.decode(data))
        return len(data)

    def flush(self) -> None:
        self._text.flush()


def serve(connection: Connection, segment_prefix: str, warm_up_when_idle: bool = False,
          large_messages: bool = True) -> None:
    """Serve one actor over ``connection`` until STOP or until the caller goes away; with
    ``warm_up_when_idle``, warm up once (:func:`_warm_up`, the large-message path too with
    ``large_messages``) after a reply when no request waits (a worker forked for an actor that was
    waiting for it)."""
    global _channel
    channel = _channel = _Channel(connection, SegmentPool(f"{segment_prefix}w{os.getpid()}_"))
    sys.stdout = _ForwardedStream(channel, "stdout")
    sys.stderr = _ForwardedStream(channel, "stderr")
    actor: Any | None = None
    value: Any = None
    while True:
        channel.send_releases()
        try:
            message = channel.receive()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == protocol.STOP:
            return
        if kind == protocol.RELEASE:
            channel.segments.release(message[1])
            continue
        if kind == protocol.PREFETCH:
            _prefetch(channel.borrowed, message[1])
            continue
        call_id = message[1]
        try:
            actor, value = _run(actor, message)
            reply = (protocol.OK, call_id, value)
        except BaseException as exc:  # sys.exit() and KeyboardInterrupt in a method are its errors too
            reply = (protocol.ERROR, call_id, RemoteFailure.from_exception(exc))
        del message  # let arguments that view the caller's shared memory go
        value = None
        _flush_output()
        frame = channel.reply(reply)
        del reply  # now only the actor itself may still view the caller's segments
        channel.send_frame(protocol.settle(frame, channel.borrowed, channel.segments))
        if warm_up_when_idle and not connection.poll(0):
            _warm_up(segment_prefix, large_messages)
            warm_up_when_idle = False


def send_note(value: Any) -> None:
    """Send ``value`` to the pool running this worker, beside the replies: its owner's ``on_note``
    gets it (in order with the worker's output and replies).

    Raises:
        RuntimeError: this process is not a pool's worker.
    """
    if _channel is None:
        raise RuntimeError("send_note: this process is not a parl_lite pool worker")
    _channel.send((protocol.NOTE, value))


def _run(actor: Any | None, message: tuple[Any, ...]) -> tuple[Any, Any]:
    """Carry out one request; return the (possibly new) actor and the request's value."""
    kind = message[0]
    if kind == protocol.CALL:
        return actor, getattr(actor, message[2])(*message[3], **message[4])
    if kind == protocol.GETATTR:
        value = getattr(actor, message[2])
        return actor, MethodReference() if inspect.isroutine(value) else value
    if kind == protocol.SETATTR:
        setattr(actor, message[2], message[3])
        return actor, None
    if kind == protocol.CREATE:
        return pickle.loads(message[2])(*message[3], **message[4]), None
    raise ValueError(f"unknown message kind {kind!r}")


def _flush_output() -> None:
    sys.stdout.flush()
    sys.stderr.flush()


def _prefetch(borrowed: Borrowed, names: list[str]) -> None:
    for name in names:
        try:
            borrowed.prefetch(name)
        except OSError:
            pass  # gone meanwhile, or not ours: the message that uses it will say so


def _warm_up(segment_prefix: str, large_messages: bool = True) -> None:
    """Rebuild a class sent by value as an actor's is and, with ``large_messages``, take the
    large-message path once, in a worker that waits for its actor: a forked process pays
    copy-on-write faults and first-use costs on its first class and its first large message
    otherwise. Where no segment can be made (``/dev/shm`` full, a file size limit below a segment's
    size) the large-message path is left cold: the worker serves all the same, and a large message
    fails with an error that says why."""
    rebuild_a_class()
    if not large_messages:
        return
    segments = SegmentPool(f"{segment_prefix}w{os.getpid()}_")
    borrowed = Borrowed()
    try:
        frame, _ = protocol.encode((protocol.OK, 0, np.zeros(protocol.INLINE_LIMIT, np.uint8)), segments)
        message = protocol.decode(frame, borrowed)
        reply, _ = protocol.encode(message, segments, borrowed=borrowed)
        del message
        protocol.settle(reply, borrowed, segments)
    except OSError:
        pass
    finally:
        segments.close()


@functools.cache  # made once, by the zygote's first call before it forks: its workers inherit it
def _class_sent_by_value() -> bytes:
    """A class pickled as an actor's class defined in a script is (by value, with its methods)."""

    class Actor:  # local, so that cloudpickle cannot refer to it by name
        def __init__(self) -> None:
            self.value = None

        def call(self, value: Any) -> Any:
            return value

    return cloudpickle.dumps(Actor, protocol=5)


def rebuild_a_class() -> None:
    """Unpickle a class sent by value and build an instance, as CREATE does: the zygote does it
    once (first-use costs, paid once for all workers), a worker once more while it waits (the pages
    it touches are then its own)."""
    pickle.loads(_class_sent_by_value())()


def run_forked_worker(fd: int, segment_prefix: str, warm_up_first: bool = True, large_messages: bool = True) -> None:
    """Entry point of a process the zygote just forked: serve, then exit without cleanup. A worker of
    the warm pool (``warm_up_first``) warms up before it waits for its actor; one an actor waits for
    serves that actor first and warms up once it is idle (the large-message path only with
    ``large_messages``)."""
    status = 0
    try:
        if warm_up_first:
            _warm_up(segment_prefix, large_messages)
        # not inherited by a program the actor execs (the zygote's fd arrives inheritable): the
        # connection closes with the old program, so the caller learns at once that the actor is gone
        os.set_inheritable(fd, False)
        serve(Connection(fd), segment_prefix, warm_up_when_idle=not warm_up_first, large_messages=large_messages)
    except BaseException:
        status = 1
    finally:
        os._exit(status)
