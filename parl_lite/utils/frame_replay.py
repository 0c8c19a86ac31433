"""Experience replay for stacked frames (Atari): each frame stored once, not once per stack.

    memory = FrameReplayMemory(1_000_000, frame_shape=(84, 84), stack=4)
    memory.append(obs, action, reward, next_obs, terminal)   # obs, next_obs: uint8 [4, 84, 84]
    obs, action, reward, next_obs, terminal = memory.sample_batch(32)   # obs: uint8 [32, 4, 84, 84]

A transition's observation is a stack of the last ``stack`` frames, and the next observation is
the same stack moved on by one frame, so storing both whole keeps every frame ``2 * stack`` times
(8 copies: 56 GB for a million 84×84 transitions). This memory keeps a ring of *slots*, one frame
each, in the order the frames were seen: a transition's slot holds the newest frame of its
observation, and its stacks are read back from that slot and its neighbours. 1M transitions of
84×84 take 7.06 GB of frames (and 10 bytes each of action, reward and flags).

Episodes are found by comparing each observation with the previous transition's next
observation (one ``memcmp``): a stack that does not continue the previous one starts an episode,
whose older frames (zeros, or the first frame repeated, whatever the environment put there) go
in slots of their own before it; the final frame of the episode before goes in a slot after its
last transition. That costs ``stack`` slots per episode (0.1 to 0.5% of an Atari game's slots),
and needs nothing but PARL's ``append(obs, act, reward, next_obs, terminal)``. A transition is
sampled once its next frame is stored and while its oldest frame is still in the ring.

On disk (HDF5) it is the group ``/replay_memory`` with ``format="parl_lite.frame_replay_memory"``,
read back by :meth:`FrameReplayMemory.load` after every value is checked.
"""
import json
import os
from pathlib import Path

import h5py
import numpy as np

from parl_lite.common.atomic import write_hdf5_atomically
from parl_lite.common.datasets import open_hdf5, read_dataset, write_dataset
from parl_lite.utils.replay_memory import GROUP, ReplayMemoryError, read_rng_state

__all__ = ["FrameReplayMemory"]

FORMAT = "parl_lite.frame_replay_memory"
FORMAT_VERSION = 1
_SLOT_ARRAYS = ("frames", "action", "reward", "terminal", "is_transition")
_REJECTION_ROUNDS = 8

Batch = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class FrameReplayMemory:
    """A ring of frames from which transitions of stacked frames are sampled uniformly (see the
    module docstring).

    Args:
        max_size: capacity in slots (a transition takes one, an episode ``stack`` more).
        frame_shape: shape of one frame, e.g. ``(84, 84)``.
        stack: frames per observation (observations are ``uint8 [stack, *frame_shape]``).
        seed: seed of the sampling generator (None: drawn from numpy's global generator).
    """

    def __init__(self, max_size: int, frame_shape: tuple[int, ...] = (84, 84), stack: int = 4, *,
                 seed: int | None = None) -> None:
        for name, value in (("max_size", max_size), ("stack", stack)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"FrameReplayMemory: {name} must be a positive int, got {value!r}")
        if max_size <= stack:
            raise ValueError(f"FrameReplayMemory: max_size ({max_size}) must exceed stack ({stack})")
        self.max_size, self.stack = int(max_size), int(stack)
        self.frame_shape = tuple(int(size) for size in frame_shape)
        self.obs_shape = (self.stack, *self.frame_shape)
        self.frames = np.zeros((self.max_size, *self.frame_shape), dtype=np.uint8)
        self.action = np.zeros(self.max_size, dtype=np.int32)
        self.reward = np.zeros(self.max_size, dtype=np.float32)
        self.terminal = np.zeros(self.max_size, dtype=np.bool_)
        self.is_transition = np.zeros(self.max_size, dtype=np.bool_)
        self.rng = np.random.default_rng(np.random.randint(2**31) if seed is None else seed)
        self._written = 0  # slots written so far; slot number g lives at g % max_size
        self._transitions = 0  # transitions among the slots still in the ring
        self._pending: np.ndarray | None = None  # the last transition's next observation, not yet in a slot

    def size(self) -> int:
        """Transitions stored (the most recent one included, though it is sampled only once the
        next one is appended)."""
        return self._transitions

    def __len__(self) -> int:
        return self._transitions

    def append(self, obs, act, reward: float, next_obs, terminal: bool) -> None:
        """Store one transition (PARL's signature); ``obs`` and ``next_obs`` are ``uint8`` stacks.

        ``terminal`` means no bootstrapping from ``next_obs`` (a time-limit truncation is not
        terminal).

        Raises:
            ValueError: an observation has another shape or dtype, the action is not an integer,
                or ``terminal`` is not a boolean; the message names it.
        """
        obs = self._checked_obs("obs", obs)
        next_obs = self._checked_obs("next_obs", next_obs)
        if not isinstance(terminal, (bool, np.bool_)):
            raise ValueError(f"FrameReplayMemory.append: terminal must be a bool, got {terminal!r}")
        if isinstance(act, (bool, np.bool_)) or not isinstance(act, (int, np.integer)) and not (
                isinstance(act, np.ndarray) and act.shape in ((), (1,)) and act.dtype.kind in "iu"):
            raise ValueError(f"FrameReplayMemory.append: act must be one integer action, got {act!r}")
        if self._pending is None or not np.array_equal(obs, self._pending):  # a new episode starts here
            if self._pending is not None:
                self._write_slot(self._pending[-1])  # the last episode's final frame
            for frame in obs[:-1]:
                self._write_slot(frame)
        self._write_slot(obs[-1], (int(np.asarray(act).reshape(-1)[0]), float(reward), bool(terminal)))
        self._pending = next_obs.copy()

    def sample_batch(self, batch_size: int) -> Batch:
        """Draw ``batch_size`` transitions uniformly, with replacement.

        Returns:
            ``(obs, action, reward, next_obs, terminal)``: ``uint8 [B, stack, ...]``, ``int32 [B]``,
            ``float32 [B]``, ``uint8 [B, stack, ...]``, ``bool [B]``.

        Raises:
            ValueError: no transition can be sampled yet, or ``batch_size`` is not a positive int.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        slots = self._draw(int(batch_size))
        stacks = (slots[:, None] + np.arange(-self.stack + 1, 2)) % self.max_size  # [B, stack + 1]
        frames = self.frames[stacks]
        return (frames[:, :-1], self.action[slots], self.reward[slots], frames[:, 1:], self.terminal[slots])

    def _draw(self, count: int) -> np.ndarray:
        """Slots of ``count`` sampleable transitions: the oldest frame of the stack still in the
        ring, the next frame written. Rejection sampling over those slots (nearly all hold one);
        should a few rounds not find enough, the slots that do are listed and drawn from."""
        low = max(self._written - self.max_size, 0) + self.stack - 1  # slot numbers, not ring positions
        high = self._written - 1  # the newest slot: its next frame is not written yet
        chosen = np.empty(0, dtype=np.int64)
        for _ in range(_REJECTION_ROUNDS if high > low else 0):
            candidates = self._slots(self.rng.integers(low, high, size=2 * (count - len(chosen)) + 8))
            chosen = np.concatenate([chosen, candidates[self.is_transition[candidates]]])
            if len(chosen) >= count:
                return chosen[:count]
        valid = np.flatnonzero(self.is_transition[self._slots(np.arange(low, max(high, low)))]) + low
        if not len(valid):
            raise ValueError("sample_batch: no transition of the replay memory can be sampled yet; append more")
        return self._slots(self.rng.choice(valid, size=count))

    def _slots(self, numbers: np.ndarray) -> np.ndarray:
        return numbers % self.max_size

    def _write_slot(self, frame: np.ndarray, transition: tuple[int, float, bool] | None = None) -> None:
        index = self._written % self.max_size
        self._transitions -= int(self.is_transition[index])
        self.frames[index] = frame
        self.is_transition[index] = transition is not None
        if transition is not None:
            self.action[index], self.reward[index], self.terminal[index] = transition
            self._transitions += 1
        self._written += 1

    def _checked_obs(self, name: str, value) -> np.ndarray:
        array = np.asarray(value)
        if array.shape != self.obs_shape or array.dtype != np.uint8:
            raise ValueError(f"FrameReplayMemory.append: {name} is {array.dtype} {array.shape}, expected uint8 "
                             f"{self.obs_shape} (stacked frames, channel first)")
        return array

    # ---- HDF5 ------------------------------------------------------------------------------

    def save(self, pathname: "str | os.PathLike") -> None:
        """Write the memory (slots, position, the pending next observation and the sampling RNG
        state) to the HDF5 file ``pathname`` atomically."""
        write_hdf5_atomically(pathname, self.write_group)

    def write_group(self, file: h5py.File) -> None:
        """Write this memory as the ``/replay_memory`` group of an open HDF5 file."""
        group = file.create_group(GROUP)
        group.attrs["format"] = FORMAT
        group.attrs["format_version"] = FORMAT_VERSION
        group.attrs["max_size"] = self.max_size
        group.attrs["stack"] = self.stack
        group.attrs["written"] = self._written
        group.attrs["rng_state"] = json.dumps(self.rng.bit_generator.state)
        filled = min(self._written, self.max_size)
        for name in _SLOT_ARRAYS:
            write_dataset(group, name, getattr(self, name)[:filled])
        if self._pending is not None:
            write_dataset(group, "pending", self._pending)

    def load(self, pathname: "str | os.PathLike") -> None:
        """Load a memory written by :meth:`save` (or a trainer's checkpoint). Everything is read
        and checked before this memory changes.

        Raises:
            ReplayMemoryError: the file is missing, not HDF5, corrupted, holds no frame replay
                memory, or its capacity, stack or frame shape differ from this memory's.
        """
        path = Path(pathname)
        try:
            with open_hdf5(path, "replay memory file", ReplayMemoryError) as file:
                written, rng_state, arrays, pending = self._read_group(file, path)
        except ReplayMemoryError:
            raise
        except (OSError, KeyError, ValueError, TypeError) as error:
            raise ReplayMemoryError(f"replay memory file {path} is truncated or corrupted: {error}") from error
        filled = min(written, self.max_size)
        for name, values in arrays.items():
            getattr(self, name)[:filled] = values
        self._written = written
        self._transitions = int(self.is_transition[:filled].sum())
        self._pending = pending
        self.rng.bit_generator.state = rng_state

    def _read_group(self, file: h5py.File, path: Path):
        group = file.get(GROUP)
        if group is None or group.attrs.get("format") != FORMAT:
            raise ReplayMemoryError(f"{path} holds no parl_lite frame replay memory (no /{GROUP} group of format "
                                    f"{FORMAT!r})")
        if int(group.attrs["format_version"]) > FORMAT_VERSION:
            raise ReplayMemoryError(f"{path} has frame replay memory format {int(group.attrs['format_version'])}; "
                                    f"this parl_lite reads up to {FORMAT_VERSION}")
        for key, own in (("max_size", self.max_size), ("stack", self.stack)):
            if int(group.attrs[key]) != own:
                raise ReplayMemoryError(f"{path}: stored {key} {int(group.attrs[key])} differs from this "
                                        f"memory's {own}")
        written = int(group.attrs["written"])
        if written < 0:
            raise ReplayMemoryError(f"{path}: slots written {written} is negative")
        filled = min(written, self.max_size)
        arrays = {}
        for name in _SLOT_ARRAYS:
            own = getattr(self, name)
            values = read_dataset(group[name]) if name in group else None
            if values is None:
                raise ReplayMemoryError(f"{path}: replay memory has no dataset {name!r}")
            if values.shape != (filled, *own.shape[1:]) or values.dtype != own.dtype:
                raise ReplayMemoryError(f"{path}: dataset {name!r} is {values.dtype} {values.shape}, expected "
                                        f"{own.dtype} {(filled, *own.shape[1:])}")
            arrays[name] = values
        pending = read_dataset(group["pending"]) if "pending" in group else None
        if pending is not None and (pending.shape != self.obs_shape or pending.dtype != np.uint8):
            raise ReplayMemoryError(f"{path}: dataset 'pending' is {pending.dtype} {pending.shape}, expected uint8 "
                                    f"{self.obs_shape}")
        return written, read_rng_state(group, path, self.rng), arrays, pending
