"""scripts/bench/bench_mujoco_rl.py --pairs: the line over the seeds of pairs from several runs (more
seeds measured on another day), with a seed given twice and an unreadable file named."""
import json
import subprocess
import sys

import pytest
from locations import BENCH

SCRIPT = str(BENCH / "bench_mujoco_rl.py")


def _pair(seed: int, ours: float, sb3: float, cpu: tuple[float, float] = (15.0, 17.0)) -> str:
    return json.dumps({"bench": "mujoco_rl", "algo": "sac", "task": "Hopper-v5", "seed": seed, "steps": 50000,
                       "parl_lite": {"curve": [[10000, 1.0], [50000, ours]], "cpu_s_per_1k": cpu[0], "peak_rss_mb": 1},
                       "sb3": {"curve": [[10000, 1.0], [50000, sb3]], "cpu_s_per_1k": cpu[1], "peak_rss_mb": 1}})


def _run(*paths) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, "--pairs", *map(str, paths)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.timeout(120)
def test_pairs_of_two_runs_give_one_line_over_all_their_seeds(tmp_path):
    first, second = tmp_path / "seeds_1-2.jsonl", tmp_path / "seed_3.jsonl"
    summary_of_first = {"bench": "mujoco_rl_summary", "algo": "sac", "task": "Hopper-v5", "seeds": [1, 2]}
    first.write_text("\n".join([_pair(1, 300.0, 500.0), _pair(2, 400.0, 400.0), json.dumps(summary_of_first)]))
    second.write_text("a progress line\n" + _pair(3, 500.0, 300.0, (14.0, 16.0)) + "\n")
    result = _run(first, second)
    assert result.returncode == 0, result.stderr
    [line] = result.stdout.strip().splitlines()
    summary = json.loads(line)
    assert summary["seeds"] == [1, 2, 3] and summary["parl_lite_mean"] == 400.0 and summary["sb3_mean"] == 400.0
    # SB3's finals 500, 400, 300: standard error 100 / sqrt(3), t(2) = 4.30
    assert summary["sb3_interval_95"] == [151.7, 648.3] and summary["ours_within_or_above_sb3_interval"] is True
    assert summary["paired_difference"] == 0.0 and summary["paired_difference_95"] == 496.5
    assert summary["cpu_ratio_ours_to_sb3"] == round(44 / 50, 3)


@pytest.mark.timeout(120)
def test_a_seed_given_twice_or_an_unreadable_file_is_named_and_nothing_is_printed(tmp_path):
    run = tmp_path / "run.jsonl"
    run.write_text(_pair(1, 300.0, 500.0) + "\n")
    twice = _run(run, run)
    assert twice.returncode != 0 and twice.stdout == ""
    assert f"{run} line 1: sac Hopper-v5 seed 1 is given twice" in twice.stderr
    missing = _run(tmp_path / "missing.jsonl")
    assert missing.returncode != 0 and "cannot read" in missing.stderr and "missing.jsonl" in missing.stderr
    assert "Traceback" not in twice.stderr + missing.stderr
