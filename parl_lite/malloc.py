"""glibc's malloc keeps the large blocks paddle frees, rather than giving them back to the kernel.

paddle's CPU allocator takes every tensor from ``malloc`` and frees it when the tensor dies. glibc
serves a block above ``M_MMAP_THRESHOLD`` with its own ``mmap`` and unmaps it on ``free``, and gives
the free memory at the top of its heap back once more than ``M_TRIM_THRESHOLD`` of it is free. Both
start at 128 KiB and rise only a little as blocks are freed, so an update of the Nature DQN, which
frees megabytes of feature maps and gradients at once, hands its memory back on every step, and
the next step faults every page of it in again: about 1,600 page faults per DQN update, and a
``[3136, 512]`` weight gradient took 5.4 ms instead of 1.3 ms. Raising both
thresholds (to 32 MiB, the largest ``mallopt`` takes for ``mmap``, and 128 MiB) keeps the blocks
for the next step. Set when ``parl_lite.Model`` is imported, like :mod:`parl_lite.mkl`; a user's
own ``MALLOC_*_`` or ``glibc.malloc`` tunables win, and other C libraries are left alone.
"""
import ctypes
import os
from collections.abc import Mapping

__all__ = ["keep_freed_memory"]

# mallopt's parameter numbers, from glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 1024 * 1024
_TRIM_THRESHOLD = 128 * 1024 * 1024

_USERS_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def keep_freed_memory(environ: Mapping[str, str] = os.environ) -> bool:
    """Raise glibc's mmap and trim thresholds of this process (see the module's docstring).

    Nothing changes when the C library is not glibc, or when the user tuned glibc's malloc through
    its environment variables (``MALLOC_MMAP_THRESHOLD_`` and the like, or ``glibc.malloc`` in
    ``GLIBC_TUNABLES``).

    Args:
        environ: the environment the process was started with.

    Returns:
        Whether both thresholds were set.
    """
    if any(name in environ for name in _USERS_SETTINGS) or "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return False
    if "CS_GNU_LIBC_VERSION" not in os.confstr_names or not os.confstr("CS_GNU_LIBC_VERSION"):
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mmap_set = mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    trim_set = mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    return bool(mmap_set and trim_set)
