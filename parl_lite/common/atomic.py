"""Atomic file writes: temporary file + fsync + ``os.replace`` (no paddle import).

A process killed mid-write leaves the previous file intact, and a writer that raises leaves no
temporary behind. Checkpoints, replay memories, ES solver states and ONNX files all go through here.

A process killed by SIGKILL cannot remove its temporary ``.<name>.tmp-<pid>``: the next write (and
:func:`remove_stale_temporaries`, which loaders call) removes those of ``path`` whose process is gone.

A write that fails for want of room (a full disk, a quota, the file size limit) raises an
``OSError`` with its errno that names the file and the reason (:mod:`parl_lite.common.space`), and leaves
the previous file in place. HDF5 files are written through a Python file object that keeps the
first failed write to itself (:class:`_FailureHoldingFile`): HDF5 cannot recover from a failed
write of its own: closing the file fails (h5py says so as a RuntimeError from a destructor), and
the next attempt to close it flushes datasets the failed one had already freed, a segfault in
``H5D__flush_all_cb`` (seen with 16 KiB free and with ``ulimit -f``).
"""
import io
import os
import stat
from pathlib import Path
from collections.abc import Callable
from typing import Any

import h5py

from parl_lite.common.paths import check_destination
from parl_lite.common.space import check_room, explain_write_error

__all__ = ["write_atomically", "write_bytes_atomically", "write_hdf5_atomically", "remove_stale_temporaries"]
_TEMPORARY_INFIX = ".tmp-"


def write_atomically(path: "str | os.PathLike", write: Callable[[Path], object]) -> Path:
    """Create ``path`` by calling ``write(temporary_path)``, atomically.

    ``write`` creates the file at the temporary path it is given (next to ``path``); it is then
    flushed to disk and renamed over ``path``, and the folder entry is flushed too.

    Args:
        path: destination; its parent folders are created.
        write: writes the whole file at the path it receives.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: ``path`` is empty or names no file.
        IsADirectoryError, NotADirectoryError: ``path`` is a folder, or a parent of it is a file (the
            message names it).
        FileExistsError: ``path`` is a FIFO, a socket or a device, which the rename would replace.
        OSError: as the system reports it, the message naming ``path`` (no space left on device, the
            file size limit, no permission); the previous file at ``path`` is left as it was.
    """
    path = check_destination(path)
    temporary = path.with_name(f".{path.name}{_TEMPORARY_INFIX}{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path)
        write(temporary)
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise explain_write_error(error, path) from error
        raise
    _fsync_directory(path.parent)
    return path


def write_bytes_atomically(path: "str | os.PathLike", data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`write_atomically`), after checking that
    it fits (:func:`parl_lite.common.space.check_room`: free space, file size limit)."""
    path = check_destination(path)
    if path.parent.is_dir():
        check_room(path, len(data))
    return write_atomically(path, lambda temporary: temporary.write_bytes(data))


def write_hdf5_atomically(path: "str | os.PathLike", write: Callable[[h5py.File], None]) -> Path:
    """Create the HDF5 file ``path`` by calling ``write(file)`` on the open, empty file, atomically
    (see :func:`write_atomically`). A failed write (no space, file size limit) is raised once HDF5
    has closed the file, as the ``OSError`` it was (see the module docstring)."""
    def write_file(temporary: Path) -> None:
        with open(temporary, "xb+") as handle, _FailureHoldingFile(handle) as sink:
            try:
                with h5py.File(sink, "w") as file:
                    write(file)
            except Exception as error:  # what HDF5 made of the data it could not read back
                if sink.failure is not None:
                    raise sink.failure from error
                raise
            if sink.failure is not None:
                raise sink.failure

    return write_atomically(path, write_file)


class _FailureHoldingFile(io.RawIOBase):
    """The file object HDF5 writes an HDF5 file through (h5py's ``fileobj`` driver): the first
    write that fails is kept in :attr:`failure` and every write from then on does nothing, so that
    HDF5 always sees its writes succeed and closes the file cleanly; the caller raises the failure.
    """

    def __init__(self, handle: io.BufferedRandom) -> None:
        super().__init__()
        self._handle = handle
        self.failure: OSError | None = None

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()

    def readinto(self, buffer: Any) -> int:
        return self._handle.readinto(buffer)

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self._hold(lambda: self._handle.write(data))
        return size

    def truncate(self, size: int | None = None) -> int:
        self._hold(lambda: self._handle.truncate(size))
        return self.tell() if size is None else size

    def flush(self) -> None:
        self._hold(self._handle.flush)

    def _hold(self, operation: Callable[[], object]) -> None:
        if self.failure is not None:
            return
        try:
            operation()
        except OSError as error:
            self.failure = error


def remove_stale_temporaries(path: "str | os.PathLike") -> "list[Path]":
    """Remove the temporaries that killed writers of ``path`` left next to it.

    Only regular files named ``.<name>.tmp-<pid>``, owned by this user, whose process no longer
    exists are removed; a live writer's temporary (or another user's) is never touched.

    Returns:
        The removed files.
    """
    path = Path(path)
    prefix = f".{path.name}{_TEMPORARY_INFIX}"
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:  # no folder (yet), or not readable: nothing of ours to sweep
        return removed
    for entry in entries:
        pid_text = entry.name[len(prefix):] if entry.name.startswith(prefix) else ""
        if not pid_text.isdigit() or _process_exists(int(pid_text)):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid():
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:  # removed meanwhile by another sweeper
            continue
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or no valid pid at all
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
