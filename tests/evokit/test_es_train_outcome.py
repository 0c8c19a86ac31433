"""What es-train reports and leaves behind: CPU-seconds of every process, a resumed run's totals,
"solved" confirmed on fresh episodes, the last evaluation in the log lines, the rate over recent
generations."""
import json
import re

import numpy as np
import pytest

import parl_lite
from evokit_py.seeds import confirmation_seeds, evaluation_seeds
from evokit_py.train import train
from es_test_envs import seed_return
from es_helpers import run_config
from parl_lite.common.progress import Reporter


# this module's run settings, before each test's overrides
RUN = ("train.eval_episodes=1",)


BUSY_MS = 4.0  # CPU milliseconds every step of BusyCartPole burns


@pytest.mark.timeout(120)
def test_train_cpu_seconds_count_the_sampling_workers(tmp_path):
    """Two workers play every step at BUSY_MS of CPU: the run's CPU-seconds are at least that, while
    the trainer itself mostly waits (they counted only the trainer's: 0.12 s for a run whose workers
    used 47.6 CPU-s)."""
    config = run_config(tmp_path, *RUN, "env.id=es_test_envs:BusyCartPole-v0", f"env.kwargs={{busy_ms: {BUSY_MS}}}",
                     "env.max_steps=30", "solver.population_size=8", "train.generations=3", "train.workers=2")
    try:
        result = train(config, backend="remote", echo=lambda line: None)
    finally:
        parl_lite.shutdown()
    assert result.summary.train_cpu_seconds == result.cpu_seconds
    assert result.cpu_seconds >= result.steps * BUSY_MS / 1000


@pytest.mark.timeout(120)
def test_a_resumed_run_reports_the_whole_run_and_what_this_call_did(tmp_path):
    overrides = ["env.id=es_test_envs:BusyCartPole-v0", f"env.kwargs={{busy_ms: {BUSY_MS}}}", "env.max_steps=20",
                 "solver.population_size=4"]
    first = train(run_config(tmp_path, *RUN, *overrides, "train.generations=3"), backend="inprocess", echo=lambda line: None)
    lines: list[str] = []
    resumed = train(run_config(tmp_path, *RUN, *overrides, "train.generations=4"), resume=True, backend="inprocess",
                    echo=lines.append)
    assert resumed.steps > first.steps and resumed.train_seconds > first.train_seconds
    assert resumed.cpu_seconds >= first.cpu_seconds + (resumed.steps - first.steps) * BUSY_MS / 1000
    assert resumed.summary.train_cpu_seconds == resumed.cpu_seconds
    assert first.cpu_seconds >= first.steps * BUSY_MS / 1000
    final = lines[-1]
    assert re.search(rf"train {resumed.train_seconds:.2f}s, {resumed.cpu_seconds:.2f} CPU-s \(trainer and workers\) "
                     r"since generation 0, [\d.]+s of them after the resume at generation 3; this call [\d.]+s", final)


def _lucky_generation(config, target, count):
    """The first generation whose evaluation reaches ``target`` on SeedReturn-v0, and its confirmation's mean."""
    for generation in range(count):
        if seed_return(evaluation_seeds(config, generation)) >= target:
            return generation, seed_return(confirmation_seeds(config, generation))
    raise AssertionError("no lucky evaluation: pick another target")


@pytest.mark.timeout(60)
def test_solved_is_confirmed_on_fresh_episodes_before_training_stops(tmp_path):
    """An evaluation mean depends on its 5 episodes; one at the target is played again on 40 fresh
    episodes, and training stops only if those reach it too (it stopped at the first lucky
    evaluation, whose policy then fell short on fresh episodes)."""
    common = ["env.id=es_test_envs:SeedReturn-v0", "train.eval_episodes=5", "train.generations=30",
              "solver.population_size=4"]
    config = run_config(tmp_path, *RUN, *common, "train.target_return=0.7", "train.confirm_episodes=40")
    lucky, confirmation = _lucky_generation(config, 0.7, 30)
    assert confirmation < 0.7  # 40 episodes average near 0.5
    unconfirmed = train(run_config(tmp_path / "0", *RUN, *common, "train.target_return=0.7"), backend="inprocess",
                        echo=lambda line: None)
    assert unconfirmed.solved and unconfirmed.generations == lucky + 1  # the optimistic stop
    lines: list[str] = []
    result = train(config, backend="inprocess", echo=lines.append)
    assert not result.solved and result.generations == 30
    assert (f"es-train: the evaluation after generation {lucky + 1} reached the target 0.7; not confirmed: "
            f"{confirmation:.2f} on 40 fresh episodes, training goes on") in lines
    assert result.confirmed_return is not None and result.best_eval_return < 0.7

    easy = run_config(tmp_path / "easy", *RUN, *common, "train.target_return=0.3", "train.confirm_episodes=40")
    lucky, confirmation = _lucky_generation(easy, 0.3, 30)
    lines.clear()
    solved = train(easy, backend="inprocess", echo=lines.append)
    assert solved.solved and solved.generations == lucky + 1 and solved.confirmed_return == pytest.approx(confirmation)
    assert (f"es-train: the evaluation after generation {lucky + 1} reached the target 0.3; confirmed: "
            f"{confirmation:.2f} on 40 fresh episodes") in lines
    assert lines[-1].startswith(f"es-train solved (confirmed: {confirmation:.2f} on 40 fresh episodes): "
                                f"generation {lucky + 1}")
    assert solved.summary.solved and solved.best_eval_return == pytest.approx(confirmation)


@pytest.mark.timeout(60)
def test_the_summary_gives_the_last_evaluation_and_the_best_the_policy_is_of(tmp_path):
    """The JSON summary's eval_return is the last evaluation; best_eval_return, the one the last
    line gives and policy.onnx is of (it gave only the last, below the best of the line)."""
    config = run_config(tmp_path, *RUN, "env.id=es_test_envs:SeedReturn-v0", "train.eval_episodes=5", "train.generations=6",
                     "solver.population_size=4")
    evaluations = [seed_return(evaluation_seeds(config, generation)) for generation in range(6)]
    assert evaluations[-1] < max(evaluations)
    lines: list[str] = []
    result = train(config, backend="inprocess", echo=lines.append)
    summary = json.loads(result.summary.to_json())
    assert summary["eval_return"] == pytest.approx(evaluations[-1])
    assert summary["best_eval_return"] == pytest.approx(max(evaluations)) == result.best_eval_return
    assert f"best evaluation return {max(evaluations):.2f}," in lines[-1]


@pytest.mark.timeout(60)
def test_the_log_line_shows_the_last_evaluation_and_its_generation(tmp_path):
    lines: list[str] = []
    train(run_config(tmp_path, *RUN, "env.max_steps=30", "train.generations=7", "train.eval_every=3"), backend="inprocess",
          echo=lines.append, progress_bar=False)
    progress = [line for line in lines if re.match(r"BASIC_ES generations +\d+/7 ", line)]
    assert len(progress) == 7 and not any("nan" in line for line in progress), progress
    shown = [re.search(r"eval +(\S+)(?: \(gen (\d+)\))?", line).groups() for line in progress]
    assert [generation for _, generation in shown] == [None, None, "3", "3", "3", "6", "7"]  # and at the budget
    assert shown[0][0] == "-" and all(float(value) > 0 for value, _ in shown[2:])


def test_the_rate_and_eta_of_a_window_follow_the_recent_reports():
    """A generation that takes 9 s after two of 1 s: over a window of 2 reports the rate is 2 / 10 s,
    over the whole run 3 / 11 s."""
    for window, rate, eta in ((2, "0.2", "35s"), (None, "0.273", "26s")):
        lines: list[str] = []
        reporter = Reporter("ES", 10, progress_bar=False, unit="generation", echo=lines.append, window=window)
        for generation, seconds in ((1, 1.0), (2, 2.0), (3, 11.0)):
            reporter.progress(generation, seconds, "", {})
        assert re.match(rf"ES generations +3/10 +{re.escape(rate)} generations/s +ETA +{eta}", lines[-1]), lines[-1]
        assert np.isfinite(float(rate))
