"""Shared-memory segments that carry the large buffers of messages between two processes.

A sender copies the large buffers of a message into one segment (a file under ``/dev/shm``) and
sends only its name; the receiver maps it and hands the mapping to ``pickle.loads`` as out-of-band
buffers, so numpy arrays are rebuilt without a copy. When the last array viewing a mapping is gone,
the receiver tells the sender (a RELEASE message), and the sender reuses the segment for a later
message. Reuse matters: writing into pages that already exist is a plain memcpy, while fresh pages
cost a page fault each (on these virtual machines, more than the copy itself). For the same reason
mappings are made with ``MAP_POPULATE`` (one call maps every page instead of one fault per page) and
kept for the next message that uses the same segment, and a sender may keep a pre-faulted reserve for
its first large message. Each message gets a fresh numpy array over the mapping as the base of its
buffers: when that array is freed, the message's buffers are gone.

Other local users see and may create names in ``/dev/shm``. So every segment name ends with a random
token and is created with ``O_EXCL`` (a taken name is skipped, never opened); a segment is opened
with ``O_NOFOLLOW | O_NONBLOCK`` and used only if ``fstat`` shows a regular file of this user; sweeps
unlink only such files. Every name starts with the pool's session prefix, then an owner tag, so
what a crash leaves behind can be swept by prefix.
"""
import collections
import ctypes
import errno
import mmap
import os
import resource
import secrets
import stat
import threading
import time
import weakref
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["SHM_DIR", "SegmentPool", "Borrowed", "open_own_file", "unlink_segment",
           "remove_session_segments", "session_segments", "create_exclusive", "FREE_IDLE_SECONDS",
           "process_segment_name", "PROCESS_SEGMENT"]

SHM_DIR = "/dev/shm"
_ALIGNMENT = 64
MAX_FREE_SEGMENTS = 4  # segments kept for reuse per sender
MAX_FREE_BYTES = 256 * 2**20  # and their total size; the oldest beyond either bound are unlinked
CACHED_MAPPINGS = MAX_FREE_SEGMENTS  # a receiver keeps this many mappings for reuse
FREE_IDLE_SECONDS = 2.0  # free segments unused this long are unlinked (down to the reserve)
_NAME_ATTEMPTS = 64
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0x8000)  # Linux value before Python 3.10
_SELF = "self"  # holder key of a segment its owner maps itself (a reply that returned it)

# every name of ours starts with this and the pid of the process that owns it, so that what a dead
# process left can be found and swept (by its pool's zygote, or by ``parl-lite status``)
PROCESS_SEGMENT = "parl_lite_{pid}_"

Layout = list[tuple[int, int]]
Holder = int | str


def process_segment_name(kind: str) -> str:
    """An unpredictable name for a segment this process owns outside any pool (e.g. a noise
    table), swept with the process's other segments if the process dies without unlinking it."""
    return f"{PROCESS_SEGMENT.format(pid=os.getpid())}{kind}_{secrets.token_hex(8)}"


def _no_room(code: int, size: int) -> OSError:
    """The error of a segment of ``size`` bytes that does not fit: ``/dev/shm`` is full (ENOSPC), or
    the size is beyond this process's file size limit (EFBIG), which applies to ``/dev/shm`` too."""
    if code == errno.EFBIG:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        why = f"beyond the file size limit of this process (ulimit -f: {limit:,} bytes)"
    else:
        why = f"more than {SHM_DIR} has free (no space left on device)"
    error = OSError(f"cannot make a shared-memory segment of {size:,} bytes in {SHM_DIR}: {why}")
    error.errno = code
    return error


def create_exclusive(prefix: str, suffix: str = "") -> tuple[str, int]:
    """Create a new file ``<prefix><random token><suffix>`` in ``/dev/shm`` that nobody else can have
    made first; return its name and an open read-write descriptor.

    Raises:
        FileExistsError: every one of many random names was taken (someone floods the folder).
    """
    for _ in range(_NAME_ATTEMPTS):
        name = f"{prefix}{secrets.token_hex(8)}{suffix}"
        try:
            fd = os.open(os.path.join(SHM_DIR, name),
                         os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        return name, fd
    raise FileExistsError(f"{_NAME_ATTEMPTS} random names under {SHM_DIR}/{prefix}* were all taken")


def open_own_file(path: str, flags: int = os.O_RDONLY) -> int:
    """Open ``path`` only if it is a regular file of this user (no link followed, no FIFO waited on).

    Raises:
        OSError: it does not exist, is a link, or cannot be opened.
        PermissionError: it is not a regular file, or another user owns it.
    """
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        what = "another user's file" if stat.S_ISREG(info.st_mode) else "not a regular file"
        raise PermissionError(f"{path} is {what}: not ours, left alone")
    return fd


def _address(buffer: memoryview | mmap.mmap) -> int | None:
    """Address of a writable buffer's first byte (None for a read-only one)."""
    try:
        pointer = ctypes.c_char.from_buffer(buffer)
    except TypeError:
        return None
    address = ctypes.addressof(pointer)
    del pointer  # releases the export that would keep the buffer from being freed
    return address


class _Segment:
    __slots__ = ("name", "fd", "size", "holders", "freed_at", "mapping")

    def __init__(self, name: str, fd: int, size: int) -> None:
        self.name = name
        self.fd = fd
        self.size = size
        self.holders: set[Holder] = set()  # receivers that map it, and _SELF
        self.freed_at = 0.0
        self.mapping: mmap.mmap | None = None  # the owner's own, made when first needed


class SegmentPool:
    """The sender's segments: lent to receivers, mapped by the owner itself, or free for reuse.

    The file of every segment stays open here, so reusing one never opens a name again.

    Args:
        prefix: start of every segment name (the pool's session prefix and an owner tag).
        reserve_bytes: free memory kept however long the sender is idle (see :meth:`prefault`).
    """

    def __init__(self, prefix: str, reserve_bytes: int = 0) -> None:
        self.prefix = prefix
        self.reserve_bytes = reserve_bytes
        self._lock = threading.Lock()
        self._held: dict[str, _Segment] = {}
        self._free: dict[str, _Segment] = {}  # oldest freed first
        self._closed = False

    def write(self, buffers: Sequence[memoryview], holder: Holder = 0) -> tuple[str, Layout]:
        """Copy ``buffers`` into a segment lent to ``holder``; return its name and each buffer's
        (offset, size)."""
        layout: Layout = []
        needed = 0
        for buffer in buffers:
            layout.append((needed, buffer.nbytes))
            needed += -(-buffer.nbytes // _ALIGNMENT) * _ALIGNMENT
        segment = self._take_free(needed) or self._create(needed)
        try:
            # through the sender's own mapping, kept with the segment: a memcpy, several times
            # faster than pwrite() on these machines
            target = np.frombuffer(self._mapping(segment), dtype=np.uint8)
            for buffer, (start, nbytes) in zip(buffers, layout, strict=True):
                np.copyto(target[start:start + nbytes], np.frombuffer(buffer, dtype=np.uint8))
            del target
        except BaseException:
            self._discard([segment])
            raise
        with self._lock:
            segment.holders.add(holder)
            self._held[segment.name] = segment
        return segment.name, layout

    def prefault(self, size: int) -> None:
        """Add a free segment of ``size`` bytes whose pages exist already, so that the first message
        of up to that size costs a copy, not page faults."""
        segment = self._create(size)
        try:
            self._mapping(segment)
        except OSError:
            self._discard([segment])
            raise
        self._free_segments([segment])

    def release(self, names: Sequence[str], holder: Holder = 0) -> None:
        """``holder`` no longer maps ``names``: segments nobody maps become free for reuse."""
        done = []
        with self._lock:
            for name in names:
                segment = self._held.get(name)
                if segment is None or holder not in segment.holders:
                    continue
                segment.holders.discard(holder)
                if not segment.holders:
                    del self._held[name]
                    done.append(segment)
        self._free_segments(done)

    def forget(self, holder: Holder) -> None:
        """``holder`` is gone: unlink what only it mapped (not reused: its children may map it)."""
        gone = []
        with self._lock:
            for name, segment in list(self._held.items()):
                segment.holders.discard(holder)
                if not segment.holders:
                    del self._held[name]
                    gone.append(segment)
        self._discard(gone)

    def map_own(self, name: str, returned_by: Holder) -> np.ndarray:
        """View one of this pool's own segments that ``returned_by`` handed back in a reply (it maps
        it no more); the segment is not reused until the returned bytes array is freed.

        Raises:
            ValueError: ``name`` is not a segment lent to ``returned_by``.
        """
        with self._lock:
            segment = self._held.get(name)
            if segment is None or returned_by not in segment.holders:
                raise ValueError(f"a reply refers to segment {name!r}, which was not lent to its sender")
            segment.holders.discard(returned_by)
            segment.holders.add(_SELF)
        base = np.frombuffer(self._mapping(segment), dtype=np.uint8)
        weakref.finalize(base, self.release, [name], _SELF)
        return base

    def free_names(self) -> list[str]:
        """Names of the free segments (a receiver may map them ahead: :meth:`Borrowed.prefetch`)."""
        with self._lock:
            return list(self._free)

    def trim(self, idle_seconds: float = FREE_IDLE_SECONDS) -> None:
        """Unlink free segments unused for ``idle_seconds``, newest kept while within the reserve."""
        cutoff = time.monotonic() - idle_seconds
        surplus = []
        with self._lock:
            kept = 0
            for segment in reversed(list(self._free.values())):
                if segment.freed_at <= cutoff and kept + segment.size > self.reserve_bytes:
                    surplus.append(self._free.pop(segment.name))
                else:
                    kept += segment.size
        self._discard(surplus)

    def close(self) -> None:
        """Unlink every segment of this pool (the receivers' mappings stay valid)."""
        with self._lock:
            self._closed = True
            segments = [*self._free.values(), *self._held.values()]
            self._free.clear()
            self._held.clear()
        self._discard(segments)

    def _create(self, size: int) -> _Segment:
        name, fd = create_exclusive(self.prefix)
        segment = _Segment(name, fd, max(size, 1))
        try:
            os.posix_fallocate(fd, 0, segment.size)  # all pages at once, not a fault each
        except BaseException as error:
            self._discard([segment])
            if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EFBIG):
                raise _no_room(error.errno, segment.size) from error
            raise
        return segment

    @staticmethod
    def _mapping(segment: _Segment) -> mmap.mmap:
        """The owner's mapping of ``segment`` (made once, every page mapped up front)."""
        if segment.mapping is None:
            segment.mapping = mmap.mmap(segment.fd, segment.size, flags=_MAP_FLAGS)
        return segment.mapping

    def _free_segments(self, segments: list[_Segment]) -> None:
        surplus = []
        now = time.monotonic()
        with self._lock:
            for segment in segments:
                if self._closed:
                    surplus.append(segment)
                    continue
                segment.freed_at = now
                self._free[segment.name] = segment
            total = sum(segment.size for segment in self._free.values())
            while self._free and (len(self._free) > MAX_FREE_SEGMENTS or total > MAX_FREE_BYTES):
                oldest = self._free.pop(next(iter(self._free)))
                total -= oldest.size
                surplus.append(oldest)
        self._discard(surplus)

    def _take_free(self, needed: int) -> _Segment | None:
        with self._lock:
            fitting = [segment for segment in self._free.values()
                       if needed <= segment.size <= 2 * needed + 4096]
            if not fitting:
                return None
            segment = min(fitting, key=lambda candidate: candidate.size)
            return self._free.pop(segment.name)

    @staticmethod
    def _discard(segments: list[_Segment]) -> None:
        for segment in segments:
            unlink_segment(segment.name)
            os.close(segment.fd)


class Borrowed:
    """The receiver's side: maps segments and collects the names whose arrays are all gone."""

    def __init__(self) -> None:
        # a deque, not a locked list: _on_unmapped may run inside any code of this process, even
        # code that would hold such a lock
        self._released: collections.deque[str] = collections.deque()
        self._returned: set[str] = set()  # handed back to the sender in a reply: no RELEASE for them
        # name -> (this message's base array, its address, size)
        self._mapped: dict[str, tuple[weakref.ref[np.ndarray], int, int]] = {}
        # mappings kept for reuse: name -> (mapping, inode of the file mapped)
        self._cache: collections.OrderedDict[str, tuple[mmap.mmap, int]] = collections.OrderedDict()
        self._cache_lock = threading.Lock()

    def prefetch(self, name: str) -> None:
        """Map segment ``name`` ahead of the message that will use it (e.g. the sender's reserve)."""
        self._cached_mapping(name)

    def _cached_mapping(self, name: str) -> mmap.mmap:
        with self._cache_lock:
            cached = self._cache.pop(name, None)
        if cached is None:
            fd = open_own_file(os.path.join(SHM_DIR, name), os.O_RDWR)
            try:
                info = os.fstat(fd)
                cached = (mmap.mmap(fd, info.st_size, flags=_MAP_FLAGS), info.st_ino)
            finally:
                os.close(fd)
        with self._cache_lock:
            self._cache[name] = cached
            while len(self._cache) > CACHED_MAPPINGS:
                self._cache.popitem(last=False)
        return cached[0]

    def map(self, name: str) -> np.ndarray:
        """A bytes array over segment ``name`` (a regular file of this user, else PermissionError);
        the sender hears of its release when the array is freed."""
        base = np.frombuffer(self._cached_mapping(name), dtype=np.uint8)
        self._mapped[name] = (weakref.ref(base), base.ctypes.data, base.nbytes)
        # runs when the last array viewing this message's buffers is freed, in whatever thread
        weakref.finalize(base, self._on_unmapped, name)
        return base

    def trim(self) -> None:
        """Drop kept mappings of segments their sender has unlinked (the mapping alone would keep
        their memory)."""
        with self._cache_lock:
            names = list(self._cache)
        for name in names:
            try:
                current = os.lstat(os.path.join(SHM_DIR, name)).st_ino
            except OSError:
                current = None
            with self._cache_lock:
                cached = self._cache.get(name)
                if cached is not None and cached[1] != current:
                    del self._cache[name]

    def returned(self, names: Iterable[str]) -> None:
        """``names`` went back to their owner in a reply, which stands for their RELEASE."""
        self._returned.update(names)

    def locate(self, buffer: memoryview) -> tuple[str, int] | None:
        """(segment name, offset) if ``buffer`` lies inside a segment mapped here, else None."""
        address = _address(buffer) if self._mapped else None
        if address is None:
            return None
        for name, (mapping, start, size) in list(self._mapped.items()):
            if start <= address and address + buffer.nbytes <= start + size and mapping() is not None:
                return name, address - start
        return None

    def in_use(self, name: str) -> np.ndarray | None:
        """The base array of the last message's buffers in ``name``, if anything still views it."""
        entry = self._mapped.get(name)
        return entry[0]() if entry is not None else None

    def take_released(self) -> list[str]:
        """Names to send back in a RELEASE message (each returned once)."""
        released = []
        while self._released:
            name = self._released.popleft()
            if name in self._returned:
                self._returned.discard(name)
            else:
                released.append(name)
        return released

    def _on_unmapped(self, name: str) -> None:
        entry = self._mapped.get(name)
        if entry is not None and entry[0]() is None:
            self._mapped.pop(name, None)
        self._released.append(name)


def unlink_segment(name: str) -> None:
    """Unlink segment ``name`` (nothing happens if it is already gone)."""
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


def session_segments(prefix: str) -> list[str]:
    """Names under ``prefix`` in ``/dev/shm`` (whoever made them)."""
    # a listing and a prefix test: a glob compiled a pattern for every prefix (one per worker that
    # ended), which cost more than the listing with a few hundred pools' files in /dev/shm
    try:
        return [name for name in os.listdir(SHM_DIR) if name.startswith(prefix)]
    except FileNotFoundError:
        return []


def remove_session_segments(prefix: str) -> None:
    """Unlink the regular files of this user under ``prefix`` (after a crash, or at shutdown);
    what another user put there is left alone."""
    for name in session_segments(prefix):
        path = os.path.join(SHM_DIR, name)
        try:
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                os.unlink(path)
        except OSError:
            pass
