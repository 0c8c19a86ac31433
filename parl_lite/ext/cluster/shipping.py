"""The user's source files, from the driver's machine to a per-client work folder on each node.

The client collects the ``*.py`` files of the driver script's folder and the ``distributed_files``
globs (relative globs keep their relative path; an absolute path lands at the top of the work folder
under its own name; a folder is shipped whole, its empty sub-folders included, as PARL does) and
sends them once to each node it places actors on, before the first actor
there starts. The node writes them under a fresh folder it removes when the client leaves.
"""
import glob
import os
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from parl_lite.ext.cluster.wire import ClusterError

__all__ = ["collect_files", "write_files", "DistributedFilesError", "DEFAULT_LIMIT_MB"]

DEFAULT_LIMIT_MB = 64.0


class DistributedFilesError(FileNotFoundError, ValueError):
    """A ``distributed_files`` entry matches nothing (a ``ValueError`` too, as PARL raises)."""


def _driver_folder() -> Path | None:
    """The folder of the script ``python path/to/script.py`` runs; None for ``python -m``, console
    scripts (``parl-lite``, ``pytest``) and interactive sessions, which are not the user's folder."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not path.endswith(".py") or getattr(main, "__spec__", None) is not None:
        return None
    return Path(path).resolve().parent


def collect_files(distributed_files: Sequence[str], limit_mb: float) -> dict[str, bytes]:
    """Read the files to ship: relative path in the work folder -> content.

    A folder is named with a trailing ``/`` and an empty content (:func:`write_files` makes it).

    Raises:
        DistributedFilesError: a ``distributed_files`` entry matches no file or folder.
        ClusterError: the files add up to more than ``limit_mb``.
    """
    files: dict[str, Path] = {}
    folders: set[str] = set()
    folder = _driver_folder()
    if folder is not None:
        for path in sorted(folder.glob("*.py")):
            files[path.name] = path
    for pattern in distributed_files:
        matches = [match for match in sorted(glob.glob(pattern, recursive=True))
                   if os.path.isfile(match) or os.path.isdir(match)]
        if not matches:
            raise DistributedFilesError(f"distributed_files: {pattern!r} matches no file (relative to "
                                        f"{os.getcwd()})")
        for match in matches:
            relative = Path(Path(match).name if os.path.isabs(pattern) else os.path.normpath(match))
            if os.path.isfile(match):
                files[PurePosixPath(*relative.parts).as_posix()] = Path(match)
                continue
            for root, _, names in os.walk(match):
                inside = relative / Path(root).relative_to(match)
                folders.add(PurePosixPath(*inside.parts).as_posix() + "/")
                for name in names:
                    files[PurePosixPath(*inside.parts, name).as_posix()] = Path(root) / name
    total = sum(path.stat().st_size for path in files.values())
    if total > limit_mb * 2**20:
        largest = sorted(files.items(), key=lambda item: -item[1].stat().st_size)[:3]
        raise ClusterError(f"the files to ship to the cluster add up to {total / 2**20:.1f} MB, over the "
                           f"limit of {limit_mb:g} MB (largest: "
                           + ", ".join(f"{name} {path.stat().st_size / 2**20:.1f} MB" for name, path in largest)
                           + "); ship fewer distributed_files or raise max_ship_mb=")
    return {**{name: b"" for name in sorted(folders)}, **{name: path.read_bytes() for name, path in files.items()}}


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
