"""scripts/bench/bench_pong.py runs: parl_lite's IMPALA on Pong for a few seconds of its wall-clock
budget with a last evaluation at its end, SB3 skipped with the reason (the figures' schema is
checked, so that the bench does not rot)."""
import glob
import json
import subprocess
import sys

import pytest
from remote_helpers import processes_with
from locations import BENCH

pytest.importorskip("ale_py")

FIGURES = {"steps", "frames", "wall_s", "cpu_s", "curve", "final_return", "solved_at_steps", "solved_at_s", "updates",
           "versions"}


@pytest.mark.timeout(600)
def test_bench_pong_stops_ours_at_its_budget_with_a_last_evaluation_and_says_why_sb3_is_skipped():
    segments_before = set(glob.glob("/dev/shm/parl_lite_*"))
    result = subprocess.run([sys.executable, str(BENCH / "bench_pong.py"), "--minutes", "0.05",
                             "--eval-every", "10000000", "--eval-episodes", "1", "--sb3-python", "/bin/false"],
                            capture_output=True, text=True, timeout=580)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    figures = json.loads(lines[0])
    assert figures["env"] == "PongNoFrameskip-v4" and figures["frame_skip"] == 4
    ours = figures["parl_lite"]
    assert set(ours) == FIGURES, ours
    assert ours["steps"] > 0 and ours["frames"] == 4 * ours["steps"] and ours["updates"] > 0
    assert ours["wall_s"] >= 3 and ours["cpu_s"] > 0
    (steps, wall_s, cpu_s, score), = ours["curve"]  # no evaluation mark was reached: the budget's last one alone
    assert steps == ours["steps"] and wall_s >= 3 and cpu_s > 0 and -21 <= score <= 21
    assert ours["final_return"] == score and ours["solved_at_steps"] is None and ours["solved_at_s"] is None
    assert figures["sb3"]["skipped"].startswith("sb3 failed (exit 1)")
    assert figures["reached_target_within_budget"] is False
    assert "parl_lite: " in result.stderr  # the evaluations are reported as they come
    assert processes_with(str(BENCH / "bench_pong.py"), "--driver") == []
    assert set(glob.glob("/dev/shm/parl_lite_*")) <= segments_before


def test_bench_pong_rejects_a_budget_that_is_not_positive():
    result = subprocess.run([sys.executable, str(BENCH / "bench_pong.py"), "--minutes", "0"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "--minutes" in result.stderr
