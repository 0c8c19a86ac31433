"""Shared-memory segments that carry the large buffers of messages between two processes.

A sender copies every large buffer of a message into one segment (a file under ``/dev/shm``) and
sends only its name; the receiver maps it and hands the mapping to ``pickle.loads`` as out-of-band
buffers, so numpy arrays are rebuilt without a copy. When the last array viewing a mapping is gone,
the receiver tells the sender (a RELEASE message), and the sender reuses the segment for a later
message. Reuse matters: writing into pages that already exist is a plain memcpy, while fresh pages
cost a page fault each (on these virtual machines, more than the copy itself).

Every name starts with the pool's session prefix, then ``<owner tag><pid>_``, so what a crash leaves
behind can be swept by prefix.
"""
import collections
import glob
import itertools
import mmap
import os
import threading
import weakref
from typing import Deque, Dict, List, Optional, Sequence, Tuple

__all__ = ["SHM_DIR", "SegmentPool", "Borrowed", "unlink_segment", "remove_session_segments",
           "session_segments"]

SHM_DIR = "/dev/shm"
_ALIGNMENT = 64
_MAX_FREE_SEGMENTS = 4  # segments kept for reuse per sender; further released ones are unlinked

Layout = List[Tuple[int, int]]


class SegmentPool:
    """The sender's segments: lent to the receiver, or free for the next message."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._free: Dict[str, int] = {}  # name -> size, oldest first
        self._lent: Dict[str, int] = {}
        self._closed = False

    def write(self, buffers: Sequence[memoryview]) -> Tuple[str, Layout]:
        """Copy ``buffers`` into a segment lent to the receiver; return its name and each buffer's
        (offset, size)."""
        layout: Layout = []
        needed = 0
        for buffer in buffers:
            layout.append((needed, buffer.nbytes))
            needed += -(-buffer.nbytes // _ALIGNMENT) * _ALIGNMENT
        name = self._take_free(needed)
        if name is None:
            name = f"{self.prefix}{next(self._counter)}"
            flags = os.O_CREAT | os.O_EXCL | os.O_RDWR
        else:
            flags = os.O_RDWR
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, flags, 0o600)
        try:
            size = max(os.fstat(fd).st_size, needed, 1)
            os.ftruncate(fd, size)
            for buffer, (start, nbytes) in zip(buffers, layout):
                view = buffer.cast("B")
                written = 0
                while written < nbytes:  # pwrite may write less than asked for very large buffers
                    written += os.pwrite(fd, view[written:], start + written)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)
        with self._lock:
            self._lent[name] = size
        return name, layout

    def release(self, names: Sequence[str]) -> None:
        """The receiver is done with ``names``: keep a few for reuse, unlink the rest."""
        surplus = []
        with self._lock:
            for name in names:
                size = self._lent.pop(name, None)
                if size is None:
                    continue
                if self._closed:
                    surplus.append(name)
                else:
                    self._free[name] = size
            while len(self._free) > _MAX_FREE_SEGMENTS:
                surplus.append(next(iter(self._free)))
                del self._free[surplus[-1]]
        for name in surplus:
            unlink_segment(name)

    def close(self) -> None:
        """Unlink every segment of this pool (the receivers' mappings stay valid)."""
        with self._lock:
            self._closed = True
            names = [*self._free, *self._lent]
            self._free.clear()
            self._lent.clear()
        for name in names:
            unlink_segment(name)

    def _take_free(self, needed: int) -> Optional[str]:
        with self._lock:
            fitting = [(size, name) for name, size in self._free.items() if needed <= size <= 2 * needed + 4096]
            if not fitting:
                return None
            _, name = min(fitting)
            del self._free[name]
            return name


class Borrowed:
    """The receiver's side: maps segments and collects the names whose arrays are all gone."""

    def __init__(self) -> None:
        # a deque, not a locked list: _on_unmapped may run inside any code of this process, even
        # code that would hold such a lock
        self._released: Deque[str] = collections.deque()

    def attach(self, name: str, layout: Layout) -> List[memoryview]:
        """Map segment ``name``; return a writable view per buffer of ``layout``."""
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
        try:
            mapping = mmap.mmap(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        # runs when the last array viewing the mapping is freed, in whatever thread frees it
        weakref.finalize(mapping, self._on_unmapped, name)
        view = memoryview(mapping)
        return [view[start:start + size] for start, size in layout]

    def take_released(self) -> List[str]:
        """Names to send back in a RELEASE message (each returned once)."""
        released = []
        while self._released:
            released.append(self._released.popleft())
        return released

    def _on_unmapped(self, name: str) -> None:
        self._released.append(name)


def unlink_segment(name: str) -> None:
    """Unlink segment ``name`` (nothing happens if it is already gone)."""
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


def session_segments(prefix: str) -> List[str]:
    """Names of the segments that exist under ``prefix``."""
    return [os.path.basename(path) for path in glob.glob(os.path.join(SHM_DIR, glob.escape(prefix) + "*"))]


def remove_session_segments(prefix: str) -> None:
    """Unlink every segment under ``prefix`` (after a crash, or at shutdown)."""
    for name in session_segments(prefix):
        unlink_segment(name)
