"""The shared noise table: one owner creates and unlinks it; attached readers never destroy it."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evokit_py.noise import NoiseSource, NoiseTable, SamplingInfo

SHM = Path("/dev/shm")
READER = """
import sys
from evokit_py.noise import NoiseTable
table = NoiseTable.attach(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
print(float(table.values[:100].sum()))
table.close()
"""


def _exists(table):
    return (SHM / table.name.lstrip("/")).exists()


def test_table_is_reproducible_from_its_seed():
    with NoiseTable.create(3, 1000) as a, NoiseTable.create(3, 1000) as b, NoiseTable.create(4, 1000) as c:
        assert np.array_equal(a.values, b.values) and not np.array_equal(a.values, c.values)
        assert a.values.dtype == np.float32 and abs(float(a.values.std()) - 1) < 0.1


@pytest.mark.timeout(60)
@pytest.mark.skipif(not SHM.is_dir(), reason="needs /dev/shm to observe segments")
def test_readers_in_other_processes_do_not_unlink_and_owner_leaves_nothing():
    table = NoiseTable.create(11, 10_000)
    try:
        assert _exists(table)
        expected = float(table.values[:100].sum())
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        for _ in range(2):  # the second reader finds the table the first one left behind
            out = subprocess.run([sys.executable, "-c", READER, table.name, "11", "10000"], env=env,
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            assert float(out.stdout) == pytest.approx(expected)
            assert "leaked" not in out.stderr and "resource_tracker" not in out.stderr
            assert _exists(table)  # the reader's exit did not unlink it
        attached = NoiseTable.attach(table.name, 11, 10_000)
        with pytest.raises(RuntimeError, match="only its creator unlinks"):
            attached.unlink()
        attached.close()
    finally:
        table.unlink()
    assert not _exists(table)  # the owner leaves nothing in /dev/shm


def test_noise_source_cached_and_uncached():
    with NoiseTable.create(5, 500) as table:
        source = NoiseSource(5, 10, table)
        infos = source.draw(np.random.default_rng(0), 20)
        assert all(0 <= i.offset <= 490 and i.seed == 5 and i.sign == 1 for i in infos)
        assert np.array_equal(source.get(infos[0]), table.values[infos[0].offset:infos[0].offset + 10])
        with pytest.raises(ValueError, match="cache_size"):
            NoiseSource(5, 501, table)
    uncached = NoiseSource(5, 10)
    info = uncached.draw(np.random.default_rng(0), 1)[0]
    assert np.array_equal(uncached.get(info), uncached.get(SamplingInfo(info.seed, 0, -1)))
    assert SamplingInfo.from_list(info.to_list()) == info


def test_unlink_works_while_a_slice_is_still_held():
    table = NoiseTable.create(2, 100)
    held = table.values[:10]
    table.unlink()
    assert not _exists(table) and held.shape == (10,)
