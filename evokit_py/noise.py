"""Gaussian noise for ES, addressed by small sampling infos so that only those cross processes.

Cached sampling (OpenAI ES / PARL ES): one table of ``cache_size`` standard normal float32 values is
built once from the seed and held in shared memory; a perturbation of dimension ``d`` is the slice
``table[offset:offset + d]``. Uncached sampling regenerates the noise from a per-sample seed.

Shared-memory ownership: exactly one process (the trainer) *creates* the table and *unlinks* it;
if its owner drops the table without unlinking it (an exception on the way out), the segment is
unlinked when the table object is collected or, at the latest, when the process exits.
Every other process attaches without registering the segment with its resource tracker: on Python
< 3.13 a plain ``SharedMemory(name)`` registers it, and the tracker unlinks it when that reader
exits, pulling the table from under everyone else.
"""
import sys
import threading
import weakref
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from parl_lite.remote.shm import process_segment_name

__all__ = ["SamplingInfo", "NoiseSpec", "NoiseSource", "NoiseTable", "StreamNoise", "attach_shared_memory"]


@dataclass(frozen=True)
class SamplingInfo:
    """Where a candidate's noise comes from: small enough to log and to send between processes.

    Attributes:
        seed: the noise table's seed (cached sampling) or the sample's own seed (uncached).
        offset: start of the slice in the noise table (cached sampling; 0 otherwise).
        sign: +1 or -1 (mirrored pairs share seed and offset); 0 means no noise (the parent itself).
        parent: which of the solver's centres the noise is added to (GA parents; 0 otherwise).
        version: the solver's parameter version (generation) the candidate was drawn around.
        preview: 0, or the id of the preview of ``version`` it was drawn around instead: the parameters
            the update to ``version`` was heading to, made before that update from the results in so
            far (:meth:`evokit_py.solvers.Solver.preview`; asynchronous mode).
    """
    seed: int
    offset: int
    sign: int
    parent: int = 0
    version: int = 0
    preview: int = 0

    def to_list(self) -> list[int]:
        return [self.seed, self.offset, self.sign, self.parent, self.version, self.preview]

    @classmethod
    def from_list(cls, values) -> "SamplingInfo":
        """Read :meth:`to_list`'s list (4 or 5 items, from before versions or previews: version 0, no preview)."""
        values = [int(v) for v in values]
        if len(values) not in (4, 5, 6):
            raise ValueError(f"a sampling info is [seed, offset, sign, parent, version, preview], got {values}")
        return cls(*values)


@dataclass
class NoiseSpec:
    """How a sampling worker finds the noise: the table's shared-memory name (cached sampling) or
    just the seed (uncached)."""
    seed: int
    dim: int
    table_name: str | None = None
    table_size: int = 0


_ATTACH_LOCK = threading.Lock()
_FILL_BLOCK = 2**22  # values drawn at once when a table is built (16 MB, about 0.1 s)


def attach_shared_memory(name: str) -> shared_memory.SharedMemory:
    """Attach to an existing segment without letting this process's resource tracker own it."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    with _ATTACH_LOCK:  # SharedMemory.__init__ calls resource_tracker.register by module attribute
        register = resource_tracker.register
        resource_tracker.register = lambda *args, **kwargs: None
        try:
            return shared_memory.SharedMemory(name=name)
        finally:
            resource_tracker.register = register


class NoiseTable:
    """A table of standard normal float32 values in shared memory.

    Use :meth:`create` in the owner process (it must call :meth:`unlink` when done, or use it as a
    context manager) and :meth:`attach` everywhere else (``close`` only).
    """

    def __init__(self, memory: shared_memory.SharedMemory | None, seed: int, size: int, owner: bool):
        self._memory = memory
        # the owner's guarantee: the segment goes with the table object, or with the process
        self._unlink_at_exit = weakref.finalize(self, _unlink_segment, memory) if owner and memory else None
        self.seed = seed
        self.size = size
        self.owner = owner
        self.values = np.ndarray((size,), dtype=np.float32, buffer=memory.buf if memory else None)

    @property
    def name(self) -> str | None:
        """The shared-memory name (None for a table rebuilt in this process's own memory)."""
        return self._memory.name if self._memory else None

    @classmethod
    def create(cls, seed: int, size: int) -> "NoiseTable":
        """Build the table from ``seed`` (same seed, same values) in a new shared-memory segment.

        The values are drawn a block at a time, so that a Ctrl-C stops a large table's build (a
        billion values take half a minute); the segment is unlinked then, as on any other error.
        """
        if size <= 0:
            raise ValueError(f"cache_size must be > 0, got {size}")
        # named after this process so that it is swept if the process is killed before unlinking it
        memory = shared_memory.SharedMemory(name=process_segment_name("noise"), create=True, size=size * 4)
        table = cls(memory, seed, size, owner=True)
        try:
            return table._fill()
        except BaseException:
            table.unlink()
            raise

    @classmethod
    def attach_or_rebuild(cls, name: str, seed: int, size: int) -> "NoiseTable":
        """Map the table another process created; where no segment of that name exists (another
        host: a cluster node, a Ray worker elsewhere), build the same values from ``seed`` in this
        process's own memory, so that results do not depend on where a sampler runs."""
        try:
            return cls.attach(name, seed, size)
        except FileNotFoundError:
            return cls(None, seed, size, owner=False)._fill()

    def _fill(self) -> "NoiseTable":
        rng = np.random.default_rng(self.seed)  # drawn in blocks, the values of one draw of them all
        for start in range(0, self.size, _FILL_BLOCK):
            block = self.values[start:start + _FILL_BLOCK]
            rng.standard_normal(len(block), dtype=np.float32, out=block)
        return self

    @classmethod
    def attach(cls, name: str, seed: int, size: int) -> "NoiseTable":
        """Map the table another process created (read-only use, no ownership)."""
        return cls(attach_shared_memory(name), seed, size, owner=False)

    def close(self) -> None:
        """Unmap this process's view (the segment stays for the other processes)."""
        self.values = None
        if self._memory is None:
            return
        try:
            self._memory.close()
        except BufferError:  # a caller still holds a slice: the mapping goes with the last one
            pass

    def unlink(self) -> None:
        """Owner only: unmap and destroy the segment."""
        if self._memory is None or self._unlink_at_exit is None:  # attached, or rebuilt in private memory
            raise RuntimeError(f"noise table {self.name} is attached, not owned: only its creator unlinks it")
        self.close()
        self._unlink_at_exit.detach()
        self._memory.unlink()

    def __enter__(self) -> "NoiseTable":
        return self

    def __exit__(self, *exc) -> None:
        if self.owner:
            self.unlink()
        else:
            self.close()


def _unlink_segment(memory: shared_memory.SharedMemory) -> None:
    try:
        memory.close()
    except BufferError:  # a view of it is still alive: unlinking alone frees the name
        pass
    memory.unlink()


class NoiseSource:
    """Turns sampling infos into noise vectors of dimension ``dim`` and draws new infos.

    Args:
        seed: the sampling seed (``solver.sampling.gaussian_sampling.seed``).
        dim: number of parameters.
        table: the noise table for cached sampling, ``None`` for uncached sampling.
    """

    def __init__(self, seed: int, dim: int, table: NoiseTable | None = None):
        if table is not None and table.size < dim:
            raise ValueError(f"solver.sampling.gaussian_sampling.cache_size ({table.size}) must be at least "
                             f"the number of parameters ({dim})")
        self.seed = seed
        self.dim = dim
        self.table = table

    def draw(self, rng: np.random.Generator, count: int) -> list[SamplingInfo]:
        """``count`` new infos with sign +1 and parent 0."""
        if self.table is not None:
            offsets = rng.integers(0, self.table.size - self.dim + 1, size=count)
            return [SamplingInfo(self.seed, int(o), 1) for o in offsets]
        seeds = rng.integers(0, 2**31 - 1, size=count)
        return [SamplingInfo(int(s), 0, 1) for s in seeds]

    def get(self, info: SamplingInfo) -> np.ndarray:
        """The unsigned standard normal vector of ``info`` (float32, read-only for table slices)."""
        if self.table is not None:
            return self.table.values[info.offset:info.offset + self.dim]
        return np.random.default_rng(info.seed).standard_normal(self.dim, dtype=np.float32)


class StreamNoise(NoiseSource):
    """Noise taken in order from one float64 stream, numpy's legacy ``RandomState(seed).randn``: the
    k-th candidate drawn gets the stream's k-th block of ``dim`` values.

    pycma samples this way (``np.random.seed(seed)``, then ``randn(lam, n)`` each generation), so a
    solver given this source sees pycma's draws for the same seed, draw for draw: a comparison of
    two implementations of one algorithm rather than of two samples of its randomness. For a solver
    used on its own, in one process: only the latest draw is kept, and the stream's position is not
    part of a checkpoint.
    """

    def __init__(self, seed: int, dim: int):
        super().__init__(seed, dim)
        self._stream = np.random.RandomState(seed)
        self._drawn = 0
        self._latest: dict[int, np.ndarray] = {}

    def draw(self, rng: np.random.Generator, count: int) -> list[SamplingInfo]:
        """The next ``count`` blocks of the stream (``rng`` is not used)."""
        offsets = range(self._drawn * self.dim, (self._drawn + count) * self.dim, self.dim)
        self._latest = dict(zip(offsets, self._stream.randn(count, self.dim), strict=True))
        self._drawn += count
        return [SamplingInfo(self.seed, offset, 1) for offset in offsets]

    def get(self, info: SamplingInfo) -> np.ndarray:
        """The float64 block at ``info.offset``, which must belong to the latest draw."""
        try:
            return self._latest[info.offset]
        except KeyError:
            raise ValueError(f"StreamNoise keeps its latest draw only: offset {info.offset} is not in it") from None
