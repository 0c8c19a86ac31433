"""The messages between a caller and an actor's worker, and how they become bytes.

A message is a tuple whose first item is its kind. It is pickled with protocol 5: buffers under
:data:`INLINE_LIMIT` bytes stay in the pickle; larger ones (numpy arrays, bytes-like objects) go
out of band into one shared-memory segment per message (:mod:`parl_lite.remote.shm`), which the
receiver RELEASEs for reuse once no array views it. ``pickle``
is tried first because it is several times faster than ``cloudpickle`` on plain data; cloudpickle
takes over for lambdas and classes defined in ``__main__``.

Frames: ``b"I" + pickle`` (everything inline) or ``b"S" + pickle((segment, layout, pickle))``.
"""
import pickle
from typing import Any, List, Optional, Tuple

import cloudpickle

from parl_lite.remote.shm import Borrowed, SegmentPool

__all__ = [
    "CREATE", "CALL", "GETATTR", "SETATTR", "STOP", "RELEASE", "OK", "ERROR", "OUTPUT",
    "INLINE_LIMIT", "encode", "decode",
]

# caller -> worker
CREATE = "create"    # (CREATE, call_id, class_blob, args, kwargs)
CALL = "call"        # (CALL, call_id, method_name, args, kwargs)
GETATTR = "getattr"  # (GETATTR, call_id, attribute_name)
SETATTR = "setattr"  # (SETATTR, call_id, attribute_name, value)
STOP = "stop"        # (STOP,)
# both ways
RELEASE = "release"  # (RELEASE, [segment names the receiver no longer maps])
# worker -> caller
OK = "ok"            # (OK, call_id, value)
ERROR = "error"      # (ERROR, call_id, RemoteFailure)
OUTPUT = "output"    # (OUTPUT, stream_name, text)

INLINE_LIMIT = 64 * 1024

_INLINE = b"I"
_SEGMENT = b"S"


def encode(message: Tuple[Any, ...], segments: SegmentPool) -> Tuple[bytes, Optional[str]]:
    """Serialize ``message``; return the frame and the name of its segment, if it made one.

    Raises:
        pickle.PicklingError, TypeError, AttributeError: part of the message cannot be pickled.
    """
    buffers: List[memoryview] = []

    def keep_large_out_of_band(buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if raw.nbytes < INLINE_LIMIT:
            return True
        buffers.append(raw)
        return False

    try:
        data = pickle.dumps(message, protocol=5, buffer_callback=keep_large_out_of_band)
    except (pickle.PicklingError, TypeError, AttributeError):
        buffers.clear()
        data = cloudpickle.dumps(message, protocol=5, buffer_callback=keep_large_out_of_band)
    if not buffers:
        return _INLINE + data, None
    name, layout = segments.write(buffers)
    return _SEGMENT + pickle.dumps((name, layout, data), protocol=5), name


def decode(frame: bytes, borrowed: Borrowed) -> Tuple[Any, ...]:
    """Rebuild a message from :func:`encode`'s frame (large arrays view shared memory, no copy)."""
    body = memoryview(frame)[1:]
    if frame[:1] == _INLINE:
        return pickle.loads(body)
    name, layout, data = pickle.loads(body)
    return pickle.loads(data, buffers=borrowed.attach(name, layout))
