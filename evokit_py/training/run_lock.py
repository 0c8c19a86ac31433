"""One es-train run at a time in a folder: a lock on the file ``.es-train.lock`` in each of a run's
folders (``train.log_dir``, ``train.checkpoint_dir``), held until the run has written its last file.

The lock is the kernel's (``flock``): it goes with the process that holds it, however it ends, so a
run that was killed leaves no lock behind, only the file, which the next run takes over. On NFS,
Linux turns ``flock`` into a lock the server keeps, which holds across hosts where the mount allows
locking (not with ``nolock`` or ``local_lock``), and which the server frees once the client's lease
runs out after a crash. The holder writes who it is into the file (pid, host, user, start time,
command), so that a second run can say who holds the folder; the file is opened without following a
link and only used if it is a regular file, so another user cannot make a run hang on a FIFO there.
"""
import contextlib
import datetime
import errno
import fcntl
import getpass
import json
import os
import shlex
import socket
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from parl_lite.common.paths import describe_file_type
from parl_lite.common.space import explain_write_error

__all__ = ["LOCK_NAME", "RunFolderInUseError", "lock_run_folders", "held_by_a_run"]

LOCK_NAME = ".es-train.lock"
_MAX_HOLDER_BYTES = 4096  # what is read of a holder's details (the file may be anyone's)
_MAX_COMMAND = 500  # characters of the holder's command line written


class RunFolderInUseError(ValueError):
    """Another run holds the folder's lock, or the lock file cannot be used; the message names the
    config key, the folder and the holder."""


@contextlib.contextmanager
def lock_run_folders(folders: dict[str, Path], echo: Callable[[str], None]) -> Iterator[None]:
    """Hold the lock of each folder (given by its config key; a folder named twice is locked once)
    while the ``with`` block runs.

    Args:
        echo: where a warning goes when a file system offers no locks (the run then goes on unlocked).

    Raises:
        RunFolderInUseError: another process holds one of the locks (the message says who), or the
            lock file is not a regular file or cannot be opened or written (no space left on device).
    """
    with contextlib.ExitStack() as stack:
        locked: set[Path] = set()
        for key, folder in folders.items():
            resolved = folder.resolve()
            if resolved not in locked:
                locked.add(resolved)
                stack.enter_context(_FolderLock(key, folder, echo))
        yield


def held_by_a_run(folder: Path) -> bool:
    """Whether a run holds the lock of ``folder`` now. A lock file that is missing, not a regular file
    or cannot be opened counts as not held (taking the lock then says what is wrong with it). The
    probe takes a shared lock for a moment: a run taking the folder in that very moment is refused."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:  # no locks on this file system: nothing can be held
        return False
    finally:
        os.close(fd)  # releases the probe's lock


class _FolderLock:
    """The lock of one folder (see the module docstring)."""

    def __init__(self, key: str, folder: Path, echo: Callable[[str], None]):
        self.key, self.folder, self.path, self.echo = key, folder, folder / LOCK_NAME, echo
        self._fd: int | None = None

    def __enter__(self) -> "_FolderLock":
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(fd)
            os.close(fd)
            raise RunFolderInUseError(
                f"{self.key}: {self.folder} is in use by another es-train run ({holder}); wait for it to end or "
                f"stop it, or give this run other folders (train.log_dir, train.checkpoint_dir)") from None
        except OSError as error:
            if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):
                os.close(fd)
                raise RunFolderInUseError(f"{self.key}: cannot lock {self.path}: {error.strerror or error}") from error
            self.echo(f"es-train: warning: {self.path}: the file system offers no locks ({error.strerror}); a "
                      f"second run in {self.folder} would not be stopped")
        try:
            _write_holder(fd)
        except OSError as error:  # a full disk: the run could write nothing else either
            os.close(fd)
            raise RunFolderInUseError(f"{self.key}: {explain_write_error(error, self.path)}") from error
        self._fd = fd
        return self

    def _open(self) -> int:
        flags = os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            try:
                fd = os.open(self.path, os.O_RDWR | flags, 0o644)
            except PermissionError:  # another user's lock file: reading is enough to lock it
                fd = os.open(self.path, os.O_RDONLY | (flags & ~os.O_CREAT))
        except OSError as error:
            what = "is a symbolic link" if error.errno == errno.ELOOP else f"cannot be opened: {error.strerror}"
            raise RunFolderInUseError(f"{self.key}: the lock file {self.path} {what}; move it away") from error
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise RunFolderInUseError(f"{self.key}: the lock file {self.path} is {describe_file_type(mode)}, "
                                      f"not a file; move it away")
        return fd

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock; the file stays (removing it would race a newcomer)
            self._fd = None


def _write_holder(fd: int) -> None:
    """Write who holds the lock into the lock file (nothing where it is another user's file)."""
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
        return
    started = datetime.datetime.now().astimezone().isoformat(sep=" ", timespec="seconds")
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "user": _user(), "started": started,
              "command": shlex.join(sys.orig_argv)[:_MAX_COMMAND]}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no name for this uid (a container's user, say)
        return f"uid {os.getuid()}"


def _describe_holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it."""
    try:
        holder = json.loads(os.pread(fd, _MAX_HOLDER_BYTES, 0))
        return (f"pid {int(holder['pid'])} on host {holder['host']}, user {holder['user']}, started "
                f"{holder['started']}: {holder['command']}")
    except (OSError, ValueError, TypeError, KeyError):
        return "a process that has not written who it is"
