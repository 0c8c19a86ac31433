"""parl_lite.malloc: glibc keeps the blocks paddle frees, seen as the page faults a training step costs."""
import os
import subprocess
import sys

import pytest

from parl_lite.malloc import keep_freed_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")

ROUNDS = 10
PAGES_PER_ROUND = 3 * 3136 * 512 * 4 // 4096  # three float32 [3136, 512] tensors: a DQN layer's weight gradients

# A child that allocates and frees what one step of a network would, and prints the page faults of
# ROUNDS steps after it settled; argv[1] says whether it imports parl_lite's Model first.
FAULTS_PER_STEP = f"""
import resource, sys
import paddle
if sys.argv[1] == "model":
    import parl_lite
    parl_lite.Model

def step():
    tensors = [paddle.ones([3136, 512]) for _ in range(3)]
    del tensors

for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({ROUNDS}):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _page_faults(imports: str, **environ: str) -> int:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("MALLOC_") and key != "GLIBC_TUNABLES"} | environ
    done = subprocess.run([sys.executable, "-c", FAULTS_PER_STEP, imports], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.timeout(240)
def test_importing_the_model_stops_the_page_faults_of_every_step():
    assert _page_faults("paddle") > ROUNDS * PAGES_PER_ROUND // 2  # glibc's own thresholds: every step faults
    assert _page_faults("model") < PAGES_PER_ROUND                 # the blocks are kept


@pytest.mark.timeout(120)
def test_the_users_malloc_setting_wins():
    assert _page_faults("model", MALLOC_TRIM_THRESHOLD_="131072") > ROUNDS * PAGES_PER_ROUND // 2


@pytest.mark.parametrize("environ", [{"MALLOC_MMAP_THRESHOLD_": "65536"}, {"MALLOC_TOP_PAD_": "0"},
                                     {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}])
def test_any_malloc_tuning_of_the_user_leaves_the_process_as_it_is(environ):
    assert not keep_freed_memory(environ)


def test_on_glibc_both_thresholds_are_set():
    assert keep_freed_memory({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"}) == bool(os.confstr("CS_GNU_LIBC_VERSION"))
