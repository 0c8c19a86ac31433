"""Atomic file writes: temporary file + fsync + ``os.replace`` (no paddle import)."""
import os
from pathlib import Path
from typing import Callable

import h5py

__all__ = ["write_hdf5_atomically"]


def write_hdf5_atomically(path: "str | os.PathLike", write: Callable[[h5py.File], None]) -> Path:
    """Create the HDF5 file ``path`` by calling ``write(file)``, atomically.

    The file is written next to ``path`` under a temporary name, flushed to disk and renamed over
    ``path``: a process killed mid-write leaves the previous file intact, and a ``write`` that
    raises leaves no temporary behind.

    Args:
        path: destination; its parent folders are created.
        write: fills the open, empty ``h5py.File``.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with h5py.File(temporary, "w") as file:
            write(file)
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
