"""Intel MKL's fast code paths on AMD processors.

paddle's CPU wheels do their matrix products in Intel MKL, and the MKL they ship picks its generic
SSE code on any processor that is not Intel's, however capable: a ``[256, 64] x [64, 64]`` product
takes 48 µs on the AMD EPYC machines this project is developed on, 18 µs with MKL's AVX2 code
(torch's oneDNN: 22 µs). That MKL release still honours ``MKL_DEBUG_CPU_TYPE=5``, which selects the
AVX2 code; MKL reads it on its first product, so setting it when ``parl_lite.Model`` is imported
(every network of parl_lite is one, so before any of them runs) is enough. Not at ``import
parl_lite``: a program that only runs actors leaves its environment, and its children's, as it found
it. A program that imports the Model keeps the variable for the processes it starts afterwards
(workers that run paddle get the same code). See ``docs/algorithms.md`` ("Speed").
"""
import os
from collections.abc import MutableMapping

__all__ = ["prefer_avx2_on_amd"]

_CPUINFO = "/proc/cpuinfo"


def prefer_avx2_on_amd(environ: MutableMapping[str, str] = os.environ, cpuinfo: str | None = None) -> bool:
    """Set ``MKL_DEBUG_CPU_TYPE=5`` when the processor is AMD's and has AVX2.

    Nothing changes when the variable is already set (the user's choice wins), on Intel
    processors (MKL picks their best code itself), on AMD processors without AVX2 (the AVX2 code
    would fault) or where ``/proc/cpuinfo`` cannot be read.

    Args:
        environ: the environment to set it in.
        cpuinfo: the processor's description (default: ``/proc/cpuinfo``).

    Returns:
        Whether the variable was set.
    """
    if "MKL_DEBUG_CPU_TYPE" in environ:
        return False
    vendor, flags = "", set()
    try:
        with open(cpuinfo or _CPUINFO, encoding="ascii", errors="replace") as lines:
            for line in lines:  # the first processor's entry is enough
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    vendor = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        return False
    if vendor != "AuthenticAMD" or "avx2" not in flags:
        return False
    environ["MKL_DEBUG_CPU_TYPE"] = "5"
    return True
