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


# A child that takes its processor description from argv[1] (parl_lite.mkl reads /proc/cpuinfo by
# default): what importing parl_lite does to os.environ, and what importing its Model does.
ENVIRON_AFTER_IMPORTS = """
import os, sys
import parl_lite.mkl
parl_lite.mkl._CPUINFO = sys.argv[1]
before = dict(os.environ)
import parl_lite, parl_lite.remote.api, evokit_py
from parl_lite import train
train.Reporter, train.RunSummary, parl_lite.remote_class
print(dict(os.environ) == before)
parl_lite.Model
print(os.environ.get("MKL_DEBUG_CPU_TYPE"))
"""


def _environ_after_imports(cpuinfo_path: str) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key != "MKL_DEBUG_CPU_TYPE"}
    done = subprocess.run([sys.executable, "-c", ENVIRON_AFTER_IMPORTS, cpuinfo_path], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.timeout(60)
def test_importing_parl_lite_leaves_the_environment_and_its_model_sets_it(tmp_path):
    unchanged, setting = _environ_after_imports(cpuinfo(tmp_path, AMD_AVX2))
    assert unchanged == "True"  # a program that only runs actors passes its children what it was given
    assert setting == "5"       # paddle code runs with MKL's AVX2 code


@pytest.mark.timeout(60)
def test_importing_the_model_applies_it_to_this_machine():
    unchanged, setting = _environ_after_imports("/proc/cpuinfo")
    assert unchanged == "True"
    assert setting == ("5" if prefer_avx2_on_amd({}) else "None")
