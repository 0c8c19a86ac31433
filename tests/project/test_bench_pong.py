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


@pytest.mark.parametrize("option", ["--minutes", "--sb3-threads"])
def test_bench_pong_rejects_a_setting_that_is_not_positive(option):
    result = subprocess.run([sys.executable, str(BENCH / "bench_pong.py"), option, "0"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and option in result.stderr


def _earlier_line(path, steps, **settings):
    """A bench_pong.py line whose parl_lite run took ``steps`` agent steps."""
    line = {"settings": {"minutes": 1.0, "target": 18.0, "eval_every": 1024, "eval_episodes": 1, "actors": 2,
                         "seed": 1, "steps": 0, **settings},
            "parl_lite": {"steps": steps, "frames": 4 * steps, "wall_s": 60.0, "cpu_s": 100.0,
                          "curve": [[1024, 30.0, 50.0, -21.0], [steps, 60.0, 100.0, -20.0]], "final_return": -20.0,
                          "solved_at_steps": None, "solved_at_s": None}}
    path.write_text("progress lines are not JSON\n" + json.dumps(line) + "\n")
    return path


def _bench(*args, timeout=60):
    return subprocess.run([sys.executable, str(BENCH / "bench_pong.py"), "--eval-every", "1024", "--eval-episodes", "1",
                           *map(str, args)], capture_output=True, text=True, timeout=timeout)


def test_bench_pong_names_an_earlier_run_it_cannot_take(tmp_path):
    missing = _bench("--ours-from", tmp_path / "none.json")
    assert missing.returncode == 1 and "--ours-from" in missing.stderr and "none.json" in missing.stderr
    other = _bench("--ours-from", _earlier_line(tmp_path / "pong.json", 2048, eval_every=250_000))
    assert other.returncode == 1 and "eval_every 250000 there, 1024 here" in other.stderr
    alone = _bench("--sb3-hours", 1)
    assert alone.returncode == 2 and "--sb3-state" in alone.stderr


@pytest.mark.timeout(900)
def test_bench_pong_runs_sb3_in_parts_that_add_up(tmp_path):
    """SB3's side, stopped by --sb3-hours and saved, goes on from its folder to parl_lite's steps."""
    pytest.importorskip("stable_baselines3")
    earlier = _earlier_line(tmp_path / "pong.json", 2048)
    state = tmp_path / "sb3"
    first = _bench("--ours-from", earlier, "--sb3-python", sys.executable, "--sb3-state", state, "--sb3-hours", 0.0001,
                   timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    part = json.loads(first.stdout.strip().splitlines()[-1])
    assert part["parl_lite"]["from"] == str(earlier) and part["parl_lite"]["steps"] == 2048
    assert part["sb3"]["finished"] is False and 0 < part["sb3"]["steps"] < 2048
    assert part["sb3"]["resumed_from_steps"] is None and (state / "ppo.zip").is_file() and part["sb3"]["threads"] == 1
    second = _bench("--ours-from", earlier, "--sb3-python", sys.executable, "--sb3-state", state, "--sb3-threads", 2,
                    timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    whole = json.loads(second.stdout.strip().splitlines()[-1])
    sb3 = whole["sb3"]
    assert sb3["finished"] is True and sb3["steps"] >= 2048 and sb3["resumed_from_steps"] == part["sb3"]["steps"]
    assert sb3["threads"] == 2
    assert sb3["wall_s"] > part["sb3"]["wall_s"] and sb3["cpu_s"] > part["sb3"]["cpu_s"]
    assert [point[0] for point in sb3["curve"]][:1] == [1024] and sb3["curve"][-1][0] == sb3["steps"]
    assert whole["at_equal_steps"][0][:2] == [1024, -21.0]
    assert processes_with(str(BENCH / "bench_pong.py"), "--driver") == []
