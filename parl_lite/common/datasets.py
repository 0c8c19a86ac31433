"""HDF5 files of parl_lite and evokit_py: opening for reading, datasets with a stored checksum,
value checks on read (no paddle import).

Every dataset of a parl_lite or evokit_py checkpoint carries the CRC-32 of its bytes in the
attribute ``crc32``; reading recomputes it, so a flipped bit anywhere in the stored values is found.
HDF5's fletcher32 filter would do the same for chunked datasets only, and scalars (generation
counters, step counts) cannot be chunked.

Opening checks the file's structure before any value is read (:func:`open_hdf5`): a crafted file
cannot make a reader allocate more memory than the file's own size, nor read another file.
"""
import os
import stat
import zlib
from pathlib import Path

import h5py
import numpy as np

from parl_lite.common.atomic import remove_stale_temporaries
from parl_lite.common.paths import describe_file_type

__all__ = ["DatasetError", "CHECKSUM_ATTRIBUTE", "open_hdf5", "write_dataset", "read_dataset", "check_finite",
           "check_integer_range", "dataset_names"]

CHECKSUM_ATTRIBUTE = "crc32"


class DatasetError(ValueError):
    """A dataset's checksum does not match, its checksum is missing, or a value is out of range.
    The message starts with the dataset's name."""


def open_hdf5(path: Path, what: str, error_type: type[Exception]) -> h5py.File:
    """Open the HDF5 file ``path`` for reading, after removing temporaries that killed writers of
    it left behind, and check its structure before anything is read.

    The file is opened without blocking (a FIFO in its place is refused, never waited on) and must
    be a regular file. Its datasets together must not declare more bytes than the file holds (an
    11 KB file declaring a 12 GB dataset, stored compressed or not at all, is refused before a
    byte is read), and it must not link to other files (external links, external or virtual
    storage): reading never allocates more than the file's size, nor opens another path.

    Args:
        path: the file.
        what: what the file is, for messages ("checkpoint").
        error_type: the exception to raise.

    Raises:
        error_type: ``path`` is missing, not a regular file (the message says what it is: a folder,
            a FIFO, ...), unreadable, not HDF5, or corrupted or crafted (the message says how).
    """
    path = Path(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error_type(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise error_type(f"{what} {path} is a folder, not a {what} file") from None
    except OSError as error:
        raise error_type(f"{what} {path} cannot be opened: {error.strerror or error}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise error_type(f"{what} {path} is {describe_file_type(info.st_mode)}, not a {what} file")
        remove_stale_temporaries(path)
        try:  # the file just checked, whatever has replaced it at `path` since
            file = h5py.File(_descriptor_path(descriptor, path), "r")
        except OSError as error:
            raise error_type(f"{what} {path} is truncated or corrupted: {error}") from error
    finally:
        os.close(descriptor)
    try:
        _check_structure(file, info.st_size)
    except (DatasetError, RuntimeError, OSError, KeyError, ValueError, TypeError) as error:
        file.close()
        raise error_type(f"{what} {path} is corrupted or crafted: {error}") from error
    return file


def _descriptor_path(descriptor: int, path: Path) -> str:
    """A path that opens the very file behind ``descriptor`` (Linux's /proc), else ``path``."""
    alias = f"/proc/self/fd/{descriptor}"
    return alias if os.path.exists(alias) else str(path)


def _check_structure(file: h5py.File, file_size: int) -> None:
    """Refuse links to other files, datasets stored outside the file, and datasets that together
    declare more bytes than ``file_size`` (only metadata is read, through h5py's low-level API: a
    few milliseconds for a checkpoint of a hundred datasets)."""
    links: list[tuple[bytes, int]] = []
    file.id.links.visit(lambda name, info: links.append((name, info.type)), info=True)
    external = [name.decode(errors="replace") for name, kind in links if kind == h5py.h5l.TYPE_EXTERNAL]
    if external:
        raise DatasetError(f"{external[0]}: a link to another file, which parl_lite never writes")
    declared: dict[str, int] = {}
    for name in _dataset_paths(file.id):
        dataset = h5py.h5o.open(file.id, name)
        plist = dataset.get_create_plist()
        if plist.get_layout() == h5py.h5d.VIRTUAL or plist.get_external_count():
            raise DatasetError(f"{name.decode(errors='replace')}: its values are stored in other files, which "
                               f"parl_lite never writes")
        declared[name.decode(errors="replace")] = \
            dataset.get_space().get_simple_extent_npoints() * dataset.get_type().get_size()
    total = sum(declared.values())
    if total > file_size:
        largest = max(declared, key=declared.__getitem__)
        raise DatasetError(f"{largest}: declares {file[largest].shape} values of {file[largest].dtype} "
                           f"({declared[largest]:,} bytes); the datasets declare {total:,} bytes in all, more than "
                           f"the whole file ({file_size:,} bytes), so they are not stored in it; nothing was read")


def _dataset_paths(group_id: h5py.h5g.GroupID) -> list[bytes]:
    """Paths (relative to the group) of every dataset below it, found without opening any."""
    paths: list[bytes] = []
    h5py.h5o.visit(group_id, lambda name, info: paths.append(name) if info.type == h5py.h5o.TYPE_DATASET else None,
                   info=True)
    return paths


def _checksum(value: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(value).reshape(-1).view(np.uint8).data)  # the bytes, not a copy


def write_dataset(group: h5py.Group, name: str, value) -> h5py.Dataset:
    """Create dataset ``name`` in ``group`` holding ``value``, with its checksum.

    Returns:
        The new dataset.
    """
    value = np.asarray(value)
    dataset = group.create_dataset(name, data=value)
    dataset.attrs[CHECKSUM_ATTRIBUTE] = _checksum(value)
    return dataset


def read_dataset(dataset: h5py.Dataset, require_checksum: bool = True) -> np.ndarray:
    """The values of ``dataset``, after checking them against the stored checksum.

    Args:
        dataset: an open dataset.
        require_checksum: refuse a dataset without a checksum (files of older formats have none).

    Raises:
        DatasetError: the checksum differs, or is missing while required.
    """
    value = dataset[()]
    stored = dataset.attrs.get(CHECKSUM_ATTRIBUTE)
    if stored is None:
        if require_checksum:
            raise DatasetError(f"{dataset.name.lstrip('/')}: no checksum (attribute {CHECKSUM_ATTRIBUTE!r})")
    elif _checksum(value) != int(stored):
        raise DatasetError(f"{dataset.name.lstrip('/')}: checksum mismatch: the stored values are corrupted")
    return value


def dataset_names(group: h5py.Group) -> list[str]:
    """Paths (relative to ``group``) of every dataset below ``group``."""
    return [path.decode() for path in _dataset_paths(group.id)]


def check_finite(name: str, value: np.ndarray) -> None:
    """Raise :class:`DatasetError` when a float ``value`` holds NaN or an infinity."""
    value = np.asarray(value)
    if value.dtype.kind in "fc" and not np.all(np.isfinite(value)):
        bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
        raise DatasetError(f"{name}: {bad} of {np.size(value)} values are not finite (NaN or infinity)")


def check_integer_range(name: str, value: object, bounds: tuple[int, int | None]) -> int:
    """``value`` as an int, refusing a non-integer, a non-scalar or one outside ``[low, high]``.

    Args:
        name: what the message calls the value.
        value: a scalar array or number (anything else is refused).
        bounds: ``(low, high)``; ``high`` may be ``None`` (no upper bound).
    """
    low, high = bounds
    array = np.asarray(value)
    if array.shape not in ((), (1,)) or not (array.dtype.kind in "iu" or
                                             (array.dtype.kind == "f" and np.isfinite(array).all()
                                              and float(array.reshape(-1)[0]).is_integer())):
        raise DatasetError(f"{name}: expected an integer scalar, got {array.dtype} {array.shape} {array!r}")
    number = int(array.reshape(-1)[0])
    if number < low or (high is not None and number > high):
        raise DatasetError(f"{name}: {number} is out of range [{low}, {'inf' if high is None else high}]")
    return number
