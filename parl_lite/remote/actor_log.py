"""Each actor's recent output, kept by its pool and readable by ``parl-lite monitor``.

The pool owner keeps the last :data:`MAX_LINES` lines of every actor and mirrors them into one file
per actor in a private folder (``<runtime folder>/pool-<owner pid>/<worker pid>.log``), which the
monitor, running as the same user in another process, reads. Another local user can create names in
``/tmp``, so neither side trusts a path it finds there: the runtime folder must be a real folder (not
a symlink) owned by this user with no access for anyone else, files are opened with
``O_NOFOLLOW``, and a folder that fails the check is refused rather than repaired.
"""
import collections
import os
import shutil
import stat
import tempfile
import threading
import warnings

__all__ = ["MAX_LINES", "ActorLogs", "runtime_folder", "read_actor_log"]

MAX_LINES = 500
_MAX_LINE_CHARS = 2000  # a line longer than this is cut
_MAX_LOG_CHARS = 256 * 1024  # and older lines are dropped beyond this: a log is rewritten twice a second


def runtime_folder(create: bool = False) -> str | None:
    """This user's private folder for parl_lite's runtime files.

    ``$XDG_RUNTIME_DIR/parl_lite`` when that variable names a folder, else ``<tmp>/parl_lite-<uid>``.

    Args:
        create: create the folder (mode 0700) if it does not exist.

    Returns:
        The path, or ``None`` if it does not exist (and ``create`` is false).

    Raises:
        PermissionError: the path exists but is a symlink, not a folder, not owned by this user, or
            open to other users (someone else may have planted it).
    """
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        path = os.path.join(base, "parl_lite")
    else:
        path = os.path.join(tempfile.gettempdir(), f"parl_lite-{os.getuid()}")
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    try:
        _check_private_folder(path)
    except FileNotFoundError:
        return None
    return path


def _check_private_folder(path: str) -> None:
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{path} is not a private folder of this user (a symlink, a file, another "
                              f"user's, or open to others); parl_lite does not use it")


def _pool_folder(base: str, owner_pid: int) -> str:
    return os.path.join(base, f"pool-{owner_pid}")


def _remove_stale_folders(base: str) -> None:
    """Remove the folders of pools whose owner process is gone (killed before its shutdown)."""
    for name in os.listdir(base):
        pid = name[len("pool-"):]
        if name.startswith("pool-") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


class ActorLogs:
    """The owner's side: collects output lines per worker and writes the changed logs on ``flush``.

    Args:
        owner_pid: pid of the process that owns the pool (names its folder).
    """

    def __init__(self, owner_pid: int) -> None:
        self._lines: dict[int, collections.deque[str]] = {}
        self._chars: dict[int, int] = {}  # characters held per log, newlines included
        self._changed: set[int] = set()
        self._lock = threading.Lock()
        self.folder: str | None = None
        try:
            base = runtime_folder(create=True)
            if base is None:
                raise FileNotFoundError("the runtime folder vanished as it was created")
            _remove_stale_folders(base)
            folder = _pool_folder(base, owner_pid)
            shutil.rmtree(folder, ignore_errors=True)  # left by an earlier process with this pid
            os.mkdir(folder, 0o700)
        except OSError as exc:  # the pool works without it; only the monitor misses the output
            warnings.warn(f"parl_lite: actor output is not kept for the monitor: {exc}", RuntimeWarning,
                          stacklevel=3)
            return
        self.folder = folder

    def record(self, worker_pid: int, text: str) -> None:
        """Add the (whole) lines of ``text`` to the log of the actor in ``worker_pid``."""
        lines = [line[:_MAX_LINE_CHARS] for line in text.splitlines()]
        with self._lock:
            log = self._lines.setdefault(worker_pid, collections.deque())
            chars = self._chars.get(worker_pid, 0) + sum(len(line) + 1 for line in lines)
            log.extend(lines)
            while len(log) > MAX_LINES or chars > _MAX_LOG_CHARS:
                chars -= len(log.popleft()) + 1
            self._chars[worker_pid] = chars
            self._changed.add(worker_pid)

    def lines(self, worker_pid: int) -> list[str]:
        """The recorded lines of the actor in ``worker_pid``, oldest first."""
        with self._lock:
            return list(self._lines.get(worker_pid, ()))

    def forget(self, worker_pid: int) -> None:
        """Drop the log of an actor that is no longer listed."""
        with self._lock:
            self._lines.pop(worker_pid, None)
            self._chars.pop(worker_pid, None)
            self._changed.discard(worker_pid)
        if self.folder is not None:
            try:
                os.unlink(os.path.join(self.folder, f"{worker_pid}.log"))
            except FileNotFoundError:
                pass

    def flush(self) -> None:
        """Write the logs that changed since the last flush."""
        with self._lock:
            changed = {pid: "".join(line + "\n" for line in self._lines[pid]) for pid in self._changed}
            self._changed.clear()
        if self.folder is None:
            return
        try:
            for pid, body in changed.items():
                self._write(f"{pid}.log", body.encode(errors="replace"))
        except OSError as exc:  # e.g. the disk is full: keep serving, try again on the next change
            warnings.warn(f"parl_lite: could not write an actor log in {self.folder}: {exc}", RuntimeWarning,
                          stacklevel=2)

    def _write(self, name: str, data: bytes) -> None:
        # temporary + rename so a reader never sees half a file; no fsync: these are runtime files
        # that die with the pool, written twice a second
        assert self.folder is not None  # flush() writes only into a folder it has
        temporary = os.path.join(self.folder, f".{name}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(temporary, os.path.join(self.folder, name))

    def close(self) -> None:
        """Remove the pool's folder (at shutdown)."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def read_actor_log(owner_pid: int, worker_pid: int) -> list[str]:
    """Read the last output lines of an actor of the pool in process ``owner_pid``.

    Returns:
        The lines, oldest first (empty if the actor printed nothing).

    Raises:
        FileNotFoundError: that pool keeps no log folder (not running, or another user's).
        PermissionError: the runtime folder is not a private folder of this user.
    """
    base = runtime_folder()
    if base is None:
        raise FileNotFoundError("no parl_lite runtime folder exists for this user")
    folder = _pool_folder(base, owner_pid)
    _check_private_folder(folder)
    try:
        fd = os.open(os.path.join(folder, f"{int(worker_pid)}.log"), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "rb") as log:
        data = log.read(4 * _MAX_LOG_CHARS)  # UTF-8: at most 4 bytes a character
    return data.decode(errors="replace").splitlines()[-MAX_LINES:]
