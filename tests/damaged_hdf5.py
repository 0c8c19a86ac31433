"""Damaging an HDF5 file for the tests of the files' checks: a dataset replaced with its checksum made
to match (only the value checks can catch it), or one byte of a dataset's stored data flipped."""
import zlib
from pathlib import Path

import h5py
import numpy as np


def forge(path: Path, name: str, value) -> None:
    """Replace dataset ``name`` by ``value`` *with a matching checksum*, as a careful forger would:
    only the value checks on load can catch it."""
    value = np.asarray(value)
    with h5py.File(path, "r+") as file:
        del file[name]
        file.create_dataset(name, data=value)
        file[name].attrs["crc32"] = zlib.crc32(np.ascontiguousarray(value).tobytes())


def patch_dataset_bytes(path: Path, name: str) -> None:
    """Flip one byte inside the stored data of dataset ``name`` (no HDF5 library involved)."""
    with h5py.File(path, "r") as file:
        offset = file[name].id.get_offset()
        assert offset is not None, f"{name} is not stored contiguously"
    with open(path, "r+b") as handle:
        handle.seek(offset + 3)
        byte = handle.read(1)
        handle.seek(offset + 3)
        handle.write(bytes([byte[0] ^ 0x40]))
