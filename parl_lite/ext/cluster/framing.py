"""Messages on an authenticated cluster connection: frames, and the pickles inside them.

Each message is one frame::

    header  "!IH" (body length, number of raw buffers) + "!Q" per buffer (its length)
    body    JSON (control messages) or a pickle-5 stream (actor messages)
    buffers the pickle's out-of-band buffers (numpy arrays), raw, received straight into their
            final memory with ``recv_into`` (no copy into or out of a pickle)

This module is all a node's worker process needs to serve an actor (it imports no hashing, no
authentication: the node did that before handing the socket over).
"""
import contextlib
import json
import pickle
import select
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

import cloudpickle
import numpy

__all__ = ["FramedSocket", "FrameTooLargeError", "encode", "decode", "frame_size", "INLINE_LIMIT"]

INLINE_LIMIT = 64 * 1024  # buffers smaller than this stay inside the pickle
_HEADER = struct.Struct("!IH")
_SIZE = struct.Struct("!Q")
_READ_CHUNK = 256 * 1024  # what one recv may take once messages fill the inbox
# a new connection's inbox: a control message or a small call fits; a zero-filled 256 KiB buffer per
# connection cost more than the rest of opening an actor's connection, and stayed with each actor
_FIRST_INBOX = 4 * 1024


class FrameTooLargeError(ValueError):
    """A message's header announces more bytes than the connection's limit (nothing was allocated
    for it; the rest of the connection cannot be read)."""


def frame_size(body: bytes, buffers: Sequence[memoryview]) -> int:
    """Bytes a message takes on the wire (what the receiver's limit is checked against)."""
    return len(body) + sum(buffer.nbytes for buffer in buffers)


def encode(message: Any) -> tuple[bytes, list[memoryview]]:
    """Pickle ``message`` (pickle, then cloudpickle for lambdas and ``__main__`` classes); buffers of
    :data:`INLINE_LIMIT` bytes or more are returned apart, to be sent raw."""
    buffers: list[memoryview] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if raw.nbytes < INLINE_LIMIT:
            return True
        buffers.append(raw)
        return False

    try:
        return pickle.dumps(message, protocol=5, buffer_callback=out_of_band), buffers
    except (pickle.PicklingError, TypeError, AttributeError):
        buffers.clear()
        return cloudpickle.dumps(message, protocol=5, buffer_callback=out_of_band), buffers


def decode(body: bytes, buffers: Sequence[Any]) -> Any:
    """Rebuild what :func:`encode` pickled; arrays view the received buffers (writable, no copy)."""
    return pickle.loads(body, buffers=buffers)


class FramedSocket:
    """Messages over an authenticated TCP socket. ``send`` may be called from several threads;
    one thread at a time receives.

    Args:
        sock: the connected socket.
        peer: who is at the other end (for messages).
        limit: the largest message :meth:`receive` takes, in bytes (body and buffers); a header
            announcing more raises :class:`FrameTooLargeError` before anything is allocated.
    """

    def __init__(self, sock: socket.socket, peer: str, limit: int) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.peer = peer
        self.limit = limit
        self._inbox = bytearray(_FIRST_INBOX)  # grows to _READ_CHUNK when a receive fills it
        self._start = 0  # unread bytes of the inbox are [_start, _end)
        self._end = 0
        self._deadline: float | None = None  # while set (time.monotonic()), every read ends by then

    # --- sending --------------------------------------------------------------------------------
    def send(self, body: bytes, buffers: Sequence[memoryview] = ()) -> None:
        """Send one message (the caller serialises concurrent senders)."""
        if not buffers:  # the common case: one send of header and body
            self.sock.sendall(_HEADER.pack(len(body), 0) + body)
            return
        header = _HEADER.pack(len(body), len(buffers)) + b"".join(_SIZE.pack(b.nbytes) for b in buffers)
        parts = [memoryview(header + body), *(b.cast("B") for b in buffers)]
        while parts:
            sent = self.sock.sendmsg(parts[:64])
            while parts and sent >= parts[0].nbytes:
                sent -= parts[0].nbytes
                parts.pop(0)
            if parts and sent:
                parts[0] = parts[0][sent:]

    def send_json(self, message: dict[str, Any]) -> None:
        self.send(json.dumps(message).encode())

    # --- receiving ------------------------------------------------------------------------------
    def wait_for_message(self, timeout: float | None = None) -> bool:
        """True once a message has begun to arrive (or the connection ended), False after ``timeout``
        seconds. Nothing is read, so an interruption here loses nothing; :meth:`receive` then reads
        the message."""
        if self._end != self._start:
            return True
        try:
            poller = select.poll()  # not select(): a client's connections are numbered past 1024
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(None if timeout is None else timeout * 1000))
        except (OSError, ValueError):  # closed meanwhile: receive() says so
            return True

    def _fill(self) -> None:
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(self._inbox):
            del self._inbox[:self._start]
            self._end -= self._start
            self._start = 0
            self._inbox.extend(bytes(max(0, _READ_CHUNK - len(self._inbox))))
        if self._deadline is not None:
            self._time_left()
        received = self.sock.recv_into(memoryview(self._inbox)[self._end:])
        if not received:
            raise EOFError(f"{self.peer} closed the connection")
        self._end += received

    def _take(self, size: int) -> bytes:
        while self._end - self._start < size:
            if self._end == len(self._inbox):  # a body larger than the inbox: make room as it comes
                del self._inbox[:self._start]
                self._end -= self._start
                self._start = 0
                self._inbox.extend(bytes(min(size - len(self._inbox), max(len(self._inbox), _READ_CHUNK))))
            self._fill()
        data = bytes(self._inbox[self._start:self._start + size])
        self._start += size
        return data

    def _take_into(self, target: "numpy.ndarray") -> None:
        view = target.data  # a memoryview of the array's bytes
        buffered = min(self._end - self._start, len(target))
        view[:buffered] = self._inbox[self._start:self._start + buffered]
        self._start += buffered
        filled = buffered
        while filled < len(target):
            if self._deadline is not None:
                self._time_left()
            received = self.sock.recv_into(view[filled:])
            if not received:
                raise EOFError(f"{self.peer} closed the connection")
            filled += received

    def receive(self) -> tuple[bytes, list["numpy.ndarray"]]:
        """The next message's body and raw buffers.

        Raises:
            EOFError: the peer closed the connection.
            OSError: the connection broke.
            FrameTooLargeError: the message is over :attr:`limit`.
        """
        if self._end - self._start < _HEADER.size:
            self._fill()
        body_size, count = _HEADER.unpack(self._take(_HEADER.size))
        if not count and self._end - self._start >= body_size:  # the common case: all in the inbox
            body = bytes(memoryview(self._inbox)[self._start:self._start + body_size])
            self._start += body_size
            return body, []
        self._check_size(body_size)
        sizes = [_SIZE.unpack(self._take(_SIZE.size))[0] for _ in range(count)]
        self._check_size(body_size + sum(sizes))
        body = self._take(body_size)
        buffers = []
        for size in sizes:
            buffer = numpy.empty(size, numpy.uint8)  # not zero-filled, unlike bytearray(size)
            self._take_into(buffer)
            buffers.append(buffer)
        return body, buffers

    def _check_size(self, size: int) -> None:
        if size > self.limit:
            raise FrameTooLargeError(f"{self.peer} announced a message of {size} bytes, over this "
                                     f"connection's limit of {self.limit} bytes")

    def receive_json(self) -> Any:
        """The next message as JSON (any JSON value: the caller checks its shape).

        Raises:
            ValueError: not JSON, or over the limit (:class:`FrameTooLargeError`).
        """
        body, _ = self.receive()
        try:
            return json.loads(body)
        except RecursionError:
            raise ValueError(f"{self.peer} sent JSON nested too deeply") from None

    def receive_json_before(self, deadline: float) -> Any:
        """:meth:`receive_json`, all of the message before ``deadline`` (``time.monotonic()``)
        however slowly its bytes come (a timeout on each read would let a peer that trickles it hold
        the connection for ever); then the socket blocks without a timeout again.

        Raises:
            TimeoutError: the deadline passed first.
        """
        self._deadline = deadline
        try:
            return self.receive_json()
        finally:
            self._deadline = None
            with contextlib.suppress(OSError):  # closed meanwhile
                self.sock.settimeout(None)

    def _time_left(self) -> None:
        remaining = self._deadline - time.monotonic() if self._deadline is not None else 0.0
        if remaining <= 0:
            raise TimeoutError(f"{self.peer} took too long to send its message")
        self.sock.settimeout(remaining)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
