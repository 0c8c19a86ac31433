"""Resident memory of Atari replay memories: each frame kept once, against whole transitions.

    python scripts/bench/bench_replay_memory.py [--transitions 1000000] [--baseline-transitions 50000]

Fills, in a child process each (so that one's pages do not count for the other), with Pong-shaped
transitions (84×84 frames in stacks of 4, episodes of 1,000 steps, every frame a new random one):
- ``FrameReplayMemory`` (parl_lite's, for image observations) with ``--transitions``;
- the plain baseline, ``ReplayMemory`` with uint8 observations (``obs`` and ``next_obs`` whole, as
  PARL's and SB3's default buffers keep them), with ``--baseline-transitions`` (a million of them
  would take 56 GB).
Each child reports its resident set (``VmRSS``) after filling, less the one before it allocated, and
the CPU time per ``append`` and per ``sample_batch(32)``. Prints one JSON line: per memory the bytes
per transition, the GB a million would take, and the timings.
"""
import argparse
import json
import subprocess
import sys
import time

import numpy as np

EPISODE = 1_000
SHAPE = (84, 84)
STACK = 4


def resident_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def fill(kind: str, transitions: int) -> dict:
    """Fill one memory of ``kind`` in this process and measure it."""
    from parl_lite.utils.frame_replay import FrameReplayMemory
    from parl_lite.utils.replay_memory import ReplayMemory

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (64, *SHAPE), dtype=np.uint8)  # cycled: the content does not matter
    before = resident_bytes()
    if kind == "frames":
        memory = FrameReplayMemory(transitions, SHAPE, STACK, seed=0)
    else:
        memory = ReplayMemory(transitions, (STACK, *SHAPE), 0, obs_dtype=np.uint8, seed=0)
    stack = np.zeros((STACK, *SHAPE), np.uint8)
    started = time.process_time()
    for step in range(transitions):
        if step % EPISODE == 0:
            stack = np.zeros((STACK, *SHAPE), np.uint8)
            stack[-1] = frames[step % 64]
        following = np.concatenate([stack[1:], frames[(step + 1) % 64][None]])
        memory.append(stack, step % 6, 0.0, following, step % EPISODE == EPISODE - 1)
        stack = following
    append_us = (time.process_time() - started) / transitions * 1e6
    filled = resident_bytes() - before
    started = time.process_time()
    for _ in range(200):
        memory.sample_batch(32)
    sample_us = (time.process_time() - started) / 200 * 1e6
    return {"transitions": transitions, "resident_gb": round(filled / 1e9, 3),
            "bytes_per_transition": round(filled / transitions), "gb_per_million": round(filled / transitions * 1e6 / 1e9, 2),
            "append_cpu_us": round(append_us, 1), "sample_batch_32_cpu_us": round(sample_us, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument("--baseline-transitions", type=int, default=50_000)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(fill(args.child[0], int(args.child[1]))))
        return
    results = {}
    for kind, count in (("frames", args.transitions), ("whole_transitions", args.baseline_transitions)):
        output = subprocess.run([sys.executable, __file__, "--child", kind, str(count)], capture_output=True,
                                text=True, check=True).stdout
        results[kind] = json.loads(output.strip().splitlines()[-1])
    results["ratio_whole_to_frames"] = round(results["whole_transitions"]["bytes_per_transition"]
                                             / results["frames"]["bytes_per_transition"], 2)
    print(json.dumps({"bench": "replay_memory", **results}))


if __name__ == "__main__":
    main()
