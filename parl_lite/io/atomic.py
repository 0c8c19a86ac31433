"""Atomic file writes: temporary file + fsync + ``os.replace`` (no paddle import).

A process killed mid-write leaves the previous file intact, and a writer that raises leaves no
temporary behind. Checkpoints, replay memories, ES solver states and ONNX files all go through here.

A process killed by SIGKILL cannot remove its temporary ``.<name>.tmp-<pid>``: the next write (and
:func:`remove_stale_temporaries`, which loaders call) removes those of ``path`` whose process is gone.
"""
import os
import stat
from pathlib import Path
from collections.abc import Callable

import h5py

from parl_lite.io.paths import check_destination

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
            message names it); other ``OSError``: as the system reports it (no space, no permission).
    """
    path = check_destination(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    temporary = path.with_name(f".{path.name}{_TEMPORARY_INFIX}{os.getpid()}")
    try:
        write(temporary)
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


def write_bytes_atomically(path: "str | os.PathLike", data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`write_atomically`)."""
    return write_atomically(path, lambda temporary: temporary.write_bytes(data))


def write_hdf5_atomically(path: "str | os.PathLike", write: Callable[[h5py.File], None]) -> Path:
    """Create the HDF5 file ``path`` by calling ``write(file)`` on the open, empty file, atomically
    (see :func:`write_atomically`)."""
    def write_file(temporary: Path) -> None:
        with h5py.File(temporary, "w") as file:
            write(file)

    return write_atomically(path, write_file)


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
