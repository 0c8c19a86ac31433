"""parl_lite.mkl: MKL's AVX2 code on AMD processors, chosen from the processor's own description."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parl_lite.mkl import prefer_avx2_on_amd

AMD_AVX2 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\n"
AMD_NO_AVX2 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx\n"
INTEL = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 avx avx2 avx512f\n"


def cpuinfo(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return str(path)


def test_amd_with_avx2_gets_the_avx2_code(tmp_path):
    environ: dict[str, str] = {}
    assert prefer_avx2_on_amd(environ, cpuinfo(tmp_path, AMD_AVX2))
    assert environ == {"MKL_DEBUG_CPU_TYPE": "5"}


@pytest.mark.parametrize("text", [INTEL, AMD_NO_AVX2, ""], ids=["intel", "amd-without-avx2", "empty"])
def test_other_processors_are_left_to_mkl(tmp_path, text):
    environ: dict[str, str] = {}
    assert not prefer_avx2_on_amd(environ, cpuinfo(tmp_path, text))
    assert environ == {}


def test_the_users_setting_wins(tmp_path):
    environ = {"MKL_DEBUG_CPU_TYPE": ""}
    assert not prefer_avx2_on_amd(environ, cpuinfo(tmp_path, AMD_AVX2))
    assert environ == {"MKL_DEBUG_CPU_TYPE": ""}


def test_unreadable_cpuinfo_changes_nothing(tmp_path):
    environ: dict[str, str] = {}
    assert not prefer_avx2_on_amd(environ, str(tmp_path / "missing"))
    assert environ == {}


@pytest.mark.timeout(60)
def test_importing_parl_lite_applies_it_to_this_machine():
    env = {key: value for key, value in os.environ.items() if key != "MKL_DEBUG_CPU_TYPE"}
    done = subprocess.run([sys.executable, "-c", "import os, parl_lite; print(os.environ.get('MKL_DEBUG_CPU_TYPE'))"],
                          env=env, capture_output=True, text=True, check=True, timeout=60)
    expected = "5" if prefer_avx2_on_amd({}) else "None"
    assert done.stdout.strip() == expected
