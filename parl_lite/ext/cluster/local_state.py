"""What ``parl-lite start`` / ``connect`` keep on this machine: the token and the processes started.

Both live in this user's private folder, ``$PARL_LITE_HOME`` or ``~/.parl_lite`` (mode 0700, owned by
this user, not a symlink; anything else is refused, not repaired, since another user may have
planted it). ``token`` (mode 0600) holds the cluster's shared secret, written by the first ``start``
and reused by the next ones (a master restarted after a crash gets its nodes back); ``cluster.json``
lists the pids ``start`` and ``connect`` started, which are all ``parl-lite stop`` ever signals.
"""
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from parl_lite.common.atomic import write_atomically

__all__ = ["cluster_home", "token_path", "create_token", "start_token", "load_token", "read_state",
           "record_process", "forget_processes", "TOKEN_VARIABLE"]

TOKEN_VARIABLE = "PARL_LITE_TOKEN"
HOME_VARIABLE = "PARL_LITE_HOME"
_STATE_FILE = "cluster.json"
_TOKEN_FILE = "token"


def cluster_home(create: bool = False) -> Path:
    """This user's private parl_lite folder.

    Raises:
        PermissionError: it exists but is a symlink, not a folder, not ours, or open to others.
    """
    home = Path(os.environ.get(HOME_VARIABLE) or Path.home() / ".parl_lite")
    if create:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        info = os.lstat(home)
    except FileNotFoundError:
        return home
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{home} must be a folder owned by you with mode 0700 (it holds the "
                              f"cluster token); fix or remove it, or set {HOME_VARIABLE}")
    return home


def token_path() -> Path:
    """Where ``parl-lite start`` writes the token on this machine."""
    return cluster_home() / _TOKEN_FILE


def create_token() -> Path:
    """Write a new random token (mode 0600) and return its path."""
    path = cluster_home(create=True) / _TOKEN_FILE

    def write(temporary: Path) -> None:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")

    return write_atomically(path, write)


def start_token(new: bool) -> tuple[Path, bool]:
    """The token file ``parl-lite start`` gives its master, and whether it was there before: this
    machine's token, reused (the nodes of a master that crashed hold it and rejoin the new one), or
    a new one if there is none or ``new``.

    Raises:
        PermissionError: the token file can be read by other users.
        ValueError: the token file is empty.
    """
    path = token_path()
    if not new:
        try:
            load_token(str(path))
            return path, True
        except FileNotFoundError:
            pass
    return create_token(), False


def load_token(token_file: str | None = None) -> bytes:
    """The cluster token: from ``token_file``, else ``$PARL_LITE_TOKEN``, else this machine's
    token file written by ``parl-lite start``.

    Raises:
        FileNotFoundError: no token is found (the message says where we looked).
        PermissionError: the token file can be read by other users.
    """
    if token_file is None and os.environ.get(TOKEN_VARIABLE):
        return os.environ[TOKEN_VARIABLE].strip().encode()
    path = Path(token_file) if token_file is not None else token_path()
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no cluster token: {path} does not exist; run `parl-lite start` on this machine, or give "
            f"the token with --token-file / token_file= or the {TOKEN_VARIABLE} environment variable") from None
    if info.st_mode & 0o077:
        raise PermissionError(f"the token file {path} can be read by other users (mode "
                              f"{stat.S_IMODE(info.st_mode):o}); chmod 600 it")
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"the token file {path} is empty")
    return token.encode()


def read_state() -> dict[str, Any]:
    """The processes this machine's ``start`` / ``connect`` recorded (``{"processes": [...]}``)."""
    path = cluster_home() / _STATE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {"processes": []}


def _write_state(state: dict[str, Any]) -> None:
    path = cluster_home(create=True) / _STATE_FILE
    write_atomically(path, lambda temporary: temporary.write_text(json.dumps(state, indent=2)))


def record_process(entry: dict[str, Any]) -> None:
    """Add a started process (``{"pid", "role", "address", ...}``) to the state file."""
    state = read_state()
    state["processes"].append(entry)
    _write_state(state)


def forget_processes(pids: list[int]) -> None:
    """Drop ``pids`` from the state file."""
    state = read_state()
    state["processes"] = [entry for entry in state["processes"] if entry["pid"] not in pids]
    _write_state(state)
