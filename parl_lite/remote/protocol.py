"""The messages between a caller and an actor's worker, and how they become bytes.

A message is a tuple whose first item is its kind. It is pickled with protocol 5: buffers under
:data:`INLINE_LIMIT` bytes stay in the pickle; larger ones (numpy arrays, bytes-like objects) go
out of band into one shared-memory segment per message (:mod:`parl_lite.remote.shm`), which the
receiver RELEASEs for reuse once no array views it. ``pickle``
is tried first because it is several times faster than ``cloudpickle`` on plain data; cloudpickle
takes over for lambdas and classes defined in ``__main__``.

A worker's reply may also hand back, without a copy, buffers that lie in a segment the caller sent
(an actor that returns its argument, or a view of it): the entry then names the caller's own
segment. Only when nothing in the worker views that segment any more (:func:`settle`), so that the
caller's result can never change under it.

Frames: ``b"I" + pickle`` (everything inline) or ``b"S" + pickle((entries, pickle))`` where each
out-of-band buffer has an entry ``(owner, segment, offset, size)``, owner ``SENDERS`` or ``YOURS``.
"""
import pickle
from typing import Any

import cloudpickle

from parl_lite.remote.errors import SerializationError
from parl_lite.remote.shm import Borrowed, SegmentPool

__all__ = [
    "CREATE", "CALL", "GETATTR", "SETATTR", "STOP", "PREFETCH", "RELEASE", "OK", "ERROR", "OUTPUT", "NOTE",
    "UNKNOWN_CALL", "INLINE_LIMIT", "encode", "decode", "settle", "ClassBlobs",
]

# caller -> worker
CREATE = "create"    # (CREATE, call_id, class_blob, args, kwargs)
CALL = "call"        # (CALL, call_id, method_name, args, kwargs)
GETATTR = "getattr"  # (GETATTR, call_id, attribute_name)
SETATTR = "setattr"  # (SETATTR, call_id, attribute_name, value)
STOP = "stop"        # (STOP,)
PREFETCH = "prefetch"  # (PREFETCH, [segment names to map ahead of need])
# both ways
RELEASE = "release"  # (RELEASE, [segment names the receiver no longer maps])
# worker -> caller
OK = "ok"            # (OK, call_id, value)
ERROR = "error"      # (ERROR, call_id, RemoteFailure)
OUTPUT = "output"    # (OUTPUT, stream_name, text)
NOTE = "note"        # (NOTE, value): news for the pool's owner beside the replies (a cluster actor host's figures)
UNKNOWN_CALL = -1    # the call id of an ERROR about a request that could not be decoded: the oldest call's

INLINE_LIMIT = 64 * 1024

_INLINE = b"I"
_SEGMENT = b"S"
SENDERS = "s"  # the buffer lies in a segment of the sender's
YOURS = "y"  # the buffer lies in one of the receiver's own segments, which it lent the sender

Entry = tuple[str, str, int, int]


def encode(message: tuple[Any, ...], segments: SegmentPool, holder: Any = 0,
           borrowed: Borrowed | None = None) -> tuple[bytes, str | None]:
    """Serialize ``message``; return the frame and the name of the segment it filled, if any.

    Args:
        message: the tuple to send.
        segments: the sender's segments; large buffers are copied into one, lent to ``holder``.
        holder: who receives the message (the key under which the segment is lent).
        borrowed: the receiver's segments mapped here: buffers inside them are referred to, not
            copied (call :func:`settle` once the message's objects are dropped).

    Raises:
        pickle.PicklingError, TypeError, AttributeError: part of the message cannot be pickled.
    """
    buffers: list[memoryview] = []
    entries: list[Entry | None] = []

    def keep_large_out_of_band(buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if raw.nbytes < INLINE_LIMIT:
            return True
        place = borrowed.locate(raw) if borrowed is not None else None
        if place is None:
            buffers.append(raw)
            entries.append(None)
        else:
            entries.append((YOURS, place[0], place[1], raw.nbytes))
        return False

    try:
        data = pickle.dumps(message, protocol=5, buffer_callback=keep_large_out_of_band)
    except (pickle.PicklingError, TypeError, AttributeError):
        buffers.clear()
        entries.clear()
        data = cloudpickle.dumps(message, protocol=5, buffer_callback=keep_large_out_of_band)
    if not entries:
        return _INLINE + data, None
    name = None
    if buffers:
        name, layout = segments.write(buffers, holder)
        places = iter(layout)
        entries = [entry or (SENDERS, name, *next(places)) for entry in entries]
    return _SEGMENT + pickle.dumps((entries, data), protocol=5), name


def settle(frame: bytes, borrowed: Borrowed, segments: SegmentPool, holder: Any = 0) -> bytes:
    """Copy into a segment of the sender's the buffers of ``frame`` that lie in receiver's segments
    something here still views (the actor kept its argument), so that the receiver's value never
    changes under it; ``frame`` itself when there are none."""
    if frame[:1] != _SEGMENT:
        return frame
    entries, data = pickle.loads(memoryview(frame)[1:])
    returned = {name for owner, name, _, _ in entries if owner == YOURS}
    kept = {}  # entry index -> the base array something here still views
    for index, (owner, name, _, _) in enumerate(entries):
        base = borrowed.in_use(name) if owner == YOURS else None
        if base is not None:
            kept[index] = base
    borrowed.returned(returned - {entries[index][1] for index in kept})
    if not kept:
        return frame
    views = []
    for index, base in kept.items():
        _, _, offset, size = entries[index]
        views.append(base.data.cast("B")[offset:offset + size])
    name, layout = segments.write(views, holder)
    for view in views:
        view.release()
    for index, (offset, size) in zip(kept, layout, strict=True):
        entries[index] = (SENDERS, name, offset, size)
    return _SEGMENT + pickle.dumps((entries, data), protocol=5)


def decode(frame: bytes, borrowed: Borrowed, segments: SegmentPool | None = None,
           sender: Any = 0) -> tuple[Any, ...]:
    """Rebuild a message from :func:`encode`'s frame (large arrays view shared memory, no copy).

    Args:
        frame: the bytes received.
        borrowed: maps the sender's segments here.
        segments: this side's own segments, for buffers the sender handed back.
        sender: the key under which this side lent its segments to the sender.
    """
    body = memoryview(frame)[1:]
    if frame[:1] == _INLINE:
        return pickle.loads(body)
    entries, data = pickle.loads(body)
    views: dict[tuple[str, str], Any] = {}
    buffers = []
    for owner, name, offset, size in entries:
        view = views.get((owner, name))
        if view is None:
            if owner == YOURS and segments is not None:
                view = segments.map_own(name, sender)
            else:
                view = borrowed.map(name)
            views[owner, name] = view
        if offset < 0 or offset + size > len(view):
            raise ValueError(f"a buffer of {size} bytes at {offset} does not fit in segment {name!r}")
        buffers.append(view[offset:offset + size])
    return pickle.loads(data, buffers=buffers)


class ClassBlobs:
    """Classes pickled by value (cloudpickle) once each, to build actors where they are sent.

    Args:
        destination: where the classes go ("worker", "node"), for the error message.
    """

    def __init__(self, destination: str) -> None:
        self._destination = destination
        self._blobs: dict[type, bytes] = {}

    def blob(self, cls: type) -> bytes:
        """``cls`` pickled, from the cache after the first time.

        Raises:
            SerializationError: the class cannot be pickled.
        """
        blob = self._blobs.get(cls)
        if blob is None:
            try:
                blob = cloudpickle.dumps(cls, protocol=5)
            except Exception as exc:
                raise SerializationError(f"class {cls.__qualname__} cannot be pickled to send it to a "
                                         f"{self._destination}: {type(exc).__name__}: {exc}") from exc
            self._blobs[cls] = blob
        return blob
