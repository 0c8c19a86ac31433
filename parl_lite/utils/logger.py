"""PARL's ``parl.utils.logger``: messages to stdout, and to ``<folder>/log.log`` once a folder is set.

    from parl_lite.utils import logger
    logger.set_dir("./train_log/exp1")   # or logger.auto_set_dir(action="k"): ./train_log/<script>
    logger.info("episode %d: %.1f", 12, 200.0)

Each line reads ``[11-25 14:03:07 MainThread @train.py:52] message``, with ``WRN``, ``ERR`` or
``DEBUG`` before the message of those levels (in colour on a terminal). The summary writer
(:mod:`parl_lite.utils.summary`) writes its files to the same folder.

Unlike PARL's, :func:`set_dir` never deletes anything: it appends to the folder's ``log.log``.

A message that cannot be written (a full disk, a closed stdout) is dropped: the first failure of
each destination is said in one line on stderr, the next ones are not (``logging`` would print a
traceback for each message).
"""
import io
import logging
import os
import sys
import time
import shutil
from pathlib import Path
from typing import IO

from parl_lite.common.paths import open_to_write_in_place

__all__ = [
    "set_dir", "get_dir", "auto_set_dir", "auto_dir_name", "set_level", "add_stdout_handler",
    "remove_handler", "debug", "info", "warning", "warn", "error", "critical", "exception", "setLevel",
    "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "LOG_FILE_NAME",
]

LOG_FILE_NAME = "log.log"
DEBUG, INFO, WARNING, ERROR, CRITICAL = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL

_TAGS = {logging.WARNING: ("WRN", "33"), logging.ERROR: ("ERR", "31"), logging.CRITICAL: ("ERR", "31"),
         logging.DEBUG: ("DEBUG", "34")}
_ACTIONS = {"k": "keep it", "d": "delete it", "n": "use a new folder named with the time", "q": "stop"}


class _Formatter(logging.Formatter):
    """PARL's line layout; ANSI colours only when ``colour`` (a terminal)."""

    def __init__(self, colour: bool) -> None:
        super().__init__(datefmt="%m-%d %H:%M:%S")
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        header = f"[{self.formatTime(record, self.datefmt)} {record.threadName} @{record.filename}:{record.lineno}]"
        tag, code = _TAGS.get(record.levelno, ("", "32"))
        if self.colour:
            header = f"\033[{code}m{header}\033[0m"
            tag = f"\033[{code}m{tag}\033[0m" if tag else ""
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        return f"{header} {tag} {message}" if tag else f"{header} {message}"


class _SaysFailureOnce:
    """A handler mixin: an ``OSError`` while a message is written is said once, in one line on
    stderr, naming where it could not be written (``logging`` prints a traceback every time)."""

    destination = ""
    _failure_said = False

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):  # a message that cannot be formatted: the caller's mistake
            super().handleError(record)  # type: ignore[misc]
            return
        if not self._failure_said:
            self._failure_said = True
            try:
                sys.stderr.write(f"parl_lite.logger: cannot write to {self.destination}: "
                                 f"{error.strerror or error}; its messages are dropped (said once)\n")
            except (OSError, ValueError):  # stderr gone as well
                pass


class _StreamHandler(_SaysFailureOnce, logging.StreamHandler):
    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        self.destination = "standard output" if stream is sys.stdout else getattr(stream, "name", repr(stream))


class _FileHandler(_SaysFailureOnce, logging.FileHandler):
    """Appends to its file, opened without blocking: a FIFO, socket or block device is refused."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, mode="a", encoding="utf-8")
        self.destination = str(path)

    def _open(self) -> io.TextIOWrapper:
        return open_to_write_in_place(self.baseFilename, append=True)


def _stream_handler(stream: IO[str]) -> logging.Handler:
    handler = _StreamHandler(stream)
    handler.setFormatter(_Formatter(colour=hasattr(stream, "isatty") and stream.isatty()))
    return handler


_logger = logging.getLogger("parl_lite.logger")
_logger.propagate = False
_logger.setLevel(logging.DEBUG)  # PARL's default: debug messages are shown
_logger.addHandler(_stream_handler(sys.stdout))
_file_handler: _FileHandler | None = None
_log_dir: str | None = None

debug = _logger.debug
info = _logger.info
warning = _logger.warning
warn = _logger.warning
error = _logger.error
critical = _logger.critical
exception = _logger.exception
setLevel = _logger.setLevel


def set_level(level: int | str) -> None:
    """Show only messages at ``level`` and above (``logger.INFO``, ``"WARNING"``, ...)."""
    _logger.setLevel(level)


def get_dir() -> str | None:
    """The folder set by :func:`set_dir` or :func:`auto_set_dir`, or None."""
    return _log_dir


def set_dir(dirname: "str | os.PathLike") -> None:
    """Also write every message to ``<dirname>/log.log`` (appended; the folder is created if missing).

    Nothing in the folder is deleted (PARL's ``set_dir`` empties it first).

    Raises:
        FileExistsError: ``log.log`` is a FIFO, a socket or a block device (it would block, or is
            no log); IsADirectoryError: it is a folder; OSError: the folder cannot be made.
    """
    global _file_handler, _log_dir
    folder = Path(dirname)
    folder.mkdir(parents=True, exist_ok=True)
    handler = _FileHandler(folder / LOG_FILE_NAME)
    handler.setFormatter(_Formatter(colour=False))
    if _file_handler is not None:
        _logger.removeHandler(_file_handler)
        _file_handler.close()
    _logger.addHandler(handler)
    _file_handler, _log_dir = handler, os.fspath(dirname)


def auto_dir_name() -> str:
    """``train_log/<name of the main script, without .py>`` (``train_log/python`` without a script)."""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    name = Path(script).stem if script else "python"
    return os.path.join("train_log", name)


def auto_set_dir(action: str | None = None) -> str:
    """:func:`set_dir` to :func:`auto_dir_name`, deciding what to do if that folder has files.

    Args:
        action: for a folder that exists and has (non-hidden) files: ``"k"`` keep it and append,
            ``"d"`` delete it first, ``"n"`` use ``<folder><month><day>-<time>`` instead,
            ``"q"`` stop. ``None``: ask on a terminal; without one, raise FileExistsError.

    Returns:
        The folder used.

    Raises:
        FileExistsError: the folder has files and ``action`` is ``"q"``, or None without a terminal.
        ValueError: ``action`` is none of the above.
    """
    if action is not None and action not in _ACTIONS:
        raise ValueError(f"auto_set_dir(action={action!r}): use one of "
                         + ", ".join(f"{key!r} ({meaning})" for key, meaning in _ACTIONS.items()))
    dirname = auto_dir_name()
    if _has_files(dirname):
        if action is None:
            action = _ask(dirname)
        if action == "d":
            shutil.rmtree(dirname)
        elif action == "n":
            dirname += time.strftime("%m%d-%H%M%S")
            info("Use a new log directory %s", dirname)
        elif action == "q":
            raise FileExistsError(f"the log folder {dirname} exists (auto_set_dir(action='q'))")
    set_dir(dirname)
    return dirname


def _has_files(dirname: str) -> bool:
    return os.path.isdir(dirname) and any(not name.startswith(".") for name in os.listdir(dirname))


def _ask(dirname: str) -> str:
    if not sys.stdin or not sys.stdin.isatty():
        raise FileExistsError(f"the log folder {dirname} exists and has files: pass auto_set_dir(action=...) "
                              "'k' to keep it, 'd' to delete it, 'n' for a new folder")
    warning("Log directory %s exists! Use 'd' to delete it, 'k' to keep it, 'n' for a new one.", dirname)
    answer = ""
    while answer not in _ACTIONS:
        answer = input("Select Action: k (keep) / d (delete) / n (new) / q (quit):").lower().strip()
    return answer


def add_stdout_handler() -> logging.Handler:
    """Add another handler that prints to stdout; returns it (for :func:`remove_handler`)."""
    handler = _stream_handler(sys.stdout)
    _logger.addHandler(handler)
    return handler


def remove_handler(handler: logging.Handler) -> None:
    """Remove a handler added by :func:`add_stdout_handler`."""
    _logger.removeHandler(handler)
