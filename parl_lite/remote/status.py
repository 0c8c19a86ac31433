"""Pool status that other processes can read (``parl-lite status``, the web monitor).

The pool is the one owner of its status: a JSON file ``/dev/shm/parl_lite_status_<pid>_<token>``
that it replaces about twice a second and unlinks at shutdown (its zygote unlinks it if the pool's
process dies). Each version is written to a new file created with ``O_EXCL`` under a random name and
renamed over the last one, so a reader sees a whole version or the one before, never a torn one; the
size is not bounded. The random token means another local user cannot create the name in advance.

Readers trust nothing they find there: an entry is read only if it is a regular file of this user
(opened with ``O_NOFOLLOW | O_NONBLOCK``, so a FIFO cannot hang them), holds JSON with the expected
fields, and names a process that is alive with the same start time. Entries and segments
(``parl_lite_<pid>_...``) of dead processes are swept (this assumes one pid namespace per
``/dev/shm``); every other bad entry is skipped and reported.
"""
import json
import os
import re
import stat
from typing import Any

from parl_lite.remote.shm import PROCESS_SEGMENT, SHM_DIR, create_exclusive, open_own_file, remove_session_segments

__all__ = ["StatusBoard", "StatusError", "find_pools", "read_status", "survey", "process_start_time"]

_PREFIX = "parl_lite_status_"
_ENTRY = re.compile(r"^parl_lite_status_(\d+)_([0-9a-f]{16})(\.tmp)?$")
_SEGMENT = re.compile(r"^parl_lite_(\d+)_")
_MAX_BYTES = 64 * 2**20
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "pid": int, "started_at": (int, float), "process_start": int, "workers": list,
}
_NUMBER = (int, float)
_WORKER_FIELDS: dict[str, type | tuple[type, ...]] = {  # what readers of a worker entry use
    "pid": int, "actor": (str, type(None)), "state": str, "rss_mb": _NUMBER,
    "max_memory_mb": (*_NUMBER, type(None)), "calls_served": int, "last_error": (str, type(None)),
}


class StatusError(RuntimeError):
    """A status entry exists but cannot be used (not ours, not a regular file, not a pool status)."""


def process_start_time(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot (None if it does not exist): with the
    pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read().rsplit(b")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


class StatusBoard:
    """The owner's side: publish a JSON-able dict for the pool of this process."""

    def __init__(self, pid: int) -> None:
        name, fd = create_exclusive(f"{_PREFIX}{pid}_")
        os.close(fd)
        self.path = os.path.join(SHM_DIR, name)

    def publish(self, status: dict[str, Any]) -> None:
        """Replace the published status."""
        body = json.dumps(status).encode()
        name, fd = create_exclusive(os.path.basename(self.path) + ".", ".tmp")
        temporary = os.path.join(SHM_DIR, name)
        try:
            with os.fdopen(fd, "wb") as target:
                target.write(body)
            os.rename(temporary, self.path)
        except BaseException:
            os.unlink(temporary)
            raise

    def close(self) -> None:
        """Unlink the status (the owner does this once, at shutdown)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _entries(problems: list[str] | None) -> list[tuple[int, str]]:
    """(owner pid, path) of this user's status entries; sweeps those of dead owners."""
    found = []
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return []
    dead: set[int] = set()
    for name in sorted(names):
        match = _ENTRY.match(name)
        if match is None:
            segment = _SEGMENT.match(name)
            if segment is not None and process_start_time(int(segment.group(1))) is None:
                dead.add(int(segment.group(1)))  # a segment whose process is gone
            continue
        path = os.path.join(SHM_DIR, name)
        pid = int(match.group(1))
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            if problems is not None:
                kind = "another user's file" if stat.S_ISREG(info.st_mode) else "not a regular file"
                problems.append(f"skipped {path}: {kind}")
            continue
        if process_start_time(pid) is None:
            dead.add(pid)
        elif match.group(3) is None:
            found.append((pid, path))
    for pid in dead:  # this user's regular files only, whatever their name claims
        remove_session_segments(f"{_PREFIX}{pid}_")
        remove_session_segments(PROCESS_SEGMENT.format(pid=pid))
    return found


def find_pools(problems: list[str] | None = None) -> list[int]:
    """Pids of this user's live processes that publish a pool status on this machine.

    Entries whose owner is dead are swept (with the shared memory of their session).

    Args:
        problems: if given, a description of each entry skipped is appended to it.
    """
    return sorted({pid for pid, _ in _entries(problems)})


def read_status(pid: int) -> dict[str, Any]:
    """Read the status published by the pool in process ``pid``.

    Raises:
        FileNotFoundError: no pool of this user publishes under that pid.
        StatusError: an entry is there but unusable (it names the file and what is wrong).
    """
    paths = [path for owner, path in _entries(None) if owner == pid]
    if not paths:
        raise FileNotFoundError(f"no parl_lite pool runs in process {pid}")
    errors = []
    for path in paths:
        try:
            return _read_entry(pid, path)
        except FileNotFoundError:
            continue  # replaced or removed meanwhile
        except StatusError as error:
            errors.append(str(error))
    if not errors:
        raise FileNotFoundError(f"no parl_lite pool runs in process {pid}")
    raise StatusError("; ".join(errors))


def _read_entry(pid: int, path: str) -> dict[str, Any]:
    try:
        fd = open_own_file(path)
    except PermissionError as error:
        raise StatusError(str(error)) from error
    with os.fdopen(fd, "rb") as entry:
        raw = entry.read(_MAX_BYTES + 1)
    if len(raw) > _MAX_BYTES:
        raise StatusError(f"{path}: larger than {_MAX_BYTES} bytes, not a pool status")
    try:
        status = json.loads(raw)
    except ValueError as error:
        raise StatusError(f"{path}: not JSON ({error})") from error
    except RecursionError:
        raise StatusError(f"{path}: not a pool status (JSON nested too deeply to read)") from None
    if not isinstance(status, dict):
        raise StatusError(f"{path}: not a pool status (a JSON {type(status).__name__})")
    for key, kind in _REQUIRED.items():
        if not isinstance(status.get(key), kind):
            raise StatusError(f"{path}: not a pool status (field {key!r} missing or of the wrong type)")
    if not isinstance(status.setdefault("ended", []), list):
        raise StatusError(f"{path}: not a pool status (field 'ended' of the wrong type)")
    for worker in status["workers"] + status["ended"]:
        if not isinstance(worker, dict) or any(not isinstance(worker.get(key), kind)
                                               for key, kind in _WORKER_FIELDS.items()):
            raise StatusError(f"{path}: not a pool status (a worker entry without the fields "
                              f"{', '.join(_WORKER_FIELDS)})")
    if status["pid"] != pid or status["process_start"] != process_start_time(pid):
        raise StatusError(f"{path}: written by another process than {pid}")
    return status


def survey() -> tuple[list[dict[str, Any]], list[str]]:
    """The statuses of this user's live pools, and a description of each entry skipped."""
    problems: list[str] = []
    statuses = []
    for pid in find_pools(problems):
        try:
            statuses.append(read_status(pid))
        except FileNotFoundError:
            continue  # the pool ended meanwhile
        except StatusError as error:
            problems.append(f"skipped pool {pid}: {error}")
    return statuses, problems

