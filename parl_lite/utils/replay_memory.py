"""Experience replay: a preallocated numpy ring buffer with uniform, seeded sampling (PARL's
``parl.utils.ReplayMemory``).

    memory = ReplayMemory(max_size=100_000, obs_dim=3, act_dim=1)
    memory.append(obs, act, reward, next_obs, terminal)
    obs, action, reward, next_obs, terminal = memory.sample_batch(256)
    memory.save("memory.h5"); memory.load("memory.h5")

The buffer never imports paddle. On disk (HDF5) it is one group, ``/replay_memory``, either in a
file of its own (:meth:`ReplayMemory.save`) or inside an agent checkpoint
(:func:`parl_lite.io.checkpoint.save_agent_with_memory`); :meth:`ReplayMemory.load` reads both.

Layout of the ``/replay_memory`` group (format 2; format 1 named the ``terminal`` dataset
``terminated``)::

    attrs: format="parl_lite.replay_memory", format_version, max_size, size, next_index,
           rng_state (JSON of the numpy bit generator state)
    obs, action, reward, next_obs, terminal    the first ``size`` rows of each array
"""
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TypeGuard

import h5py
import numpy as np

from parl_lite.common.atomic import write_hdf5_atomically
from parl_lite.common.datasets import open_hdf5

__all__ = ["ReplayMemory", "ReplayMemoryError", "read_rng_state"]

FORMAT = "parl_lite.replay_memory"
FORMAT_VERSION = 2
GROUP = "replay_memory"
_FIELDS = ("obs", "action", "reward", "next_obs", "terminal")
_FORMAT_1_NAMES = {"terminal": "terminated"}  # datasets that format 1 named otherwise
_D4RL_KEYS = {"obs": "observations", "action": "actions", "reward": "rewards", "next_obs": "next_observations",
              "terminal": "terminals"}

Shape = int | tuple[int, ...]
Batch = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class ReplayMemoryError(ValueError):
    """A replay memory file is missing, corrupted, or does not fit the memory it is loaded into."""


class ReplayMemory:
    """A ring buffer of transitions ``(obs, action, reward, next_obs, terminal)``.

    Arrays are allocated once; when full, the oldest transition is overwritten. As PARL's,
    observations and continuous actions are float32, discrete actions (``act_dim=0``) int32,
    rewards float32 and terminal flags bool.

    Args:
        max_size: capacity in transitions.
        obs_dim: observation shape (an int for flat observations).
        act_dim: action shape; ``0`` stores one scalar action per transition (a discrete action
            index).
        obs_dtype: dtype of observations.
        act_dtype: dtype of actions; default ``int32`` when ``act_dim == 0``, else ``float32``.
        seed: seed of the numpy Generator that draws the sample indices; None: a seed drawn from
            numpy's global generator, so that ``np.random.seed`` (as PARL's scripts call it) makes
            the sampling repeat.
    """

    def __init__(self, max_size: int, obs_dim: Shape, act_dim: Shape, *, obs_dtype: "np.typing.DTypeLike" = np.float32,
                 act_dtype: "np.typing.DTypeLike | None" = None, seed: int | None = None) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, (int, np.integer)) or max_size <= 0:
            raise ValueError(f"max_size must be a positive int, got {max_size!r}")
        self.max_size = int(max_size)
        self.obs_shape = _shape("obs_dim", obs_dim)
        self.act_shape = _shape("act_dim", act_dim)
        if act_dtype is None:
            act_dtype = np.int32 if self.act_shape == () else np.float32
        self.obs = np.zeros((self.max_size, *self.obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros_like(self.obs)
        self.action = np.zeros((self.max_size, *self.act_shape), dtype=act_dtype)
        self.reward = np.zeros(self.max_size, dtype=np.float32)
        self.terminal = np.zeros(self.max_size, dtype=np.bool_)
        self.rng = np.random.default_rng(np.random.randint(2**31) if seed is None else seed)
        self._size = 0
        self._next_index = 0

    def size(self) -> int:
        """Number of transitions stored (at most ``max_size``)."""
        return self._size

    def __len__(self) -> int:
        return self._size

    def append(self, obs, act, reward: float, next_obs, terminal: bool) -> None:
        """Store one transition, overwriting the oldest when full.

        ``terminal`` means a true end of the episode (no bootstrapping); a time-limit truncation
        is *not* terminal.

        Raises:
            ValueError: ``obs``, ``next_obs`` or ``act`` has the wrong shape, or a dtype that would
                convert with loss (a float action into an integer memory), ``reward`` is not a
                number or ``terminal`` not a bool (or 0/1); the message names it, and nothing is
                stored.
        """
        checked = (_checked("obs", obs, self.obs_shape, self.obs.dtype),
                   _checked("act", act, self.act_shape, self.action.dtype), _number("reward", reward),
                   _checked("next_obs", next_obs, self.obs_shape, self.obs.dtype), _flag("terminal", terminal))
        index = self._next_index
        self.obs[index], self.action[index], self.reward[index], self.next_obs[index], self.terminal[index] = checked
        self._next_index = (index + 1) % self.max_size
        self._size = min(self._size + 1, self.max_size)

    def extend(self, obs, act, reward, next_obs, terminal) -> None:
        """Store a batch of transitions (first axis = transition), e.g. from a vector env.

        Raises:
            ValueError: shapes do not match the memory or the batch sizes differ (named).
        """
        obs = np.asarray(obs)
        count = len(obs)
        if count > self.max_size:
            raise ValueError(f"extend: {count} transitions do not fit in max_size={self.max_size}")
        arrays = {
            field: _checked(name, value, (count, *getattr(self, field).shape[1:]), getattr(self, field).dtype)
            for field, name, value in zip(_FIELDS, ("obs", "act", "reward", "next_obs", "terminal"),
                                          (obs, act, reward, next_obs, terminal), strict=True)
        }
        indices = (self._next_index + np.arange(count)) % self.max_size
        for field, values in arrays.items():
            getattr(self, field)[indices] = values
        self._next_index = int((self._next_index + count) % self.max_size)
        self._size = min(self._size + count, self.max_size)

    def make_index(self, batch_size: int) -> np.ndarray:
        """``batch_size`` indices of stored transitions, drawn uniformly with replacement.

        Raises:
            ValueError: the memory is empty, or ``batch_size`` is not a positive int.
        """
        if self._size == 0:
            raise ValueError("sample_batch: the replay memory is empty; append transitions first")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        return self.rng.integers(0, self._size, size=batch_size)

    def sample_batch_by_index(self, batch_idx: np.ndarray) -> Batch:
        """The transitions at ``batch_idx``: ``(obs, action, reward, next_obs, terminal)``."""
        return (self.obs[batch_idx], self.action[batch_idx], self.reward[batch_idx],
                self.next_obs[batch_idx], self.terminal[batch_idx])

    def sample_batch(self, batch_size: int) -> Batch:
        """Draw ``batch_size`` transitions uniformly, with replacement.

        Returns:
            ``(obs, action, reward, next_obs, terminal)``, each with leading axis ``batch_size``.

        Raises:
            ValueError: the memory is empty, or ``batch_size`` is not a positive int.
        """
        return self.sample_batch_by_index(self.make_index(batch_size))

    def load_from_d4rl(self, dataset: Mapping[str, np.ndarray]) -> None:
        """Replace the contents with an offline dataset in D4RL's layout (``observations``,
        ``actions``, ``rewards``, ``next_observations``, ``terminals``, one row per transition).

        Raises:
            ValueError: a key is missing, the dataset holds more than ``max_size`` transitions, or
                an array does not fit the memory's shapes (named); nothing is changed.
        """
        missing = [key for key in _D4RL_KEYS.values() if key not in dataset]
        if missing:
            raise ValueError(f"load_from_d4rl: the dataset has no {missing}")
        count = len(dataset["terminals"])
        if count > self.max_size:
            raise ValueError(f"load_from_d4rl: {count} transitions do not fit in max_size={self.max_size}")
        arrays = {field: _checked(key, dataset[key], (count, *getattr(self, field).shape[1:]),
                                  getattr(self, field).dtype)
                  for field, key in _D4RL_KEYS.items()}
        for field, values in arrays.items():
            getattr(self, field)[:count] = values
        self._size, self._next_index = count, count % self.max_size

    # ---- HDF5 ------------------------------------------------------------------------------

    def save(self, pathname: "str | os.PathLike") -> None:
        """Write the memory (contents, position and sampling RNG state) to the HDF5 file
        ``pathname`` atomically."""
        write_hdf5_atomically(pathname, self.write_group)

    def load(self, pathname: "str | os.PathLike") -> None:
        """Load a memory written by :meth:`save` or :func:`parl_lite.io.checkpoint.save_agent_with_memory`.

        Everything is read and checked before this memory changes.

        Raises:
            ReplayMemoryError: the file is missing, not HDF5, truncated or corrupted, holds no
                replay memory, or its capacity, shapes or dtypes differ from this memory's.
        """
        path = Path(pathname)
        try:
            with open_hdf5(path, "replay memory file", ReplayMemoryError) as file:
                state = self._read_group(file, path)
        except ReplayMemoryError:
            raise
        except (OSError, KeyError, ValueError, TypeError) as error:
            raise ReplayMemoryError(f"replay memory file {path} is truncated or corrupted: {error}") from error
        size, next_index, rng_state, arrays = state  # all checked: nothing below can fail
        for name, values in arrays.items():
            getattr(self, name)[:size] = values
        self._size, self._next_index = size, next_index
        self.rng.bit_generator.state = rng_state

    def write_group(self, file: h5py.File) -> None:
        """Write this memory as the ``/replay_memory`` group of an open HDF5 file."""
        group = file.create_group(GROUP)
        group.attrs["format"] = FORMAT
        group.attrs["format_version"] = FORMAT_VERSION
        group.attrs["max_size"] = self.max_size
        group.attrs["size"] = self._size
        group.attrs["next_index"] = self._next_index
        group.attrs["rng_state"] = json.dumps(self.rng.bit_generator.state)
        for name in _FIELDS:
            group.create_dataset(name, data=getattr(self, name)[:self._size])

    def _read_group(self, file: h5py.File, path: Path):
        group = file.get(GROUP)
        if not isinstance(group, h5py.Group) or group.attrs.get("format") != FORMAT:
            raise ReplayMemoryError(f"{path} holds no parl_lite replay memory (no /{GROUP} group)")
        version = int(group.attrs["format_version"])
        if version > FORMAT_VERSION:
            raise ReplayMemoryError(f"{path} has replay memory format {version}; "
                                    f"this parl_lite reads up to {FORMAT_VERSION}")
        max_size, size, next_index = (int(group.attrs[key]) for key in ("max_size", "size", "next_index"))
        if max_size != self.max_size:
            raise ReplayMemoryError(f"{path}: stored max_size {max_size} differs from this memory's "
                                    f"{self.max_size}")
        if not (0 <= size <= max_size and 0 <= next_index < max_size):
            raise ReplayMemoryError(f"{path}: inconsistent size {size} / next_index {next_index} "
                                    f"for max_size {max_size}")
        arrays = {}
        for field in _FIELDS:
            name = _FORMAT_1_NAMES.get(field, field) if version == 1 else field
            if name not in group:
                raise ReplayMemoryError(f"{path}: replay memory has no dataset {name!r}")
            own = getattr(self, field)
            expected = (size, *own.shape[1:])
            dataset = group[name]
            if dataset.shape != expected or dataset.dtype != own.dtype:
                raise ReplayMemoryError(f"{path}: dataset {name!r} is {dataset.shape} {dataset.dtype}, "
                                        f"expected {expected} {own.dtype}")
            arrays[field] = dataset[()]
        return size, next_index, read_rng_state(group, path, self.rng), arrays


def read_rng_state(group: h5py.Group, path: Path, rng: np.random.Generator) -> dict:
    """The sampling generator's state stored in ``group`` (attribute ``rng_state``, JSON), tried on
    a fresh generator of ``rng``'s kind, so that setting it on ``rng`` cannot fail.

    Raises:
        ReplayMemoryError: it is missing, not JSON, not a state of that kind (named).
    """
    name = f"{path}: attribute rng_state"
    text = group.attrs.get("rng_state")
    if not isinstance(text, str):
        raise ReplayMemoryError(f"{name} is missing or not a text")
    try:
        state = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:  # RecursionError: nested too deeply
        raise ReplayMemoryError(f"{name} is not valid JSON: {type(error).__name__}: {error}") from None
    kind = type(rng.bit_generator)
    if not isinstance(state, dict):
        raise ReplayMemoryError(f"{name} is a JSON {type(state).__name__}, not the object of a numpy "
                                f"{kind.__name__} state")
    if state.get("bit_generator") != kind.__name__:
        raise ReplayMemoryError(f"{path}: RNG {state.get('bit_generator')!r} differs from {kind.__name__!r}")
    trial = kind()
    try:
        trial.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as error:
        raise ReplayMemoryError(f"{name} is not a valid {kind.__name__} state: {type(error).__name__}: "
                                f"{error}") from None
    return trial.state


def _shape(name: str, dim: Shape) -> tuple[int, ...]:
    shape = (dim,) if _is_int(dim) else tuple(dim) if isinstance(dim, (tuple, list)) else None
    if shape == (0,):
        return ()
    if shape is None or not all(_is_int(size) and size > 0 for size in shape):
        raise ValueError(f"{name} must be a positive int or a tuple of positive ints (0 for scalar), got {dim!r}")
    return tuple(int(size) for size in shape)


def _is_int(value: object) -> TypeGuard[int | np.integer]:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _number(name: str, value) -> float:
    """``value`` as a float when it is one real number (a Python or numpy scalar, or an array of one)."""
    if type(value) in (float, int) or isinstance(value, (np.floating, np.integer)):  # the usual ones, at once
        return float(value)
    array = np.asarray(value)
    if array.size != 1 or array.dtype.kind not in "fiub":
        raise ValueError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    return float(array.reshape(-1)[0])


def _flag(name: str, value) -> bool:
    """``value`` as a bool when it is a bool, or a number that is 0 or 1."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    array = np.asarray(value)
    if array.size != 1 or array.dtype.kind not in "biuf" or array.reshape(-1)[0] not in (0, 1):
        raise ValueError(f"{name} must be a bool (or 0/1), got {type(value).__name__} {value!r}")
    return bool(array.reshape(-1)[0])


def _checked(name: str, value, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``value`` as an array, refusing a wrong shape or a lossy kind change (float -> int)."""
    array = np.asarray(value)
    if array.shape != shape:
        raise ValueError(f"{name} has shape {array.shape}, expected {shape}")
    if not np.can_cast(array.dtype, dtype, casting="same_kind"):
        raise ValueError(f"{name} has dtype {array.dtype}, which does not convert to {dtype} without loss")
    return array
