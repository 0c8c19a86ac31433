"""Paths given to read or write a file, checked first so that a mistake gets a message that names
it rather than an error from deep inside h5py or ``os.replace`` (no paddle import)."""
import errno
import io
import os
import stat
from pathlib import Path

__all__ = ["describe_file_type", "check_destination", "open_to_write_in_place"]

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "a file"))


def describe_file_type(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words: "a folder", "a FIFO (named pipe)", ..."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return f"a special file (mode {stat.S_IFMT(mode):o})"


def check_destination(path: "str | os.PathLike") -> Path:
    """``path`` as a :class:`~pathlib.Path`, after checking that a file can be created there.

    Raises:
        ValueError: the path is empty, or ends in ``.`` or ``..``.
        IsADirectoryError: ``path`` is a folder.
        FileExistsError: ``path`` is a FIFO, a socket or a device (a file written under a temporary
            name and renamed would replace it: ``/dev/null`` would become a regular file).
        NotADirectoryError: a parent of ``path`` is a file (or another non-folder).
    """
    if os.fspath(path) == "":
        raise ValueError("cannot write a file at an empty path")
    path = Path(path)
    if path.name in ("", ".", ".."):
        raise ValueError(f"cannot write a file at {str(path)!r}: the path names a folder, not a file")
    try:
        mode = os.stat(path).st_mode
    except OSError:  # nothing there (or not reachable): the parents say why below, or the write will
        mode = stat.S_IFREG
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"cannot write {path}: it is a folder; give the path of a file")
    if not stat.S_ISREG(mode):
        raise FileExistsError(f"cannot write {path}: it is {describe_file_type(mode)}, not a file, and saving "
                              f"would replace it with one; give the path of a file")
    for parent in path.parents:
        try:
            mode = os.stat(parent).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue  # created on write, or below a file: an ancestor says which
        except OSError:
            break  # not searchable: creating the file will say so
        if not stat.S_ISDIR(mode):
            raise NotADirectoryError(f"cannot write {path}: {parent} is {describe_file_type(mode)}, not a folder")
        break
    return path


def open_to_write_in_place(path: "str | os.PathLike", append: bool) -> io.TextIOWrapper:
    """``path`` opened for writing text in place (a log: appended to, or emptied), UTF-8, no newline
    translation (what :mod:`csv` needs), without ever blocking on the open.

    A regular file is created if missing. A character device (``/dev/null``, a terminal) is written
    to as it is. A FIFO, socket or block device is refused: opening a FIFO blocks until a reader
    comes, and a run's log would then wait for ever.

    Raises:
        IsADirectoryError: ``path`` is a folder.
        FileExistsError: ``path`` is a FIFO, a socket or a block device (the message says which).
        OSError: as the system reports it (no such folder, no permission, no space).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_APPEND if append else 0)
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a FIFO that no process reads
            raise FileExistsError(f"cannot write {path}: it is a FIFO (named pipe), not a file") from None
        if error.errno == errno.EISDIR:
            raise IsADirectoryError(f"cannot write {path}: it is a folder; give the path of a file") from None
        raise
    try:
        mode = os.fstat(descriptor).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
            raise FileExistsError(f"cannot write {path}: it is {describe_file_type(mode)}, not a file")
        os.set_blocking(descriptor, True)
        if stat.S_ISREG(mode) and not append:
            os.ftruncate(descriptor, 0)
        return open(descriptor, "w", encoding="utf-8", newline="")
    except BaseException:
        os.close(descriptor)
        raise
