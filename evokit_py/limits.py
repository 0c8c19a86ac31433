"""What an ES run may ask of the machines it runs on, checked before anything is allocated or
started: each refusal names the config key, what the value needs and the limit.

- The noise table (``solver.sampling.gaussian_sampling.cache_size``, 4 bytes a value) lives in
  ``/dev/shm``: it must fit in the space free there (a tmpfs: writing past it kills the writer with
  SIGBUS), in the memory available and within the process's file size limit (``ulimit -f``, which
  applies to ``/dev/shm`` too). This user's segments that dead processes left (a run killed
  while it built its table) are swept first, so that they do not count against the next run.
- The workers (``train.workers``), against what the backend says of itself
  (:meth:`parl_lite.remote.backend.Backend.capacity`): on this machine (the local pool,
  ``ray://local``), at most ``WORKERS_PER_CPU`` per CPU this process may use, since a sampling worker
  keeps a CPU busy and more of them only cost memory and switching (``train.oversubscribe: true``
  lifts that), and never more than the available memory holds at ``MEMORY_PER_WORKER`` each. On a
  backend that places one actor per CPU (a parl_lite cluster), at most its CPUs: a worker beyond them
  would wait for a CPU that never comes free.
- A generation (``solver.population_size``): its candidates' bookkeeping in the trainer's memory.
"""
import os

from evokit_py.schema import ConfigError
from parl_lite.common.space import file_size_limit
from parl_lite.remote.backend import Capacity
from parl_lite.remote.shm import SHM_DIR
from parl_lite.remote.status import find_pools

__all__ = ["WORKERS_PER_CPU", "MEMORY_PER_WORKER", "check_noise_table", "check_workers",
           "check_population"]

WORKERS_PER_CPU = 4
MEMORY_PER_WORKER = 32 * 2**20  # a CartPole sampling worker's own memory (31.5 MB measured); larger envs take more
_BYTES_PER_CANDIDATE = 1024  # sampling info, seeds and result of one candidate, in the trainer's memory
_NOISE_KEY = "solver.sampling.gaussian_sampling.cache_size"


def check_noise_table(size: int) -> None:
    """Refuse a noise table of ``size`` float32 values that cannot fit (see the module docstring).

    Raises:
        ConfigError: naming ``solver.sampling.gaussian_sampling.cache_size``.
    """
    find_pools()  # sweeps what dead processes of this user left in /dev/shm
    needed = 4 * size
    shm = os.statvfs(SHM_DIR)
    free = shm.f_bavail * shm.f_frsize
    if needed > free:
        raise ConfigError(f"{_NOISE_KEY}: {size} values need {_size(needed)} of shared memory, {SHM_DIR} has "
                          f"{_size(free)} free; lower {_NOISE_KEY}")
    limit = file_size_limit()
    if limit is not None and needed > limit:
        raise ConfigError(f"{_NOISE_KEY}: {size} values need a file of {_size(needed)} in {SHM_DIR}, beyond the "
                          f"file size limit of this process (ulimit -f: {limit:,} bytes); lower {_NOISE_KEY} or "
                          f"raise the limit")
    available = _available_memory()
    if needed > available:
        raise ConfigError(f"{_NOISE_KEY}: {size} values need {_size(needed)} of shared memory, this machine "
                          f"has {_size(available)} of memory available; lower {_NOISE_KEY}")


def check_workers(workers: int, capacity: Capacity, oversubscribe: bool) -> None:
    """Refuse more sampling workers than the backend of ``capacity`` runs usefully: on this machine,
    more than :data:`WORKERS_PER_CPU` per CPU (unless ``oversubscribe``) or more than its memory
    holds; on a backend that places one actor per CPU, more than its CPUs.

    Raises:
        ConfigError: naming ``train.workers``.
    """
    cpus = capacity.cpus
    if capacity.on_this_machine:
        if workers > WORKERS_PER_CPU * cpus and not oversubscribe:
            raise ConfigError(f"train.workers: {workers} workers for the {cpus} CPU(s) of {capacity.description}, "
                              f"more than {WORKERS_PER_CPU} per CPU ({WORKERS_PER_CPU * cpus}): a sampling worker "
                              f"keeps a CPU busy, more of them only cost memory; lower train.workers, or set "
                              f"train.oversubscribe: true")
        needed, available = workers * MEMORY_PER_WORKER, _available_memory()
        if needed > available:
            raise ConfigError(f"train.workers: {workers} worker processes need at least {_size(needed)} "
                              f"({MEMORY_PER_WORKER >> 20} MiB each), this machine has {_size(available)} of memory "
                              f"available; lower train.workers")
    if capacity.one_actor_per_cpu and workers > cpus:
        hint = f", or {capacity.grow_hint}" if capacity.grow_hint else ""
        raise ConfigError(f"train.workers: {workers} workers, {capacity.description} has {cpus} CPU(s) and places "
                          f"one worker per CPU; lower train.workers{hint}")


def check_population(population: int) -> None:
    """Refuse a generation whose candidates do not fit in this machine's memory.

    Raises:
        ConfigError: naming ``solver.population_size``.
    """
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if population * _BYTES_PER_CANDIDATE > memory:
        raise ConfigError(f"solver.population_size: a generation of {population} candidates needs about "
                          f"{population * _BYTES_PER_CANDIDATE / 2**30:.0f} GiB, this machine has "
                          f"{memory / 2**30:.0f} GiB")


def _available_memory() -> int:
    """Bytes of memory this machine can give without swapping (``MemAvailable``; all of it where
    the kernel does not say)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _size(size: int) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"
