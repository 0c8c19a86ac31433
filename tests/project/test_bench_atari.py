"""scripts/bench/bench_atari.py runs: parl_lite's IMPALA and DQN on Pong for a few seconds, the peers
skipped with the reason (the figures' schema is checked, so that the bench does not rot)."""
import glob
import json
import subprocess
import sys

import pytest
from remote_helpers import processes_with
from locations import BENCH

pytest.importorskip("ale_py")

FIGURES = {"frames_per_s", "frames_per_cpu_s", "cores_used", "wall_s", "cpu_s", "frames", "cpu_s_by_process",
           "versions"}


def assert_measured(figures: dict) -> None:
    assert set(figures) == FIGURES, figures
    assert figures["frames"] > 0 and figures["frames_per_s"] > 0 and figures["frames_per_cpu_s"] > 0
    assert figures["wall_s"] >= 2 and figures["cpu_s"] > 0
    assert figures["cpu_s_by_process"]["learner"] > 0
    assert set(figures["versions"]) == {"parl_lite", "paddle"}


@pytest.mark.timeout(900)
def test_bench_atari_measures_parl_lite_and_says_why_each_peer_is_skipped():
    segments_before = set(glob.glob("/dev/shm/parl_lite_*"))
    result = subprocess.run([sys.executable, str(BENCH / "bench_atari.py"), "--seconds", "2", "--warmup", "1", "--actors", "2",
                             "--dqn-learning-starts", "64", "--dqn-paddle-target", "--rounds", "2",
                             "--sb3-python", "/bin/false"],
                            capture_output=True, text=True, timeout=880)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    figures = json.loads(lines[0])
    assert figures["env"] == "PongNoFrameskip-v4" and figures["frame_skip"] == 4
    assert figures["settings"]["num_envs"] > 0 and figures["settings"]["unroll"] > 0
    row = figures["impala"]["2_actors"]
    assert_measured(row["parl_lite"])
    assert "parl_lite.remote.zygote" in row["parl_lite"]["cpu_s_by_process"]  # the actors' CPU is counted
    assert row["parl"] == {"skipped": "no --parl-python given"}
    assert row["rllib"] == {"skipped": "no --rllib-python given"}
    assert row["fps_vs_parl"] is None and row["fps_vs_rllib"] is None
    first, second = figures["dqn"]["rounds"]  # --rounds 2: parl_lite first, then SB3 first
    for row in (first, second):
        assert_measured(row["parl_lite"])
        assert_measured(row["parl_lite_target_in_paddle"])
        assert row["sb3"]["skipped"].startswith("sb3 failed (exit 1)")
        assert row["frames_per_cpu_s_vs_sb3"] is None and row["target_in_onnxruntime_vs_paddle"] > 0
    assert "frames_per_cpu_s_vs_sb3" not in figures["dqn"]  # nothing to average: SB3 never ran
    assert figures["dqn"]["target_in_onnxruntime_vs_paddle"]["interval_95"] >= 0
    assert figures["bench_seconds"] > 0
    assert processes_with(str(BENCH / "bench_atari.py"), "--driver") == []
    assert set(glob.glob("/dev/shm/parl_lite_*")) <= segments_before  # the IMPALA driver's pool cleaned up


def test_bench_atari_names_the_missing_examples_folder_of_parl():
    result = subprocess.run([sys.executable, str(BENCH / "bench_atari.py"), "--parl-python", sys.executable], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "--parl-examples" in result.stderr
