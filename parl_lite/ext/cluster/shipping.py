"""The user's source files, from the driver's machine to a per-client work folder on each node.

The client collects the ``*.py`` files of the driver script's folder and the ``distributed_files``
globs (relative globs keep their relative path; an absolute path lands at the top of the work folder
under its own name; a folder is shipped whole, its empty sub-folders included, as PARL does) and
sends them once to each node it places actors on, before the first actor
there starts. The node writes them under a fresh folder it removes when the client leaves.

Only regular files and folders are shipped. A symlink is followed (a linked file is shipped with its
content, a linked folder whole, under the link's name); a link to a folder that contains it (a cycle),
a link to nothing, a FIFO, a socket or a device is refused, named. Sizes are read with ``stat``
before anything is read, and no file is read past the limit (a file whose size ``stat`` understates,
as in ``/proc``, included).
"""
import glob
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from parl_lite.ext.cluster.wire import ClusterError

__all__ = ["collect_files", "write_files", "DistributedFilesError", "DEFAULT_LIMIT_MB"]

DEFAULT_LIMIT_MB = 64.0
_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"))


class DistributedFilesError(FileNotFoundError, ValueError):
    """A ``distributed_files`` entry matches nothing, or names something that cannot be shipped (not
    a regular file or folder, a symlink to nothing, a symlink cycle); a ``ValueError`` too, as PARL
    raises."""


def _driver_folder() -> Path | None:
    """The folder of the script ``python path/to/script.py`` runs; None for ``python -m``, console
    scripts (``parl-lite``, ``pytest``) and interactive sessions, which are not the user's folder."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not path.endswith(".py") or getattr(main, "__spec__", None) is not None:
        return None
    return Path(path).resolve().parent


class _Collection:
    """What to ship, as it is found: relative name -> (path, size by ``stat``), and the folders;
    the sizes are added up as they come, so that a link to a huge tree stops at the limit."""

    def __init__(self, limit_mb: float) -> None:
        self.limit_mb = limit_mb
        self.files: dict[str, tuple[str, int]] = {}
        self.folders: set[str] = set()
        self.total = 0

    def add_file(self, name: str, path: str, size: int) -> None:
        previous = self.files.get(name)
        self.total += size - (previous[1] if previous else 0)
        self.files[name] = (path, size)
        if self.total > self.limit_mb * 2**20:
            largest = sorted(self.files.items(), key=lambda item: -item[1][1])[:3]
            raise ClusterError(f"the files to ship to the cluster add up to {self.total / 2**20:.1f} MB, over the "
                               f"limit of {self.limit_mb:g} MB (counted until then; largest: "
                               + ", ".join(f"{name} {size / 2**20:.1f} MB" for name, (_, size) in largest)
                               + "); ship fewer distributed_files or raise max_ship_mb=")

    def add_folder(self, top: str, name: Path) -> None:
        """``top`` and everything in it, under ``name``; linked folders followed, cycles refused."""
        pending: list[tuple[str, Path, frozenset[tuple[int, int]]]] = [(top, name, frozenset())]
        while pending:
            path, inside, above = pending.pop()
            info = os.stat(path)
            here = (info.st_dev, info.st_ino)
            if here in above:
                raise DistributedFilesError(f"distributed_files: {path} is a symlink to a folder that contains it "
                                            "(a cycle): remove the link, or ship the folders it links to by name")
            self.folders.add(PurePosixPath(*inside.parts).as_posix() + "/")
            for entry in sorted(os.listdir(path)):
                child = os.path.join(path, entry)
                kind, size = _kind(child)
                if kind == "folder":
                    pending.append((child, inside / entry, above | {here}))
                else:
                    self.add_file(PurePosixPath(*inside.parts, entry).as_posix(), child, size)

    def read(self) -> dict[str, bytes]:
        """The folders (empty contents), then each file's content, none read past the limit."""
        budget = int(self.limit_mb * 2**20)
        contents: dict[str, bytes] = {name: b"" for name in sorted(self.folders)}
        for name, (path, _) in self.files.items():
            contents[name] = _read_regular(path, budget, self.limit_mb)
            budget -= len(contents[name])
        return contents


def _kind(path: str) -> tuple[str, int]:
    """("folder", 0) or ("file", its size), following a symlink.

    Raises:
        DistributedFilesError: it is something else (named), or a symlink to nothing.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise DistributedFilesError(f"distributed_files: {path} is a symlink to nothing ({os.readlink(path)!r}): "
                                    "remove it or make it point to a file") from None
    if stat.S_ISDIR(info.st_mode):
        return "folder", 0
    if stat.S_ISREG(info.st_mode):
        return "file", info.st_size
    kind = next((name for test, name in _SPECIAL_KINDS if test(info.st_mode)), "not a regular file")
    link = f" (a symlink to {os.path.realpath(path)})" if os.path.islink(path) else ""
    raise DistributedFilesError(f"distributed_files: {path}{link} is {kind}, not a regular file or folder: only "
                                "those are shipped; move it out of the folder, or leave it out of distributed_files")


def _read_regular(path: str, budget: int, limit_mb: float) -> bytes:
    """The content of ``path``, opened without blocking and checked to be a regular file again
    (it may have been replaced since it was listed), read up to ``budget`` bytes.

    Raises:
        DistributedFilesError: it is no longer a regular file.
        ClusterError: it holds more than ``budget`` bytes (it grew, or ``stat`` understated it).
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with open(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise DistributedFilesError(f"distributed_files: {path} is no longer a regular file")
        content = handle.read(budget + 1)
    if len(content) > budget:
        raise ClusterError(f"the files to ship to the cluster are over the limit of {limit_mb:g} MB once {path} is "
                           "read (it holds more than its size said, or grew); ship fewer distributed_files or "
                           "raise max_ship_mb=")
    return content


def collect_files(distributed_files: Sequence[str], limit_mb: float) -> dict[str, bytes]:
    """Read the files to ship: relative path in the work folder -> content.

    A folder is named with a trailing ``/`` and an empty content (:func:`write_files` makes it).

    Raises:
        DistributedFilesError: a ``distributed_files`` entry matches no file or folder, or names
            (or holds) something that cannot be shipped (see the module docstring).
        ClusterError: the files add up to more than ``limit_mb``.
    """
    collection = _Collection(limit_mb)
    folder = _driver_folder()
    if folder is not None:
        for path in sorted(folder.glob("*.py")):
            kind, size = _kind(str(path))
            if kind == "file":  # a folder named *.py is no module of the script's
                collection.add_file(path.name, str(path), size)
    for pattern in distributed_files:
        matches = sorted(glob.glob(pattern, recursive=True))
        if not matches:
            raise DistributedFilesError(f"distributed_files: {pattern!r} matches no file (relative to "
                                        f"{os.getcwd()})")
        for match in matches:
            relative = Path(Path(match).name if os.path.isabs(pattern) else os.path.normpath(match))
            kind, size = _kind(match)
            if kind == "folder":
                collection.add_folder(match, relative)
            else:
                collection.add_file(PurePosixPath(*relative.parts).as_posix(), match, size)
    return collection.read()


def _safe_parts(name: str) -> list[str]:
    """The folders and file name of ``name`` inside the work folder (``.`` and empty parts dropped),
    or ValueError if it would leave the folder."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if name.startswith("/") or not parts or ".." in parts:
        raise ValueError(f"refusing to write the shipped file {name!r} outside the work folder")
    return parts


def write_files(folder: Path, names: list[str], contents: Sequence[bytes | memoryview], limit_mb: float) -> None:
    """Write shipped files under ``folder`` (the node's side, a new empty folder); a name ending in
    ``/`` is a folder.

    Plain ``os`` calls, each folder made once: a session writes a dozen files on each node it
    reaches, and path objects had added 40% to the CPU of writing them (measured on tmpfs).

    Raises:
        ValueError: a name leaves the folder, the names and contents differ in number, or the
            files exceed ``limit_mb``.
    """
    if len(names) != len(contents):
        raise ValueError(f"{len(names)} shipped file names for {len(contents)} file contents")
    if sum(len(content) for content in contents) > limit_mb * 2**20:
        raise ValueError(f"the shipped files exceed this node's limit of {limit_mb:g} MB")
    made = {""}  # folders made so far, relative to ``folder``
    for name, content in zip(names, contents, strict=True):
        parts = _safe_parts(name)
        is_folder = name.endswith("/")
        inside = parts if is_folder else parts[:-1]
        for depth in range(1, len(inside) + 1):
            relative = "/".join(inside[:depth])
            if relative not in made:
                os.mkdir(os.path.join(folder, relative))
                made.add(relative)
        if not is_folder:
            with open(os.path.join(folder, *parts), "wb") as target:
                target.write(content)
