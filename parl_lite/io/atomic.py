"""Atomic file writes: temporary file + fsync + ``os.replace`` (no paddle import).

A process killed mid-write leaves the previous file intact, and a writer that raises leaves no
temporary behind. Checkpoints, replay memories, ES solver states and ONNX files all go through here.
"""
import os
from pathlib import Path
from typing import Callable

import h5py

__all__ = ["write_atomically", "write_bytes_atomically", "write_hdf5_atomically"]


def write_atomically(path: "str | os.PathLike", write: Callable[[Path], None]) -> Path:
    """Create ``path`` by calling ``write(temporary_path)``, atomically.

    ``write`` creates the file at the temporary path it is given (next to ``path``); it is then
    flushed to disk and renamed over ``path``, and the folder entry is flushed too.

    Args:
        path: destination; its parent folders are created.
        write: writes the whole file at the path it receives.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
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


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
