"""Room for a file: the space free on its file system and the file size limit (``ulimit -f``),
checked before a file of known size is written, and a failed write told in words that name the
file and the reason (no paddle import).

A process that writes past its file size limit gets ``SIGXFSZ``; Python ignores that signal, so
the write fails with ``EFBIG`` instead, which is what this module reports.
"""
import errno
import os
import resource
from pathlib import Path

__all__ = ["check_room", "explain_write_error", "free_bytes", "file_size_limit"]


def free_bytes(folder: "str | os.PathLike") -> int | None:
    """The bytes this process may still write on the file system of ``folder`` (root may use the
    blocks reserved for it); None if the file system does not say."""
    try:
        info = os.statvfs(folder)
    except OSError:
        return None
    blocks = info.f_bfree if os.geteuid() == 0 else info.f_bavail
    return blocks * info.f_frsize


def file_size_limit() -> int | None:
    """This process's file size limit in bytes (``ulimit -f``), None when there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def check_room(path: "str | os.PathLike", size: int) -> None:
    """Refuse to start writing ``size`` bytes to ``path`` when they cannot fit, before anything is
    written (a full disk then keeps what it holds, and other writers keep the room left).

    Raises:
        OSError: ``ENOSPC`` (not that much free on the file system of ``path``) or ``EFBIG`` (more
            than the file size limit); the message names ``path`` and both numbers.
    """
    limit = file_size_limit()
    if limit is not None and size > limit:
        raise _error(OSError, errno.EFBIG, f"cannot write {path}: {size:,} bytes exceed the file size limit of "
                                           f"this process (ulimit -f: {limit:,} bytes)")
    free = free_bytes(Path(path).parent)
    if free is not None and size > free:
        raise _error(OSError, errno.ENOSPC, f"cannot write {path}: no space left on device ({size:,} bytes "
                                            f"needed, {free:,} free)")


def explain_write_error(error: OSError, path: "str | os.PathLike") -> OSError:
    """``error``, raised while ``path`` was written (maybe under a temporary name), as an error of
    the same type and errno whose message names ``path`` and, for a full disk, a quota or the file
    size limit, says so with the numbers. An error that names ``path`` already is returned as is."""
    if str(error).startswith(f"cannot write {path}:"):
        return error
    reason = error.strerror or str(error)
    if error.errno == errno.ENOSPC:
        free = free_bytes(Path(path).parent)
        reason = "no space left on device" + ("" if free is None else f" ({free:,} bytes free)")
    elif error.errno == errno.EFBIG and file_size_limit() is not None:
        reason = f"the file size limit of this process was reached (ulimit -f: {file_size_limit():,} bytes)"
    return _error(type(error), error.errno, f"cannot write {path}: {reason}")


def _error(kind: type[OSError], code: int | None, message: str) -> OSError:
    """An ``OSError`` of ``kind`` (plain ``OSError`` for a subclass built otherwise) whose text is
    ``message`` alone and whose ``errno`` is ``code``."""
    try:
        error = kind(message)
    except TypeError:
        error = OSError(message)
    error.errno = code
    return error
