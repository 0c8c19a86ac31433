"""ES solver checkpoints in HDF5, written atomically (temp file + fsync + rename).

Layout (``FORMAT_VERSION`` 2)::

    /            attrs: format="evokit_py.solver", format_version, solver_type, config (YAML text),
                        config_crc32, noise_seed, generation
    /params      the solver's current solution (flat float64)
    /solver/*    the solver's state arrays (optimizer moments under solver/optimizer/*)
    /obs_stats/* count, sum, sumsq of the observation normalisation
    /extra/*     whatever the caller adds (the trainer: best parameters and return, timings,
                 the CSV rows held for their evaluation, the solutions still to evaluate: log/*)

Reading checks the file's structure and the declared layout of its datasets against the
parameter count and the stored config before any value is read, then every dataset's CRC-32
(attribute ``crc32``, see :mod:`parl_lite.io.datasets`) and the config text's (``config_crc32``),
then the values (see :mod:`evokit_py.checkpoint_checks`). Every error names the dataset and the file.
Format 1 files (no checksums) are read with the other checks only.
"""
import os
import zlib
from pathlib import Path

import h5py
import numpy as np

from evokit_py.checkpoint_checks import MAX_GENERATION, check_layout, check_values
from evokit_py.config import ConfigError, ESConfig, config_from_yaml_text
from parl_lite.io.atomic import write_hdf5_atomically
from parl_lite.io.datasets import (DatasetError, check_finite, check_integer_range, dataset_names, open_hdf5,
                                   read_dataset, write_dataset)

__all__ = ["UNFINISHED_DATASETS", "SolverCheckpointError", "write_checkpoint", "read_checkpoint", "check_resume",
           "check_trainer_extra", "RESUME_FIXED_KEYS"]

# an unfinished generation's candidates (extra/unfinished/*): their indices, then a Sampler's result per candidate
UNFINISHED_DATASETS = ("indices", "returns", "steps", "obs_sum", "obs_sumsq", "cpu_seconds")

FORMAT = "evokit_py.solver"
FORMAT_VERSION = 2
_FIRST_CHECKSUMMED_VERSION = 2

# config keys a resumed run must share with the checkpoint: they decide the parameters, the noise,
# every random draw and the layout of the solver state, so a change would silently continue another
# experiment (ESAgent.load_solver checks solver.type, solver.population_size and the noise seed too)
RESUME_FIXED_KEYS = ("seed", "env.id", "observation_normalization", "solver.mirrored_sampling",
                     "solver.optimizer.type", "solver.sampling.gaussian_sampling.cached",
                     "solver.sampling.gaussian_sampling.cache_size")


class SolverCheckpointError(ValueError):
    """A solver checkpoint is missing, corrupted or does not fit."""


def write_checkpoint(path: "str | os.PathLike", *, solver_type: str, config_yaml: str, noise_seed: int,
                     params: np.ndarray, solver_state: dict[str, np.ndarray],
                     obs_stats: dict[str, np.ndarray], extra: dict[str, np.ndarray] | None = None) -> None:
    """Write a solver checkpoint to ``path`` atomically (see the module docstring for the layout)."""
    def write(file: h5py.File) -> None:
        file.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, solver_type=solver_type,
                          config=config_yaml, config_crc32=zlib.crc32(config_yaml.encode()), noise_seed=noise_seed,
                          generation=int(solver_state["generation"]))
        write_dataset(file, "params", params)
        for group, values in (("solver", solver_state), ("obs_stats", obs_stats), ("extra", extra or {})):
            file.create_group(group)
            for key, value in values.items():
                write_dataset(file, f"{group}/{key}", value)

    write_hdf5_atomically(path, write)


def read_checkpoint(path: "str | os.PathLike") -> tuple[dict, dict[str, dict[str, np.ndarray]]]:
    """Read and check a checkpoint written by :func:`write_checkpoint`.

    Returns:
        (attributes, {"params": {...}, "solver": {...}, "obs_stats": {...}, "extra": {...}}).

    Raises:
        SolverCheckpointError: missing, a folder, not HDF5, truncated, not an evokit_py checkpoint,
            a checksum that differs, or a value out of range (the message names the dataset).
    """
    path = Path(path)
    try:
        with open_hdf5(path, "solver checkpoint", SolverCheckpointError) as file:
            attrs = {key: file.attrs[key] for key in file.attrs}
            if attrs.get("format") != FORMAT:
                raise SolverCheckpointError(f"{path} is HDF5 but not an evokit_py solver checkpoint")
            version = check_integer_range("attribute format_version", attrs.get("format_version"), (1, None))
            if version > FORMAT_VERSION:
                raise SolverCheckpointError(f"{path} has format {version}; this reads up to {FORMAT_VERSION}")
            require = version >= _FIRST_CHECKSUMMED_VERSION
            if require and zlib.crc32(str(attrs.get("config", "")).encode()) != int(attrs.get("config_crc32", -1)):
                raise DatasetError("attribute config: checksum mismatch: the stored config text is corrupted")
            try:
                config = config_from_yaml_text(str(attrs["config"]))
            except (ConfigError, KeyError) as error:
                raise DatasetError(f"attribute config is corrupt: {error}") from error
            generation = check_integer_range("attribute generation", attrs.get("generation"), (0, MAX_GENERATION))
            datasets = {"params": {"params": file["params"]}}
            for group in ("solver", "obs_stats", "extra"):
                datasets[group] = {name: file[group][name] for name in dataset_names(file[group])}
            check_layout(datasets, str(attrs.get("solver_type")), config.solver, generation)
            groups = {group: {name: read_dataset(dataset, require) for name, dataset in members.items()}
                      for group, members in datasets.items()}
        check_values(groups, attrs, config.solver)
    except SolverCheckpointError:
        raise
    except DatasetError as error:
        raise SolverCheckpointError(f"solver checkpoint {path}: {error}") from error
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as error:
        raise SolverCheckpointError(f"solver checkpoint {path} is truncated or corrupted: {error}") from error
    return attrs, groups


def check_resume(path: "str | os.PathLike", stored: ESConfig, config: ESConfig) -> None:
    """Refuse to resume with a config that changes one of :data:`RESUME_FIXED_KEYS`.

    Args:
        path: the checkpoint (for messages).
        stored: the config the checkpoint was written with.
        config: the config of the resumed run.

    Raises:
        SolverCheckpointError: naming the first key that differs and both values.
    """
    stored_values, values = stored.to_dict(), config.to_dict()
    for key in RESUME_FIXED_KEYS:
        before, now = _lookup(stored_values, key), _lookup(values, key)
        if before != now:
            raise SolverCheckpointError(f"{key}: {path} was trained with {before!r}, the config says {now!r}; "
                                        f"a resumed run must keep it (start a new run in another checkpoint_dir)")


def _lookup(values: dict, dotted: str):
    for part in dotted.split("."):
        values = values[part]
    return values


def check_trainer_extra(groups: dict[str, dict[str, np.ndarray]], path: "str | os.PathLike") -> None:
    """Refuse a checkpoint whose trainer datasets (``extra/*`` of ``es-train``) are missing or out
    of range: all finite, counts ``>= 0``, the best return not NaN (``-inf`` until the first
    evaluation); their shapes were checked by :func:`read_checkpoint`.

    Args:
        groups: what :func:`read_checkpoint` returned.
        path: the checkpoint (for messages).
    """
    extra = groups["extra"]
    missing = [f"extra/{key}" for key in ("best_return", "best_params", "train_seconds", "episodes", "steps")
               if key not in extra]
    if missing:
        raise SolverCheckpointError(f"solver checkpoint {path} has no {', '.join(missing)}")
    try:  # shapes were checked by read_checkpoint, before anything was read
        for key, value in extra.items():
            if key not in ("best_return", "log/held_evals"):  # nan: not evaluated (yet)
                check_finite(f"extra/{key}", value)
        if np.isnan(extra["best_return"]) or extra["best_return"] == np.inf:
            raise DatasetError(f"extra/best_return: {float(extra['best_return'])} is out of range")
        for key in ("episodes", "steps"):
            check_integer_range(f"extra/{key}", extra[key], (0, None))
        _check_unfinished(extra)
    except DatasetError as error:
        raise SolverCheckpointError(f"solver checkpoint {path}: {error}") from error


def _check_unfinished(extra: dict[str, np.ndarray]) -> None:
    """The candidates of an unfinished generation (``extra/unfinished/*``, their lengths equal by
    their layout): all their datasets or none, distinct candidate indices, whole step counts, from 0.

    Raises:
        DatasetError: naming the dataset.
    """
    names = {key for key in extra if key.startswith("unfinished/")}
    if not names:
        return
    missing = sorted({f"unfinished/{key}" for key in UNFINISHED_DATASETS} - names)
    if missing:
        raise DatasetError(f"extra/{missing[0]}: missing (the other extra/unfinished/* datasets are there)")
    for key in ("indices", "steps"):
        values = extra[f"unfinished/{key}"]
        if values.size and (values.min() < 0 or not np.all(np.mod(values, 1) == 0)):
            raise DatasetError(f"extra/unfinished/{key}: holds values that are not whole numbers from 0")
    if len(np.unique(extra["unfinished/indices"])) != len(extra["unfinished/indices"]):
        raise DatasetError("extra/unfinished/indices: a candidate is there twice")
