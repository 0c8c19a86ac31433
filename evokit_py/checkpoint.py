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
(attribute ``crc32``, see :mod:`parl_lite.common.datasets`) and the config text's (``config_crc32``),
then the values (see :mod:`evokit_py.checkpoint_checks`). Every error names the dataset and the file.
Format 1 files (no checksums) are read with the other checks only.
"""
import os
import zlib
from pathlib import Path

import h5py
import numpy as np

from evokit_py.checkpoint_checks import MAX_GENERATION, SAMPLING_INFO_FIELDS, check_layout, check_values
from evokit_py.config import ESConfig, config_from_yaml_text
from evokit_py.schema import ConfigError
from evokit_py.solvers.registry import solver_class
from parl_lite.common.atomic import write_hdf5_atomically
from parl_lite.common.datasets import (DatasetError, check_finite, check_integer_range, dataset_names, open_hdf5,
                                   read_dataset, write_dataset)

__all__ = ["UNFINISHED_RESULTS", "SolverCheckpointError", "write_checkpoint", "read_checkpoint", "check_resume",
           "check_trainer_extra", "RESUME_FIXED_KEYS"]

# the evaluated candidates of an unfinished update (extra/unfinished/*): a Sampler's result per candidate, beside
# either their indices in the generation (sync) or their sampling infos (async; with the previews they were drawn
# around: previews/ids, previews/versions, previews/params)
UNFINISHED_RESULTS = ("returns", "steps", "obs_sum", "obs_sumsq", "cpu_seconds")
_PREVIEWS = ("previews/ids", "previews/versions", "previews/params")

FORMAT = "evokit_py.solver"
FORMAT_VERSION = 2
_FIRST_CHECKSUMMED_VERSION = 2

# config keys a resumed run must share with the checkpoint: they decide the parameters, the noise and
# every random draw, so a change would silently continue another experiment (the solver's own keys that
# decide its state's layout are its resume_fixed; ESAgent.load_solver checks solver.type,
# solver.population_size and the noise seed too)
RESUME_FIXED_KEYS = ("seed", "env.id", "observation_normalization", "observation_stats.std_floor",
                     "observation_stats.clip", "solver.sampling.gaussian_sampling.cached",
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
            solver = _solver_class(attrs)
            datasets = {"params": {"params": file["params"]}}
            for group in ("solver", "obs_stats", "extra"):
                datasets[group] = {name: file[group][name] for name in dataset_names(file[group])}
            check_layout(datasets, solver, config.solver, generation)
            groups = {group: {name: read_dataset(dataset, require) for name, dataset in members.items()}
                      for group, members in datasets.items()}
        check_values(groups, attrs, solver, config.solver)
    except SolverCheckpointError:
        raise
    except DatasetError as error:
        raise SolverCheckpointError(f"solver checkpoint {path}: {error}") from error
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as error:
        raise SolverCheckpointError(f"solver checkpoint {path} is truncated or corrupted: {error}") from error
    return attrs, groups


def _solver_class(attrs: dict) -> type:
    """The solver class of the file's ``solver_type`` attribute.

    Raises:
        DatasetError: no solver has that type (a plugin's that is not installed).
    """
    try:
        return solver_class(str(attrs.get("solver_type")))
    except ConfigError as error:
        raise DatasetError(f"attribute solver_type: {error}") from None


def check_resume(path: "str | os.PathLike", stored: ESConfig, config: ESConfig) -> None:
    """Refuse to resume with a config that changes one of :data:`RESUME_FIXED_KEYS` or of the
    solver's own keys that decide its state's layout (its ``resume_fixed``).

    Args:
        path: the checkpoint (for messages).
        stored: the config the checkpoint was written with.
        config: the config of the resumed run.

    Raises:
        SolverCheckpointError: naming the first key that differs and both values.
    """
    stored_values, values = stored.to_dict(), config.to_dict()
    same_solver = stored.solver.type == config.solver.type  # else restore_checkpoint refuses the type
    own = tuple(f"solver.{key}" for key in solver_class(config.solver.type).resume_fixed) if same_solver else ()
    for key in RESUME_FIXED_KEYS + own:
        before, now = _lookup(stored_values, key), _lookup(values, key)
        if before != now:
            raise SolverCheckpointError(f"{key}: {path} was trained with {before!r}, the config says {now!r}; "
                                        f"a resumed run must keep it (start a new run in another checkpoint_dir)")


def _lookup(values: dict, dotted: str):
    for part in dotted.split("."):
        values = values[part]
    return values


def check_trainer_extra(groups: dict[str, dict[str, np.ndarray]], path: "str | os.PathLike", attrs: dict) -> None:
    """Refuse a checkpoint whose trainer datasets (``extra/*`` of ``es-train``) are missing or out
    of range: all finite, counts ``>= 0``, the best return not NaN (``-inf`` until the first
    evaluation), the candidates of an unfinished update sound; their shapes were checked by
    :func:`read_checkpoint`.

    Args:
        groups, attrs: what :func:`read_checkpoint` returned.
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
        sampling = config_from_yaml_text(str(attrs["config"])).solver.sampling.gaussian_sampling
        _check_unfinished(extra, int(groups["solver"]["generation"]),
                          sampling.cache_size - len(groups["params"]["params"]) if sampling.cached else None)
    except DatasetError as error:
        raise SolverCheckpointError(f"solver checkpoint {path}: {error}") from error


def _check_unfinished(extra: dict[str, np.ndarray], generation: int, last_offset: int | None) -> None:
    """The evaluated candidates of an unfinished update (``extra/unfinished/*``, their lengths equal
    by their layout) of a checkpoint at ``generation``: all their datasets or none, identified by
    distinct candidate indices or by sampling infos a solver at ``generation`` can take (noise
    offsets up to ``last_offset``, None: uncached noise), whole step counts from 0.

    Raises:
        DatasetError: naming the dataset.
    """
    names = {key for key in extra if key.startswith("unfinished/")}
    if not names:
        return
    identity = "infos" if "unfinished/infos" in names else "indices"
    if identity == "infos" and "unfinished/indices" in names:
        raise DatasetError("extra/unfinished/infos: beside extra/unfinished/indices (a checkpoint holds one or the "
                           "other)")
    needed = {f"unfinished/{key}" for key in (identity, *UNFINISHED_RESULTS)}
    if names & {f"unfinished/{key}" for key in _PREVIEWS}:
        needed |= {f"unfinished/{key}" for key in _PREVIEWS}
    missing = sorted(needed - names)
    if missing:
        raise DatasetError(f"extra/{missing[0]}: missing (the other extra/unfinished/* datasets are there)")
    for key in ("indices", "steps", "infos", "previews/ids", "previews/versions"):
        values = extra.get(f"unfinished/{key}")
        if values is not None and values.size and not np.all(np.mod(values, 1) == 0):
            raise DatasetError(f"extra/unfinished/{key}: holds values that are not whole numbers")
    for key in ("indices", "steps"):
        values = extra.get(f"unfinished/{key}")
        if values is not None and values.size and values.min() < 0:
            raise DatasetError(f"extra/unfinished/{key}: holds values that are not whole numbers from 0")
    if identity == "indices" and len(np.unique(extra["unfinished/indices"])) != len(extra["unfinished/indices"]):
        raise DatasetError("extra/unfinished/indices: a candidate is there twice")
    if identity == "infos":
        _check_held_infos(extra, generation, last_offset)


def _check_held_infos(extra: dict[str, np.ndarray], generation: int, last_offset: int | None) -> None:
    """The sampling infos of an async run's held results (``extra/unfinished/infos``, whole numbers)
    and the previews they were drawn around: what :meth:`evokit_py.solvers.Solver.tell` at
    ``generation`` takes (or drops as stale) without an error."""
    infos = extra["unfinished/infos"].astype(np.int64)
    name = "extra/unfinished/infos"
    if infos.shape[1] != SAMPLING_INFO_FIELDS:
        raise DatasetError(f"{name}: shape {infos.shape}, expected ({len(infos)}, {SAMPLING_INFO_FIELDS}) (seed, "
                           f"offset, sign, parent, version, preview)")
    seed, offset, sign, parent, version, preview = infos.T
    bounds = {"seed": (seed, 0, None), "offset": (offset, 0, last_offset), "sign": (sign, -1, 1),
              "parent": (parent, 0, None), "version": (version, 0, generation + 1), "preview": (preview, 0, None)}
    for field_name, (values, low, high) in bounds.items():
        _check_bounds(f"{name}: {field_name}", values, low, high)
    if np.any((version > generation) & (preview == 0)):
        raise DatasetError(f"{name}: a version {generation + 1} (the checkpoint is at generation {generation}) "
                           f"without a preview")
    if "unfinished/previews/ids" not in extra:
        return
    ids, versions = extra["unfinished/previews/ids"], extra["unfinished/previews/versions"]
    _check_bounds("extra/unfinished/previews/ids: an id", ids, 1, None)
    _check_bounds("extra/unfinished/previews/versions: a version", versions, 0, generation + 1)
    if len(np.unique(ids)) != len(ids):
        raise DatasetError("extra/unfinished/previews/ids: a preview is there twice")
    preview_versions = dict(zip(ids.astype(np.int64).tolist(), versions.astype(np.int64).tolist(), strict=True))
    for info_version, info_preview in zip(version.tolist(), preview.tolist(), strict=True):
        if preview_versions.get(info_preview, info_version) != info_version:
            raise DatasetError(f"{name}: a candidate of version {info_version} drawn around preview {info_preview}, "
                               f"which extra/unfinished/previews/versions says is of version "
                               f"{preview_versions[info_preview]}")


def _check_bounds(what: str, values: np.ndarray, low: int, high: int | None) -> None:
    """Refuse whole numbers ``values`` outside ``[low, high]`` (``high`` None: no upper bound),
    naming the first as ``what <value> is out of range``."""
    bad = values[(values < low) | (values > high)] if high is not None else values[values < low]
    if bad.size:
        raise DatasetError(f"{what} {bad[0]} is out of range [{low}, {'inf' if high is None else high}]")
