"""HDF5 checkpoints of models and optimizer state, written atomically.

Layout (``FORMAT_VERSION`` 2)::

    /                        attrs: format="parl_lite.checkpoint", format_version, parl_lite_version,
                                    model_class (class of the "model" role), owner_class
    /models/<role>/          attrs: class            (role = algorithm attribute: model, target_model)
                                    constructor_args (JSON, when the model recorded them)
        <structured name>    one dataset per parameter or buffer, e.g. "fc1.weight", "bn._mean"
    /optimizers/<name>/      attrs: lr_scheduler (JSON, when the optimizer has one)
        <role>/<structured name>/<slot>   one dataset per accumulator, e.g. model/fc1.weight/moment1_0

Optimizer accumulators are stored under the *structured* parameter name rather than paddle's
generated one (``linear_0.w_0``), so a checkpoint restores into a fresh process.

Every dataset carries the CRC-32 of its values (attribute ``crc32``, see
:mod:`parl_lite.common.datasets`, new in format 2). Loading first checks the file's structure (see
:func:`parl_lite.common.datasets.open_hdf5`) and the declared shapes and dtypes of the weights and
accumulators against the models, reading no value; then the checksums, that every value is finite,
that each accumulator has its parameter's shape (or is a scalar such as Adam's ``beta1_pow_acc``,
which must be in [0, 1]) and that the learning-rate scheduler's step count is in range, before
anything is changed. Format 1 files (no checksums) load with the value checks only.
"""
import json
import os
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any

import h5py
import numpy as np
import paddle

from parl_lite.core.model import Model, check_finite_state, weight_problems
from parl_lite.common.atomic import write_hdf5_atomically
from parl_lite.common.paths import check_destination
from parl_lite.common.datasets import (DatasetError, check_finite, check_integer_range, dataset_names, open_hdf5,
                                   read_dataset, write_dataset)
from parl_lite.version import __version__

__all__ = ["CheckpointError", "save", "save_agent_with_memory", "load", "open_checkpoint", "model_group",
           "qualified_name", "FORMAT", "FORMAT_VERSION"]

FORMAT = "parl_lite.checkpoint"
FORMAT_VERSION = 2
_FIRST_CHECKSUMMED_VERSION = 2
_LR_SCHEDULER_KEY = "LR_Scheduler"
_MAX_STEP = 2**53  # a scheduler's step count beyond this is corruption, not training


class CheckpointError(ValueError):
    """A checkpoint could not be read, or does not fit the models it is loaded into."""


def save(
    path: "str | os.PathLike",
    models: Mapping[str, Model],
    optimizers: Mapping[str, paddle.optimizer.Optimizer],
    owner: type | None = None,
    extra: Callable[[h5py.File], None] | None = None,
) -> None:
    """Write ``models`` (and ``optimizers``' state) to ``path`` atomically.

    ``extra(file)``, when given, adds more groups to the same file before it is renamed into
    place (e.g. a replay memory, see :func:`save_agent_with_memory`);
    :func:`load` ignores groups it does not know.

    The file is written next to ``path`` under a temporary name, flushed to disk and renamed over
    ``path``: a process killed mid-save leaves the previous checkpoint intact.

    Raises:
        ValueError: ``path`` is empty or names a folder (``.``, ``..``).
        IsADirectoryError, NotADirectoryError: ``path`` is a folder, or one of its parents is a
            file (the message names it); other ``OSError``: no space, no permission, ...
    """
    path = check_destination(path)
    if not models:
        raise CheckpointError(f"nothing to save to {path}: the algorithm has no parl_lite.Model attribute")

    def write(file: h5py.File) -> None:
        _write(file, models, optimizers, owner)
        if extra is not None:
            extra(file)

    write_hdf5_atomically(path, write)


def load(
    path: "str | os.PathLike",
    models: Mapping[str, Model],
    optimizers: Mapping[str, paddle.optimizer.Optimizer] | None,
    strict: bool = True,
) -> None:
    """Load a checkpoint written by :func:`save` into ``models`` (and ``optimizers`` when the file
    holds their state). Everything is read and checked before anything is changed.

    Args:
        path: the checkpoint.
        models: role -> model to load the weights into.
        optimizers: name -> optimizer to load the state into; ``None`` ignores any optimizer state
            in the file (e.g. to export the model).
        strict: the file must hold exactly the roles of ``models`` (no more, no fewer); False loads
            the roles both have (at least one) and the state of the optimizers both have, and
            leaves the rest as it is.

    Raises:
        CheckpointError: the file is missing, not HDF5, truncated or corrupted (a checksum differs,
            a value is not finite or out of range), not a parl_lite checkpoint, or its models,
            parameters or optimizer state do not fit ``models`` / ``optimizers`` (the message names
            them).
    """
    path = Path(path)
    file = open_checkpoint(path)
    try:
        with file:
            version = _check_header(file, path)
            models = _roles_to_load(file, path, models, strict)
            weights = _read_weights(file, path, models, version)
            optimizer_states = {} if optimizers is None else \
                _read_optimizer_states(file, path, models, optimizers, version, strict)
    except CheckpointError:
        raise
    except DatasetError as error:
        raise CheckpointError(f"checkpoint {path}: {error}") from error
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as error:
        raise CheckpointError(f"checkpoint {path} is truncated or corrupted: {error}") from error
    for role, model in models.items():
        model.set_weights(weights[role])
    if optimizers is not None:
        for name, state in optimizer_states.items():
            optimizers[name].set_state_dict(state)


def open_checkpoint(path: Path) -> h5py.File:
    """Open the checkpoint ``path`` for reading (see :func:`parl_lite.common.datasets.open_hdf5`).

    Raises:
        CheckpointError: ``path`` is missing, not a regular file (the message says what it is),
            not a readable HDF5 file, or corrupted or crafted (see ``open_hdf5``).
    """
    return open_hdf5(path, "checkpoint", CheckpointError)


def _write(file: h5py.File, models, optimizers, owner) -> None:
    file.attrs["format"] = FORMAT
    file.attrs["format_version"] = FORMAT_VERSION
    file.attrs["parl_lite_version"] = __version__
    main_model = models.get("model", next(iter(models.values())))
    file.attrs["model_class"] = qualified_name(type(main_model))
    if owner is not None:
        file.attrs["owner_class"] = qualified_name(owner)
    models_group = file.create_group("models")
    for role, model in models.items():
        group = models_group.create_group(role)
        group.attrs["class"] = qualified_name(type(model))
        constructor_args = model.constructor_args()
        if constructor_args is not None:
            group.attrs["constructor_args"] = json.dumps(constructor_args)
        for name, value in model.get_weights().items():
            write_dataset(group, name, value)
    if not optimizers:
        return
    structured = _structured_parameter_names(models)
    optimizers_group = file.create_group("optimizers")
    for opt_name, optimizer in optimizers.items():
        group = optimizers_group.create_group(opt_name)
        for key, value in optimizer.state_dict().items():
            if key == _LR_SCHEDULER_KEY:
                group.attrs["lr_scheduler"] = json.dumps(value)
                continue
            # an optimizer restored but not stepped since holds the restored arrays as given (paddle
            # creates its accumulators at the first step), so its state is numpy until then
            if not isinstance(value, paddle.Tensor | np.ndarray):
                raise CheckpointError(f"optimizer {opt_name!r}: state entry {key!r} of type "
                                      f"{type(value).__name__} cannot be saved")
            parameter, slot = _split_accumulator_key(key, structured, opt_name)
            write_dataset(group, f"{parameter}/{slot}", np.asarray(value))


def _check_header(file: h5py.File, path: Path) -> int:
    """The file's format version, after checking it is a parl_lite checkpoint this code reads."""
    if file.attrs.get("format") != FORMAT:
        raise CheckpointError(f"{path} is an HDF5 file but not a parl_lite checkpoint (no format attribute)")
    try:
        version = check_integer_range("format_version", file.attrs.get("format_version"), (1, None))
    except DatasetError as error:
        raise CheckpointError(f"checkpoint {path}: attribute {error}") from None
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{path} has checkpoint format {version}; this parl_lite reads up to {FORMAT_VERSION}")
    return version


def _read(dataset: h5py.Dataset, version: int) -> np.ndarray:
    """A dataset's values, checksum-checked (format 2 on) and refused when not finite."""
    value = read_dataset(dataset, require_checksum=version >= _FIRST_CHECKSUMMED_VERSION)
    check_finite(dataset.name.lstrip("/"), value)
    return value


def model_group(file: h5py.File, path: Path, role: str, role_option: str | None = None) -> h5py.Group:
    """The group of model ``role`` (its weights, its ``class`` and ``constructor_args`` attributes),
    after checking the file's header; no value is read.

    Args:
        file: the open checkpoint (see :func:`open_checkpoint`).
        path: its path, for messages.
        role: the model role, e.g. ``"model"``.
        role_option: the command-line option that chooses the role, named when the role is missing.

    Raises:
        CheckpointError: the header is wrong or the role is missing.
    """
    _check_header(file, path)
    roles = sorted(_models_group(file, path).keys())
    if role not in roles:
        hint = f"; choose one with {role_option}" if role_option else ""
        raise CheckpointError(f"checkpoint {path} has no model role {role!r} (it holds {roles}){hint}")
    return file["models"][role]


def _models_group(file: h5py.File, path: Path) -> "h5py.Group | dict":
    """The ``models`` group (empty when missing)."""
    group = file.get("models", {})
    if not isinstance(group, h5py.Group | dict):
        raise CheckpointError(f"checkpoint {path} is corrupted: 'models' is not a group")
    return group


def _datasets(group: h5py.Group) -> dict[str, h5py.Dataset]:
    """The datasets directly in ``group``; anything else there is corruption."""
    datasets = {}
    for name in group.keys():
        item = group[name]
        if not isinstance(item, h5py.Dataset):
            raise DatasetError(f"{item.name.lstrip('/')}: a group where a dataset was expected")
        datasets[name] = item
    return datasets


def _declared(dataset: h5py.Dataset) -> np.ndarray:
    """An array of ``dataset``'s declared shape and dtype that reads nothing and takes no memory,
    to check a file's layout against a model before any value is read."""
    return np.broadcast_to(np.zeros((), dataset.dtype), dataset.shape)


def _roles_to_load(file: h5py.File, path: Path, models: Mapping[str, Model], strict: bool) -> dict[str, Model]:
    """The models whose roles the file holds; with ``strict``, the file's roles must be exactly
    those of ``models``."""
    stored_roles = sorted(_models_group(file, path).keys())
    missing = [role for role in models if role not in stored_roles]
    extra = [role for role in stored_roles if role not in models]
    if strict and (missing or extra):
        raise CheckpointError(f"checkpoint {path} holds model(s) {stored_roles}, the algorithm has {sorted(models)}: "
                              f"extra in the file {extra}, missing from it {missing} (a checkpoint of another "
                              "algorithm?); restore(..., strict=False) loads only the models both have")
    common = {role: model for role, model in models.items() if role in stored_roles}
    if not common:
        raise CheckpointError(f"checkpoint {path} has no weights for model(s) {missing} (it holds {stored_roles})")
    return common


def _read_weights(file: h5py.File, path: Path, models: Mapping[str, Model],
                  version: int) -> dict[str, dict[str, np.ndarray]]:
    datasets = {role: _datasets(file["models"][role]) for role in models}
    problems = []
    for role, model in models.items():  # shapes and dtypes first: nothing is read for a file that does not fit
        declared = {name: _declared(dataset) for name, dataset in datasets[role].items()}
        problems += [f"{role}: {problem}" for problem in weight_problems(model.state_dict(), declared)]
    if problems:
        raise CheckpointError(f"checkpoint {path} does not fit: " + "; ".join(problems))
    return {role: {name: _read(dataset, version) for name, dataset in datasets[role].items()} for role in models}


def _read_optimizer_states(file: h5py.File, path: Path, models, optimizers, version: int,
                           strict: bool) -> dict[str, dict]:
    if "optimizers" not in file:
        return {}
    unique_names = {name: unique for unique, name in _structured_parameter_names(models).items()}
    shapes = {f"{role}/{name}": tuple(parameter.shape)
              for role, model in models.items() for name, parameter in model.named_parameters()}
    states = {}
    for opt_name, group in file["optimizers"].items():
        if opt_name not in optimizers and not strict:
            continue
        if opt_name not in optimizers:
            raise CheckpointError(f"checkpoint {path} holds optimizer {opt_name!r}, which the algorithm "
                                  f"does not have (it has {sorted(optimizers)})")
        state: dict[str, Any] = {}
        datasets = {name: group[name] for name in dataset_names(group)}
        for name, dataset in datasets.items():  # every layout first: nothing is read for a file that does not fit
            parameter = name.rpartition("/")[0]
            if parameter not in unique_names:
                raise CheckpointError(f"checkpoint {path}: optimizer {opt_name!r} has state for unknown "
                                      f"parameter {parameter!r}")
            _check_accumulator_layout(dataset, shapes[parameter])
        for name, dataset in datasets.items():
            parameter, slot = name.rsplit("/", 1)
            value = _read(dataset, version)
            _check_accumulator_range(f"{group.name.lstrip('/')}/{name}", value, shapes[parameter], slot)
            state[f"{unique_names[parameter]}_{slot}"] = value
        if "lr_scheduler" in group.attrs:
            state[_LR_SCHEDULER_KEY] = _read_scheduler(group, path)
        states[opt_name] = state
    return states


def _check_accumulator_layout(dataset: h5py.Dataset, parameter_shape: tuple[int, ...]) -> None:
    """An accumulator (declared, not read) is a float array of its parameter's shape (moments,
    velocities) or a float scalar (powers of Adam's betas; 0 in
    :class:`parl_lite.algorithms.optimizers.RMSprop`)."""
    name = dataset.name.lstrip("/")
    if dataset.dtype.kind != "f":
        raise DatasetError(f"{name}: dtype {dataset.dtype}, expected a float type")
    if dataset.shape != parameter_shape and dataset.size != 1:
        raise DatasetError(f"{name}: shape {dataset.shape}, expected the parameter's shape {parameter_shape}")


def _check_accumulator_range(name: str, value: np.ndarray, parameter_shape: tuple[int, ...], slot: str) -> None:
    """The powers of Adam's betas, scalars, stay in [0, 1]."""
    if value.size == 1 and value.shape != parameter_shape and "_pow_acc" in slot \
            and not 0 <= float(value.reshape(-1)[0]) <= 1:
        raise DatasetError(f"{name}: {float(value.reshape(-1)[0])} is out of range [0, 1]")


def _read_scheduler(group: h5py.Group, path: Path) -> dict:
    name = f"{group.name.lstrip('/')} attribute lr_scheduler"
    try:
        scheduler = json.loads(group.attrs["lr_scheduler"])
    except (json.JSONDecodeError, TypeError) as error:
        raise CheckpointError(f"checkpoint {path}: {name} is not valid JSON: {error}") from error
    if not isinstance(scheduler, dict):
        raise CheckpointError(f"checkpoint {path}: {name} is not a JSON object")
    for key, value in scheduler.items():
        if isinstance(value, float):
            check_finite(f"{name} {key}", np.asarray(value))
    if "last_epoch" in scheduler:
        check_integer_range(f"{name} last_epoch", np.asarray(scheduler["last_epoch"]), (-1, _MAX_STEP))
    return scheduler


def _structured_parameter_names(models: Mapping[str, Model]) -> dict[str, str]:
    """paddle's generated parameter name -> ``role/structured name``."""
    names: dict[str, str] = {}
    for role, model in models.items():
        for name, parameter in model.named_parameters():
            names.setdefault(parameter.name, f"{role}/{name}")
    return names


def _split_accumulator_key(key: str, structured: Mapping[str, str], opt_name: str) -> tuple[str, str]:
    """``linear_0.w_0_moment1_0`` -> (``model/fc1.weight``, ``moment1_0``)."""
    # the longest match wins: "linear_0.w_0" is a prefix of "linear_0.w_0_deepcopy_0"
    for unique in sorted(structured, key=len, reverse=True):
        if key.startswith(unique + "_"):
            return structured[unique], key[len(unique) + 1:]
    raise CheckpointError(f"optimizer {opt_name!r} holds state {key!r} for a parameter of none of the "
                          f"algorithm's models; give every optimized parameter's model to the algorithm")


def qualified_name(cls: type) -> str:
    """``module.QualifiedName`` of ``cls``, as a checkpoint records a model's class."""
    return f"{cls.__module__}.{cls.__qualname__}"


def save_agent_with_memory(agent, path: "str | os.PathLike", memory: Any,
                           with_optimizer: bool = True) -> None:
    """Write ``agent``'s checkpoint and ``memory`` into one HDF5 file, atomically.

    ``agent.restore(path)`` reads the models (and optimizers) back and ``memory.load(path)`` the
    memory, so an off-policy run resumes where it stopped.

    Args:
        agent: a :class:`parl_lite.Agent`.
        path: the checkpoint file.
        memory: the replay memory to store in the ``/replay_memory`` group (a
            :class:`parl_lite.utils.replay_memory.ReplayMemory` or ``FrameReplayMemory``).
        with_optimizer: also store the optimizers' state (as :meth:`parl_lite.Agent.save`).

    Raises:
        ValueError: a weight or optimizer accumulator is NaN or infinite (named); nothing is written.
    """
    models, optimizers = agent.alg.models(), agent.alg.optimizers() if with_optimizer else {}
    check_finite_state(f"save_agent_with_memory({os.fspath(path)!r})", models, optimizers)
    save(path, models=models, optimizers=optimizers, owner=type(agent), extra=memory.write_group)
