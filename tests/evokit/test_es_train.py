"""es-train end to end: the CLI on the pool, resume == uninterrupted, online/offline cycle."""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import parl_lite
from evokit_py.checkpoint import SolverCheckpointError, read_checkpoint, write_checkpoint
from evokit_py.config import resolve_config
from evokit_py.train import TrainError, TrainStopped, train
from evokit_py.training.run_folders import RunFolders, choose_run_folders
from evokit_py.training.run_lock import lock_run_folders
from locations import CHILD_ENV, ROOT
from es_helpers import run_config

# this module's run settings, before each test's overrides
RUN = ("train.eval_every=2", "train.eval_episodes=2", "env.max_steps=100")


@pytest.mark.quick
@pytest.mark.timeout(120)
def test_es_train_command_on_the_pool(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "parl_lite.cli", "es-train", "--set", f"train.log_dir={tmp_path}/run",
         "--set", f"train.checkpoint_dir={tmp_path}/run/ck", "--set", "train.generations=3",
         "--set", "env.max_steps=50", "--set", "train.workers=2"],
        env=CHILD_ENV, capture_output=True, text=True, timeout=100, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "2 worker(s) (remote)" in out.stdout and "episodes/s" in out.stdout
    summary = json.loads(out.stdout.splitlines()[-1])  # the schema every training script ends with
    assert summary["algo"] == "BASIC_ES" and summary["env"] == "CartPole-v1" and summary["updates"] == 3
    assert summary["actors"] == 2 and summary["steps"] > 0 and summary["checkpoint"].endswith("solver.h5")
    table = re.search(r"noise table (\S+) ", out.stdout).group(1)
    assert not Path("/dev/shm", table.lstrip("/")).exists()  # the owner unlinked the noise table
    rows = list(csv.DictReader(open(tmp_path / "run" / "progress.csv")))
    assert [int(r["generation"]) for r in rows] == [1, 2, 3]
    assert all(0 < float(r["mean_return"]) <= 50 for r in rows)
    attrs, groups = read_checkpoint(tmp_path / "run" / "ck" / "solver.h5")
    assert int(attrs["generation"]) == 3
    session = ort.InferenceSession(str(tmp_path / "run" / "policy.onnx"), providers=["CPUExecutionProvider"])
    assert session.run(None, {"obs": np.zeros((1, 4), np.float32)})[0].shape == (1, 2)


def test_es_train_command_reports_config_errors_with_the_key(tmp_path):
    bad = tmp_path / "es.yaml"
    bad.write_text("solver:\n  optimizer:\n    adam: {beta1: 3}\n")
    out = subprocess.run([sys.executable, "-m", "parl_lite.cli", "es-train", "--config", str(bad)],
                         env=CHILD_ENV, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "solver.optimizer.adam.beta1: must be in [0, 1)" in out.stderr
    unknown = subprocess.run([sys.executable, "-m", "parl_lite.cli", "es-train", "--set", "solver.type=PSO", "--set",
                              f"train.log_dir={tmp_path}/run", "--set", f"train.checkpoint_dir={tmp_path}/run/ck"],
                             env=CHILD_ENV, capture_output=True, text=True, timeout=60)
    assert unknown.returncode != 0 and "solver.type: must be one of BASIC_ES" in unknown.stderr
    assert "Traceback" not in unknown.stderr  # checked when the solver is built, reported as cleanly


@pytest.mark.quick
@pytest.mark.timeout(240)
def test_a_second_run_keeps_the_first_and_resume_continues_the_latest(tmp_path):
    """The README's main command run twice: the second run writes to runs/es_cartpole_1 and says so
    on its first line, the first run's files stay as they were; --resume continues the latest run."""
    def es_train(generations, *extra):
        return subprocess.run([sys.executable, "-m", "parl_lite.cli", "es-train", "--in-process", "--set",
                               f"train.generations={generations}", "--set", "env.max_steps=50", *extra],
                              env=CHILD_ENV, capture_output=True, text=True, timeout=100, cwd=tmp_path)

    files = ("progress.csv", "policy.onnx", "checkpoints/solver.h5")
    first_run, latest = tmp_path / "runs" / "es_cartpole", tmp_path / "runs" / "es_cartpole_1"
    first = es_train(2)
    assert first.returncode == 0, first.stderr
    kept = {name: (first_run / name).read_bytes() for name in files}
    second = es_train(2)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == ("es-train: runs/es_cartpole holds an earlier run, which is kept; this "
                                             "run writes to runs/es_cartpole_1 (--resume continues the latest run "
                                             "instead)")
    assert json.loads(second.stdout.splitlines()[-1])["checkpoint"] == "runs/es_cartpole_1/checkpoints/solver.h5"
    assert all((latest / name).is_file() for name in files)
    resumed = es_train(3, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == "es-train: --resume: the latest run is in runs/es_cartpole_1"
    assert "resumed from runs/es_cartpole_1/checkpoints/solver.h5 at generation 2" in resumed.stdout
    assert [int(row["generation"]) for row in csv.DictReader(open(latest / "progress.csv"))] == [1, 2, 3]
    assert {name: (first_run / name).read_bytes() for name in files} == kept
    assert not (tmp_path / "runs" / "es_cartpole_2").exists()


@pytest.mark.quick
def test_new_runs_take_the_number_after_the_latest_and_resume_takes_the_latest(tmp_path):
    """A checkpoint folder outside the log folder gets the same number; a gap is not filled; a folder
    a run holds now is in use, a lock file left by a run that wrote nothing is not."""
    logs, checkpoints = tmp_path / "logs", tmp_path / "ck"
    for resume in (False, True):
        assert choose_run_folders(logs, checkpoints, resume) == RunFolders(logs, checkpoints)
    checkpoints.mkdir()
    (checkpoints / "solver.h5").write_bytes(b"")
    second = choose_run_folders(logs, checkpoints, resume=False)
    assert (second.log_dir, second.checkpoint_dir, second.number) == (tmp_path / "logs_1", tmp_path / "ck_1", 1)
    assert second.note == (f"es-train: {logs} holds an earlier run, which is kept; this run writes to "
                           f"{tmp_path}/logs_1 and {tmp_path}/ck_1 (--resume continues the latest run instead)")
    assert choose_run_folders(logs, checkpoints, resume=True) == RunFolders(logs, checkpoints)
    for name in ("logs_3", "logs_07", "logs_x"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "progress.csv").write_text("")
    assert choose_run_folders(logs, checkpoints, resume=False).log_dir == tmp_path / "logs_4"
    resumed = choose_run_folders(logs, checkpoints, resume=True)
    assert (resumed.log_dir, resumed.checkpoint_dir) == (tmp_path / "logs_3", tmp_path / "ck_3")
    assert resumed.note == f"es-train: --resume: the latest run is in {tmp_path}/logs_3"
    (tmp_path / "logs_4").mkdir()
    with lock_run_folders({"train.log_dir": tmp_path / "logs_4"}, echo=print):
        assert choose_run_folders(logs, checkpoints, resume=False).log_dir == tmp_path / "logs_5"
        assert choose_run_folders(logs, checkpoints, resume=True).log_dir == tmp_path / "logs_4"
    assert choose_run_folders(logs, checkpoints, resume=False).log_dir == tmp_path / "logs_4"


@pytest.mark.quick
@pytest.mark.timeout(120)
@pytest.mark.parametrize("solver", ["BASIC_ES", "CMA_ES", "GA"])
def test_resume_ends_where_the_uninterrupted_run_ends(tmp_path, solver):
    overrides = [f"solver.type={solver}", "solver.population_size=8", "train.checkpoint_every=2"]
    whole = train(run_config(tmp_path / "whole", *RUN, "train.generations=4", *overrides), backend="inprocess",
                  echo=lambda line: None)
    first = train(run_config(tmp_path / "split", *RUN, "train.generations=2", *overrides), backend="inprocess",
                  echo=lambda line: None)
    lines = []
    rest = train(run_config(tmp_path / "split", *RUN, "train.generations=4", *overrides), resume=True, backend="inprocess",
                 echo=lines.append)
    assert first.generations == 2 and rest.generations == whole.generations == 4
    assert lines[0].startswith("resumed from") and "generation 2" in lines[0]
    _, whole_state = read_checkpoint(whole.checkpoint_path)
    _, rest_state = read_checkpoint(rest.checkpoint_path)
    assert np.array_equal(whole_state["params"]["params"], rest_state["params"]["params"])
    for key, value in whole_state["solver"].items():
        assert np.array_equal(value, rest_state["solver"][key]), key
    assert np.array_equal(whole_state["obs_stats"]["sumsq"], rest_state["obs_stats"]["sumsq"])
    assert (rest.episodes, rest.steps) == (whole.episodes, whole.steps)
    whole_rows = list(csv.DictReader(open(whole.csv_path)))
    rest_rows = list(csv.DictReader(open(rest.csv_path)))
    assert [r["mean_return"] for r in rest_rows] == [r["mean_return"] for r in whole_rows]


@pytest.mark.timeout(120)
def test_results_do_not_depend_on_the_number_of_workers(tmp_path):
    one = train(run_config(tmp_path / "one", *RUN, "train.generations=2", "train.workers=1"), backend="inprocess",
                echo=lambda line: None)
    try:
        two = train(run_config(tmp_path / "two", *RUN, "train.generations=2", "train.workers=2"), echo=lambda line: None)
    finally:
        parl_lite.shutdown()  # leave no pool behind for the other tests of this process
    assert np.array_equal(one.params, two.params)


@pytest.mark.timeout(180)
def test_online_sampling_offline_update_cycle_matches_the_trainer(tmp_path):
    config_path = tmp_path / "es.yaml"
    config = run_config(tmp_path, *RUN, "train.generations=3", "solver.population_size=8")
    config_path.write_text(config.to_yaml())
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "examples" / "es_online_offline.py"), "--config",
                          str(config_path), "--cycles", "3", "--workdir", str(tmp_path / "offline")],
                         env=CHILD_ENV, capture_output=True, text=True, timeout=170)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("sampled generation") == 3 and "updated to generation 3" in out.stdout
    log_lines = (tmp_path / "offline" / "samples.jsonl").read_text().splitlines()
    assert len(log_lines) == 3 and '"infos"' in log_lines[0] and len(log_lines[0]) < 4000  # infos, not noise
    trained = train(config, backend="inprocess", echo=lambda line: None)
    _, offline = read_checkpoint(tmp_path / "offline" / "solver.h5")
    _, online = read_checkpoint(trained.checkpoint_path)
    assert np.array_equal(offline["params"]["params"], online["params"]["params"])
    assert (tmp_path / "offline" / "policy.onnx").is_file()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_or_sigterm_writes_the_checkpoint_and_the_policy_and_resume_finishes_the_run(tmp_path, signal_name,
                                                                                             status):
    """The first Ctrl-C, or a time limit's SIGTERM, finishes the generation and writes the checkpoint
    and the best policy evaluated so far (no policy.onnx was written: a long run stopped by hand or
    by a batch system's time limit left nothing to deploy)."""
    import signal
    args = [sys.executable, "-m", "parl_lite.cli", "es-train", "--set", f"train.log_dir={tmp_path}/run",
            "--set", f"train.checkpoint_dir={tmp_path}/run/ck", "--set", "train.generations=200",
            "--set", "train.target_return=null", "--set", "train.checkpoint_every=1000", "--in-process"]
    process = subprocess.Popen(args, env=CHILD_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stdout:
            if re.match(r"\S+ generations +2/", line):
                process.send_signal(getattr(signal, signal_name))
                break
        rest, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == status, stderr
    assert f"interrupted by {signal_name} (checkpoint and policy written)" in rest
    assert f"es-train: {signal_name}: stopping after this generation" in stderr
    attrs, groups = read_checkpoint(tmp_path / "run" / "ck" / "solver.h5")
    stopped_at = int(attrs["generation"])
    assert 2 <= stopped_at < 200
    policy = tmp_path / "run" / "policy.onnx"
    ort.InferenceSession(str(policy), providers=["CPUExecutionProvider"])
    assert np.array_equal(_linear_weights(policy), groups["extra"]["best_params"].astype(np.float32))
    resumed = subprocess.run(args[:-1] + ["--set", f"train.generations={stopped_at + 1}", "--resume", "--in-process"],
                             env=CHILD_ENV, capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout
    assert f"after the resume at generation {stopped_at}" in resumed.stdout.splitlines()[-2]
    summary = json.loads(resumed.stdout.splitlines()[-1])
    assert summary["updates"] == stopped_at + 1 and not summary["interrupted"]


def _linear_weights(path):
    """The weights an exported linear policy holds (its initializers w0, b0, flattened in order)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    weights = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    return np.concatenate([weights["w0"].ravel(), weights["b0"].ravel()])


NO_PADDLE = """
import sys
import parl_lite
from evokit_py.config import resolve_config
from evokit_py.train import TrainError, TrainStopped, train

@parl_lite.remote_class
class Probe:
    def trainer_modules_loaded(self):
        import evokit_py.sampler  # all that unpickling a Sampler actor imports
        return [name for name in ("h5py", "onnx", "tqdm", "importlib.metadata", "evokit_py.agent", "evokit_py.train",
                                  "evokit_py.checkpoint", "evokit_py.solvers", "evokit_py.training",
                                  "evokit_py.pool", "parl_lite.train") if name in sys.modules]

    def paddle_loaded(self):
        import evokit_py.sampler, evokit_py.pool, evokit_py.agent
        return "paddle" in sys.modules

config = resolve_config(None, ["train.generations=1", "env.max_steps=20", "train.log_dir=" + sys.argv[1],
                               "train.checkpoint_dir=" + sys.argv[1]])
train(config, echo=lambda line: None)
assert "paddle" not in sys.modules, "the trainer imported paddle"
assert not Probe().paddle_loaded(), "a worker imported paddle"
loaded = Probe().trainer_modules_loaded()
assert not loaded, f"a sampling worker imported the trainer's {loaded}"
"""


@pytest.mark.timeout(120)
def test_sampling_never_imports_paddle_nor_the_trainer_s_modules(tmp_path):
    out = subprocess.run([sys.executable, "-c", NO_PADDLE, str(tmp_path)], env=CHILD_ENV, capture_output=True,
                         text=True, timeout=100)
    assert out.returncode == 0, out.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["es_cartpole.yaml", "es_pendulum.yaml", "es_swimmer.yaml", "es_hopper.yaml",
                                  "es_halfcheetah.yaml", "es_walker2d.yaml"])
def test_shipped_configs_run(tmp_path, name, monkeypatch):
    if name not in ("es_cartpole.yaml", "es_pendulum.yaml"):
        pytest.importorskip("mujoco")
        monkeypatch.chdir(tmp_path)  # MuJoCo 4 writes its warnings about gymnasium's models to MUJOCO_LOG.TXT here
    config = resolve_config(ROOT / "scripts" / "examples" / name, [f"train.log_dir={tmp_path}", f"train.checkpoint_dir={tmp_path}",
                                                      "train.generations=1", "env.max_steps=20", "train.eval_episodes=1"])
    result = train(config, backend="inprocess", echo=lambda line: None)
    assert result.generations == 1 and result.onnx_path.is_file()


@pytest.mark.quick
@pytest.mark.timeout(120)
def test_progress_goes_through_the_reporter_and_the_result_carries_the_run_summary(tmp_path, capsys):
    config = resolve_config(None, [f"train.log_dir={tmp_path}/run", f"train.checkpoint_dir={tmp_path}/run/ck",
                                   "train.generations=6", "train.eval_every=2", "train.target_return=15",
                                   "env.max_steps=50", "train.eval_episodes=2"])
    lines = []
    result = train(config, backend="inprocess", echo=lines.append, progress_bar=False)
    progress = [line for line in lines if re.match(r"BASIC_ES generations +\d+/6 ", line)]
    assert len(progress) == result.generations and all(
        "generations/s" in line and "ETA" in line and "episodes/s" in line and "mean" in line and "best" in line
        for line in progress), lines
    summary = result.summary
    assert summary.algo == "BASIC_ES" and summary.env == "CartPole-v1" and summary.seed == config.seed
    assert summary.updates == result.generations and summary.steps == result.steps and summary.actors is None
    assert summary.solved and summary.solved_at == result.steps and summary.eval_return >= 15
    assert summary.best_eval_return == result.best_eval_return >= summary.eval_return
    assert summary.train_seconds == result.train_seconds and not summary.interrupted
    assert json.loads(summary.to_json())["solved"] is True

    capsys.readouterr()
    lines.clear()
    again = train(config, backend="inprocess", echo=lines.append, progress_bar=True)
    bar = capsys.readouterr().err
    assert "BASIC_ES" in bar and "generation" in bar and again.generations == result.generations
    assert again.csv_path == tmp_path / "run_1" / "progress.csv"  # the first run is kept
    assert not any(re.match(r"BASIC_ES generations", line) for line in lines)  # the bar replaces the lines


def _rewrite_with_extra(path: Path, extra: dict) -> None:
    """Write the checkpoint at ``path`` again with ``extra`` datasets added to its own."""
    attrs, groups = read_checkpoint(path)
    write_checkpoint(path, solver_type=str(attrs["solver_type"]), config_yaml=str(attrs["config"]),
                     noise_seed=int(attrs["noise_seed"]), params=groups["params"]["params"],
                     solver_state=groups["solver"], obs_stats=groups["obs_stats"], extra={**groups["extra"], **extra})


def _candidate_rows(returns: list[float], steps: int = 7) -> dict[str, np.ndarray]:
    """``extra/unfinished/*`` of candidates 0, 1, ... with these returns (CartPole's 4 observations)."""
    count = len(returns)
    return {"unfinished/indices": np.arange(count), "unfinished/returns": np.array(returns, dtype=np.float64),
            "unfinished/steps": np.full(count, steps), "unfinished/obs_sum": np.zeros((count, 4)),
            "unfinished/obs_sumsq": np.zeros((count, 4)), "unfinished/cpu_seconds": np.zeros(count)}


@pytest.mark.timeout(120)
def test_a_resumed_run_takes_the_candidates_its_checkpoint_kept_of_an_unfinished_generation(tmp_path):
    overrides = ["solver.population_size=8", "observation_normalization=false"]
    first = train(run_config(tmp_path, *RUN, "train.generations=2", *overrides), backend="inprocess", echo=lambda line: None)
    whole = train(run_config(tmp_path / "whole", *RUN, "train.generations=3", *overrides), backend="inprocess",
                  echo=lambda line: None)
    kept = [1000.0, 2000.0, 3000.0]  # what no CartPole episode of 100 steps returns: seen if taken
    _rewrite_with_extra(first.checkpoint_path, _candidate_rows(kept, steps=0))
    rest = train(run_config(tmp_path, *RUN, "train.generations=3", *overrides), resume=True, backend="inprocess",
                 echo=lambda line: None)
    rows, whole_rows = list(csv.DictReader(open(rest.csv_path))), list(csv.DictReader(open(whole.csv_path)))
    assert rest.generations == 3 and float(rows[2]["max_return"]) == 3000.0  # generation 3 took the kept ones
    # and played only the other five: the steps of the three kept (0 here) are missing from its count
    assert 0 < int(rows[2]["steps"]) - int(rows[1]["steps"]) < int(whole_rows[2]["steps"]) - int(whole_rows[1]["steps"])
    _, state = read_checkpoint(rest.checkpoint_path)
    assert not any(key.startswith("unfinished/") for key in state["extra"])  # used once, then forgotten


@pytest.mark.parametrize("change, message", [
    ({"unfinished/indices": np.array([0, 0, 1])}, "extra/unfinished/indices: a candidate is there twice"),
    ({"unfinished/indices": np.array([0, -1, 1])}, "extra/unfinished/indices: holds values that are not whole"),
    ({"unfinished/steps": np.array([1.5, 2, 3])}, "extra/unfinished/steps: holds values that are not whole"),
    ({"unfinished/returns": np.zeros(4)}, "extra/unfinished/returns: shape (4,), expected (3,)"),
])
def test_a_checkpoint_with_unsound_unfinished_candidates_is_refused_naming_the_dataset(tmp_path, change, message):
    first = train(run_config(tmp_path, *RUN, "train.generations=1", "solver.population_size=8"), backend="inprocess",
                  echo=lambda line: None)
    rows = _candidate_rows([1.0, 2.0, 3.0])
    _rewrite_with_extra(first.checkpoint_path, {**rows, **change})
    with pytest.raises((SolverCheckpointError, TrainError), match=re.escape(message)):
        train(run_config(tmp_path, *RUN, "train.generations=2", "solver.population_size=8"), resume=True, backend="inprocess",
              echo=lambda line: None)


def _held_rows(infos: list[list[int]], returns: list[float]) -> dict[str, np.ndarray]:
    """``extra/unfinished/*`` of an async run's held results: these sampling infos, these returns."""
    rows = _candidate_rows(returns)
    del rows["unfinished/indices"]
    return {"unfinished/infos": np.array(infos, dtype=np.int64), **rows}


def _lose_the_sampler_once_it_stalls(gate: Path) -> threading.Thread:
    """A thread that waits for the sampler of a ``StallingCartPole`` run to stall at its gate, then
    lets no other be made and kills it."""
    def lose() -> None:
        with open(gate, "wb"):  # returns once the sampler waits at the gate
            (gate.parent / f"{gate.name}.shut").touch()
            os.kill(int((gate.parent / f"{gate.name}.pid").read_text()), signal.SIGKILL)

    thread = threading.Thread(target=lose, daemon=True)
    thread.start()
    return thread


_ASYNC = ("train.mode=async", "solver.population_size=4", "env.episodes_per_candidate=1", "train.eval_every=1000")


@pytest.mark.timeout(120)
def test_an_async_run_that_loses_its_workers_keeps_the_results_not_yet_in_an_update(tmp_path):
    """Async, population 4, one sampler: it evaluates three mirrored pairs (generation 0's batch,
    then a pair around generation 1), stalls at its fourth and is killed, and no other can be made.
    The run stops after train.capacity_wait with that pair in its checkpoint, and the resumed run's
    first update takes it (its returns set to values no CartPole episode of 100 steps returns)."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    stall, lines = _lose_the_sampler_once_it_stalls(gate), []
    try:
        with pytest.raises(TrainStopped) as stopped:
            train(run_config(tmp_path, *RUN, *_ASYNC, "train.generations=1000", "train.workers=1", "train.capacity_wait=1",
                          "env.id=gated_env:StallingCartPole-v0", f"env.kwargs={{gate: {gate}, resets: 6}}"),
                  echo=lines.append, progress_bar=False)
    finally:
        parl_lite.shutdown()
        if stall.is_alive():  # the sampler never stalled: let the thread's open return
            os.close(os.open(gate, os.O_RDONLY | os.O_NONBLOCK))
        stall.join(timeout=10)
    checkpoint = stopped.value.result.checkpoint_path
    assert re.search(r"stopped at generation 1: no sampler left, and none could be made for 1 s; the checkpoint "
                     r"\S+ holds generation 1 and 2 evaluated candidate\(s\) of the next", str(stopped.value)), lines
    attrs, state = read_checkpoint(checkpoint)
    held = state["extra"]["unfinished/infos"]
    assert int(attrs["generation"]) == 1 and "unfinished/indices" not in state["extra"]
    assert held.shape == (2, 6) and sorted(held[:, 2]) == [-1, 1]  # a mirrored pair
    assert list(held[:, 4]) == [1, 1] and list(held[:, 5]) == [0, 0]  # drawn around version 1, no preview
    assert np.all(state["extra"]["unfinished/returns"] > 0)
    _rewrite_with_extra(checkpoint, {"unfinished/returns": np.array([1000.0, 2000.0])})
    lines.clear()
    resumed = train(run_config(tmp_path, *RUN, *_ASYNC, "train.generations=2", "env.id=gated_env:StallingCartPole-v0",
                            f"env.kwargs={{gate: {tmp_path / 'open'}, resets: 1000000}}"), resume=True,
                    backend="inprocess", echo=lines.append, progress_bar=False)
    assert lines[0] == f"resumed from {checkpoint} at generation 1, with 2 evaluated candidate(s) of the next"
    rows = list(csv.DictReader(open(resumed.csv_path)))
    assert [row["generation"] for row in rows] == ["1", "2"] and float(rows[1]["max_return"]) == 2000.0
    _, state = read_checkpoint(resumed.checkpoint_path)
    assert int(state["solver"]["dropped_samples"]) == 0  # taken, not dropped
    assert not any(key.startswith("unfinished/") for key in state["extra"])  # used once, then forgotten


_PAIR = [[0, 8, 1, 0, 1, 0], [0, 8, -1, 0, 1, 0]]  # held results drawn around version 1 (the checkpoint's)


@pytest.mark.parametrize("change, message", [
    ({"unfinished/infos": np.zeros((2, 7))}, "extra/unfinished/infos: shape (2, 7), expected (2, i) (i <= 6"),
    ({"unfinished/returns": np.zeros(3)}, "extra/unfinished/returns: shape (3,), expected (2,)"),
    ({"unfinished/infos": [_PAIR[0], [0, 8, -1, 0, 3, 0]]}, "extra/unfinished/infos: version 3 is out of range [0, 2]"),
    ({"unfinished/infos": [_PAIR[0], [0, 8, 2, 0, 1, 0]]}, "extra/unfinished/infos: sign 2 is out of range [-1, 1]"),
    ({"unfinished/infos": [_PAIR[0], [0, 10**9, 1, 0, 1, 0]]}, "extra/unfinished/infos: offset 1000000000 is out of "
                                                               "range [0, 999990]"),
    ({"unfinished/infos": [_PAIR[0], [0, 8, 1, 0, 2, 0]]}, "extra/unfinished/infos: a version 2 (the checkpoint is "
                                                          "at generation 1) without a preview"),
    ({"unfinished/infos": [_PAIR[0], [0, 8.5, 1, 0, 1, 0]]}, "extra/unfinished/infos: holds values that are not whole"),
    ({"unfinished/indices": np.arange(2)}, "extra/unfinished/infos: beside extra/unfinished/indices"),
    ({"unfinished/previews/ids": np.array([1])}, "extra/unfinished/previews/params: missing"),
    ({"unfinished/infos": [_PAIR[0], [0, 8, 1, 0, 2, 1]], "unfinished/previews/ids": np.array([1]),
      "unfinished/previews/versions": np.array([1]), "unfinished/previews/params": np.zeros((1, 10))},
     "extra/unfinished/infos: a candidate of version 2 drawn around preview 1, which extra/unfinished/previews/"
     "versions says is of version 1"),
    ({"unfinished/infos": [_PAIR[0], [0, 8, 1, 0, 2, 1]], "unfinished/previews/ids": np.array([1]),
      "unfinished/previews/versions": np.array([2]), "unfinished/previews/params": np.zeros((1, 11))},
     "extra/unfinished/previews/params: shape (1, 11), expected (1, 10)"),
])
def test_a_checkpoint_with_unsound_held_async_results_is_refused_naming_the_dataset(tmp_path, change, message):
    first = train(run_config(tmp_path, *RUN, *_ASYNC, "train.generations=1"), backend="inprocess", echo=lambda line: None)
    _rewrite_with_extra(first.checkpoint_path, {**_held_rows(_PAIR, [1.0, 2.0]),
                                                **{key: np.asarray(value) for key, value in change.items()}})
    with pytest.raises((SolverCheckpointError, TrainError), match=re.escape(message)):
        train(run_config(tmp_path, *RUN, *_ASYNC, "train.generations=2"), resume=True, backend="inprocess",
              echo=lambda line: None)


@pytest.mark.timeout(120)
def test_a_sampler_killed_on_the_local_pool_is_replaced_and_the_result_stays_the_same(tmp_path):
    lines, killed = [], []

    def kill_a_sampler_then_stop_once_replaced(line: str) -> None:
        lines.append(line)
        if not killed and re.match(r"BASIC_ES generations +2/", line):
            sampler = next(worker for worker in parl_lite.connect().status()["workers"] if worker["actor"] == "Sampler")
            os.kill(sampler["pid"], signal.SIGKILL)
            killed.append(sampler["pid"])
        if "sampler 2 made (a replacement): 2 of at most 2" in line:
            os.kill(os.getpid(), signal.SIGINT)  # as a Ctrl-C: the run stops after the generation under way

    try:
        pooled = train(run_config(tmp_path / "pool", *RUN, "train.generations=1000", "train.workers=2"),
                       echo=kill_a_sampler_then_stop_once_replaced, progress_bar=False)
    finally:
        parl_lite.shutdown()
    assert killed and pooled.interrupted, "\n".join(lines)
    alone = train(run_config(tmp_path / "alone", *RUN, f"train.generations={pooled.generations}"), backend="inprocess",
                  echo=lambda line: None)
    _, pooled_state = read_checkpoint(pooled.checkpoint_path)
    _, alone_state = read_checkpoint(alone.checkpoint_path)  # the solution (the best evaluated one may differ:
    assert np.array_equal(pooled_state["params"]["params"], alone_state["params"]["params"])  # a last evaluation)
    assert np.array_equal(pooled_state["obs_stats"]["sumsq"], alone_state["obs_stats"]["sumsq"])
    assert any(re.search(rf"sampler \d lost: .*pid {killed[0]}", line) for line in lines), lines
    assert any(re.search(rf"1 worker\(s\) lost \(pid {killed[0]}\), \d+ candidate\(s\) re-queued", line)
               for line in lines), lines
