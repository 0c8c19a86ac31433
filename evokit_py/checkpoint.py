"""ES solver checkpoints in HDF5, written atomically (temp file + fsync + rename).

Layout (``FORMAT_VERSION`` 2)::

    /            attrs: format="evokit_py.solver", format_version, solver_type, config (YAML text),
                        config_crc32, noise_seed, generation
    /params      the solver's current solution (flat float64)
    /solver/*    the solver's state arrays (optimizer moments under solver/optimizer/*)
    /obs_stats/* count, sum, sumsq of the observation normalisation
    /extra/*     whatever the caller adds (the trainer: best parameters and return, timings,
                 the CSV rows held for their evaluation, the solutions still to evaluate: log/*)

Every dataset carries the CRC-32 of its values (attribute ``crc32``, see
:mod:`parl_lite.io.datasets`), the config text its own (``config_crc32``). Reading checks them and
the values: parameters, solver state and statistics finite, the generation counter in
``[0, 2**31)`` and equal to the ``generation`` attribute, the optimizer's step count ``t`` in
``[0, generation]``, statistics counts and sums of squares ``>= 0``. Format 1 files (no checksums)
are read with the value checks only.
"""
import os
import zlib
from pathlib import Path

import h5py
import numpy as np

from evokit_py.config import ConfigError, ESConfig, config_from_yaml_text
from parl_lite.io.atomic import write_hdf5_atomically
from parl_lite.io.datasets import (DatasetError, check_finite, check_integer_range, dataset_names, open_hdf5,
                                   read_dataset, write_dataset)

__all__ = ["SolverCheckpointError", "write_checkpoint", "read_checkpoint", "check_resume", "check_trainer_extra",
           "RESUME_FIXED_KEYS"]

FORMAT = "evokit_py.solver"
FORMAT_VERSION = 2
_FIRST_CHECKSUMMED_VERSION = 2
MAX_GENERATION = 2**31 - 1

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
            groups = {"params": {"params": read_dataset(file["params"], require)}}
            for group in ("solver", "obs_stats", "extra"):
                groups[group] = {name: read_dataset(file[group][name], require) for name in dataset_names(file[group])}
            if require and zlib.crc32(str(attrs.get("config", "")).encode()) != int(attrs.get("config_crc32", -1)):
                raise DatasetError("attribute config: checksum mismatch: the stored config text is corrupted")
            try:
                config_from_yaml_text(str(attrs["config"]))
            except (ConfigError, KeyError) as error:
                raise DatasetError(f"attribute config is corrupt: {error}") from error
        _check_values(attrs, groups)
    except SolverCheckpointError:
        raise
    except DatasetError as error:
        raise SolverCheckpointError(f"solver checkpoint {path}: {error}") from error
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as error:
        raise SolverCheckpointError(f"solver checkpoint {path} is truncated or corrupted: {error}") from error
    return attrs, groups


def _check_values(attrs: dict, groups: dict[str, dict[str, np.ndarray]]) -> None:
    for group in ("params", "solver", "obs_stats"):
        for key, value in groups[group].items():
            check_finite(key if group == "params" else f"{group}/{key}", value)
    solver = groups["solver"]
    if "generation" not in solver:
        raise DatasetError("solver/generation: missing")
    generation = check_integer_range("solver/generation", solver["generation"], (0, MAX_GENERATION))
    if check_integer_range("attribute generation", attrs.get("generation"), (0, MAX_GENERATION)) != generation:
        raise DatasetError(f"attribute generation {attrs['generation']} differs from solver/generation {generation}")
    if "optimizer/t" in solver:
        check_integer_range("solver/optimizer/t", solver["optimizer/t"], (0, generation))
    stats = groups["obs_stats"]
    if "count" in stats and float(stats["count"]) < 0:
        raise DatasetError(f"obs_stats/count: {float(stats['count'])} is negative")
    if "sumsq" in stats and np.any(stats["sumsq"] < 0):
        raise DatasetError("obs_stats/sumsq: holds negative values")


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
    of range: best parameters of the solution's shape, all finite, counts ``>= 0``, the best return
    not NaN (``-inf`` until the first evaluation).

    Args:
        groups: what :func:`read_checkpoint` returned.
        path: the checkpoint (for messages).
    """
    extra = groups["extra"]
    missing = [f"extra/{key}" for key in ("best_return", "best_params", "train_seconds", "episodes", "steps")
               if key not in extra]
    if missing:
        raise SolverCheckpointError(f"solver checkpoint {path} has no {', '.join(missing)}")
    params_shape = groups["params"]["params"].shape
    try:
        if np.shape(extra["best_params"]) != params_shape:
            raise DatasetError(f"extra/best_params: shape {np.shape(extra['best_params'])}, expected {params_shape}")
        for key, value in extra.items():
            if key not in ("best_return", "log/held_evals"):  # nan: not evaluated (yet)
                check_finite(f"extra/{key}", value)
        pending = extra.get("log/pending_solutions")
        if pending is not None and pending.shape[1:] != params_shape:
            raise DatasetError(f"extra/log/pending_solutions: shape {pending.shape}, expected (k, *{params_shape})")
        if np.isnan(extra["best_return"]) or extra["best_return"] == np.inf:
            raise DatasetError(f"extra/best_return: {float(extra['best_return'])} is out of range")
        for key in ("episodes", "steps"):
            check_integer_range(f"extra/{key}", extra[key], (0, None))
    except DatasetError as error:
        raise SolverCheckpointError(f"solver checkpoint {path}: {error}") from error
