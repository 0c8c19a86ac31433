"""What writing HDF5 through parl_lite's failure-holding file object costs, against h5py writing the
file itself (its default sec2 driver, as parl_lite did before), side by side in one run.

    python scripts/bench/bench_hdf5_write.py
    python scripts/bench/bench_hdf5_write.py --runs 80

Prints ONE JSON line: per case, the minimum and median wall milliseconds of each way, and the
median ratio held / sec2. The cases: a checkpoint of 40 datasets of 100 KB, and a replay memory of
1M transitions of a 17-dimensional observation (168 MB). The two ways alternate run by run, so that
a change of load hits both; the file is written to the system's temporary folder and removed after
each run; no fsync (the same for both, and it would dominate).
"""
import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import h5py
import numpy as np

from parl_lite.common.atomic import _FailureHoldingFile


def _cases() -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    observations = rng.standard_normal((1_000_000, 17)).astype(np.float32)
    return {"checkpoint_40x100KB": {f"layer{i}": rng.standard_normal(25_000).astype(np.float32) for i in range(40)},
            "replay_memory_168MB": {"obs": observations, "next_obs": observations,
                                    "action": np.ones((1_000_000, 6), np.float32)}}


def _sec2(path: str, write: Callable[[h5py.File], None]) -> None:
    with h5py.File(path, "w") as file:
        write(file)


def _held(path: str, write: Callable[[h5py.File], None]) -> None:
    with open(path, "xb+") as handle, _FailureHoldingFile(handle) as sink:
        with h5py.File(sink, "w") as file:
            write(file)


def _measure(arrays: dict[str, np.ndarray], runs: int, folder: str) -> dict[str, list[float]]:
    def write(file: h5py.File) -> None:
        for key, value in arrays.items():
            file.create_dataset(key, data=value)

    times: dict[str, list[float]] = {"sec2": [], "held": []}
    ways = {"sec2": _sec2, "held": _held}
    for index in range(runs):
        for way, run in ways.items():
            path = os.path.join(folder, f"{way}{index}.h5")
            started = time.perf_counter()
            run(path, write)
            times[way].append(time.perf_counter() - started)
            os.unlink(path)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs of each way for the checkpoint (a quarter "
                                                              "of them for the replay memory)")
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for case, arrays in _cases().items():
            runs = args.runs if case.startswith("checkpoint") else max(2, args.runs // 4)
            times = _measure(arrays, runs, folder)
            for way, values in times.items():
                figures[f"{case}_{way}_min_ms"] = round(min(values) * 1000, 1)
                figures[f"{case}_{way}_median_ms"] = round(statistics.median(values) * 1000, 1)
            figures[f"{case}_held_over_sec2"] = round(statistics.median(times["held"]) /
                                                      statistics.median(times["sec2"]), 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
