"""ES solver checkpoints in HDF5, written atomically (temp file + fsync + rename).

Layout::

    /            attrs: format="evokit_py.solver", format_version, solver_type, config (YAML text),
                        noise_seed, generation
    /params      the solver's current solution (flat float64)
    /solver/*    the solver's state arrays (optimizer moments under solver/optimizer/*)
    /obs_stats/* count, sum, sumsq of the observation normalisation
    /extra/*     whatever the caller adds (the trainer: best parameters and return, timings)
"""
import os
from pathlib import Path
from typing import Dict, Optional, Tuple

import h5py
import numpy as np

__all__ = ["SolverCheckpointError", "write_checkpoint", "read_checkpoint", "atomic_write_bytes"]

FORMAT = "evokit_py.solver"
FORMAT_VERSION = 1


class SolverCheckpointError(ValueError):
    """A solver checkpoint is missing, corrupted or does not fit."""


def _atomic(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(temporary)
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    descriptor = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def atomic_write_bytes(path: "str | os.PathLike", data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    _atomic(Path(path), lambda temporary: Path(temporary).write_bytes(data))


def write_checkpoint(path: "str | os.PathLike", *, solver_type: str, config_yaml: str, noise_seed: int,
                     params: np.ndarray, solver_state: Dict[str, np.ndarray],
                     obs_stats: Dict[str, np.ndarray], extra: Optional[Dict[str, np.ndarray]] = None) -> None:
    """Write a solver checkpoint to ``path`` atomically (see the module docstring for the layout)."""
    def write(temporary):
        with h5py.File(temporary, "w") as file:
            file.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, solver_type=solver_type,
                              config=config_yaml, noise_seed=noise_seed,
                              generation=int(solver_state["generation"]))
            file.create_dataset("params", data=params)
            for group, values in (("solver", solver_state), ("obs_stats", obs_stats), ("extra", extra or {})):
                file.create_group(group)
                for key, value in values.items():
                    file.create_dataset(f"{group}/{key}", data=value)
    _atomic(Path(path), write)


def read_checkpoint(path: "str | os.PathLike") -> Tuple[dict, Dict[str, Dict[str, np.ndarray]]]:
    """Read a checkpoint written by :func:`write_checkpoint`.

    Returns:
        (attributes, {"params": {...}, "solver": {...}, "obs_stats": {...}, "extra": {...}}).

    Raises:
        SolverCheckpointError: missing, not HDF5, truncated, or not an evokit_py checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise SolverCheckpointError(f"solver checkpoint {path} does not exist")
    try:
        with h5py.File(path, "r") as file:
            attrs = {key: file.attrs[key] for key in file.attrs}
            if attrs.get("format") != FORMAT:
                raise SolverCheckpointError(f"{path} is HDF5 but not an evokit_py solver checkpoint")
            if int(attrs.get("format_version", -1)) > FORMAT_VERSION:
                raise SolverCheckpointError(f"{path} has format {attrs['format_version']}; this reads up to {FORMAT_VERSION}")
            groups = {"params": {"params": file["params"][()]}}
            for group in ("solver", "obs_stats", "extra"):
                datasets = {}
                file[group].visititems(lambda name, item: datasets.__setitem__(name, item[()])
                                       if isinstance(item, h5py.Dataset) else None)
                groups[group] = datasets
    except SolverCheckpointError:
        raise
    except (OSError, KeyError, ValueError) as error:
        raise SolverCheckpointError(f"solver checkpoint {path} is truncated or corrupted: {error}") from error
    return attrs, groups
