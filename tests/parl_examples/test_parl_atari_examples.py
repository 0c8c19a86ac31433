"""PARL 2.2.1's Atari examples (A2C, IMPALA, DQN_variant), renamed for parl_lite and nothing else
(``tests/parl_examples/README.md``), run as PARL's READMEs say: ``python train.py`` in the example's
folder, A2C and IMPALA against a cluster started with ``parl-lite start``, whose address is written
into the config file as a user would. Budgets are short: the first evaluation or metrics line must
print, with no traceback, and nothing may be left running.

A2C and DQN_variant play Breakout (a random game of Breakout is ~160 steps, one of Pong ~860; the
DQN example evaluates on 3 whole games): their env name is a config entry and an option. IMPALA
plays Pong, its default, until its first metrics line with learner figures, then gets a Ctrl-C.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import pytest

from backends import Cluster

pytest.importorskip("ale_py", reason="the Atari examples need the atari extra: pip install '.[atari]'")

EXAMPLES = Path(__file__).parent
RUN_TIMEOUT = 420  # seconds; the runs take tens of seconds, more on a loaded machine
NUMBER = r"(?:np\.float(?:32|64)\()?-?\d+(?:\.\d+)?(?:e-?\d+)?\)?"  # numpy 2 prints np.float64(1.5)


@pytest.fixture
def atari_cluster(tmp_path):
    """``parl-lite start`` with 2 CPUs in its own folder; afterwards, no actor of the example may be
    alive, and ``parl-lite stop`` must leave nothing behind."""
    cluster = Cluster(tmp_path / "cluster")
    cluster.start(cpus=2)
    try:
        yield cluster
        _assert_no_actor_alive(cluster)
    finally:
        cluster.stop()


def _example(name: str, tmp_path: Path, config_edits: dict[str, str] | None = None) -> Path:
    """A copy of ``tests/parl_examples/NAME`` with ``config_edits`` (old text -> new text) made in its
    config file."""
    folder = shutil.copytree(EXAMPLES / name, tmp_path / name)
    if config_edits:
        config = next(folder.glob("*_config.py"))
        text = config.read_text()
        for old, new in config_edits.items():
            assert old in text, f"{config.name} has no {old!r}"
            text = text.replace(old, new)
        config.write_text(text)
    return folder


def _run(folder: Path, *arguments: str, env: dict[str, str]) -> str:
    """``python train.py ARGUMENTS`` in ``folder`` to its end; returns its output (stdout and stderr)."""
    process = subprocess.Popen([sys.executable, "train.py", *arguments], cwd=folder, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError(f"train.py did not end in {RUN_TIMEOUT} s; its output:\n{output[-5000:]}") from None
    assert process.returncode == 0, f"train.py exited with {process.returncode}:\n{output[-5000:]}"
    _assert_group_gone(process.pid)
    return output


def _assert_group_gone(pgid: int) -> None:
    """No process of the program's session is left (it started none that outlived it)."""
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def _assert_no_actor_alive(cluster: Cluster, timeout: float = 10.0) -> None:
    """Every actor the example created has been released (its client exited)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [actor for actor in cluster.status()["actors"] if actor["state"] in ("starting", "alive")]
        if not alive:
            return
        assert time.monotonic() < deadline, f"actors left alive after the example ended: {alive}"
        time.sleep(0.05)


def _assert_clean(output: str) -> None:
    assert "Traceback" not in output and "Error" not in output, output[-5000:]


@pytest.mark.timeout(RUN_TIMEOUT + 60)
def test_parl_dqn_variant_example_trains_evaluates_and_saves(tmp_path):
    folder = _example("DQN_variant", tmp_path)
    output = _run(folder, "--env", "BreakoutNoFrameskip-v4", "--warmup_size", "50", "--train_total_steps", "10",
                  "--test_every_steps", "10", env=dict(os.environ))
    _assert_clean(output)
    evaluations = re.findall(r"eval_agent done, \(steps, eval_reward\): \((\d+), (" + NUMBER + r")\)", output)
    assert len(evaluations) == 1, output[-5000:]
    with h5py.File(folder / "model" / "model.ckpt", "r") as saved:  # agent.save: parl_lite's HDF5 checkpoint
        assert len(saved.keys()) > 0
    assert list((folder / "train_log" / "train").glob("events.out.tfevents.*"))  # summary.add_scalar


@pytest.mark.timeout(RUN_TIMEOUT + 120)
def test_parl_a2c_example_runs_on_a_parl_lite_cluster(tmp_path, atari_cluster):
    folder = _example("A2C", tmp_path, {"'localhost:8110'": repr(atari_cluster.address),
                                        "'PongNoFrameskip-v4'": "'BreakoutNoFrameskip-v4'",
                                        "'actor_num': 5": "'actor_num': 2", "'env_num': 5": "'env_num': 1"})
    output = _run(folder, "--max_sample_steps", "800", env=atari_cluster.env)
    _assert_clean(output)
    assert "Creating 2 remote actors to connect." in output
    metrics = re.findall(r"\{'sample_steps': (\d+), 'max_episode_rewards': (" + NUMBER + r"), "
                         r"'mean_episode_rewards': (" + NUMBER + r").*'total_loss': (" + NUMBER + r")", output)
    assert metrics, output[-5000:]


@pytest.mark.timeout(RUN_TIMEOUT + 120)
def test_parl_impala_example_runs_on_a_parl_lite_cluster_until_ctrl_c(tmp_path, atari_cluster):
    folder = _example("IMPALA", tmp_path, {"'localhost:8010'": repr(atari_cluster.address),
                                           "'actor_num': 32": "'actor_num': 2", "'env_num': 5": "'env_num': 1",
                                           "'train_batch_size': 1000": "'train_batch_size': 100"})
    process = subprocess.Popen([sys.executable, "train.py"], cwd=folder, env=atari_cluster.env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    learned = re.compile(r"\{'sample_steps': [1-9]\d*, .*'total_loss': " + NUMBER + r", .*'kl': " + NUMBER)
    lines: list[str] = []
    first_metrics = threading.Event()

    def read() -> None:
        for line in process.stdout:
            lines.append(line)
            if learned.search(line):
                first_metrics.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert first_metrics.wait(RUN_TIMEOUT), "no metrics line with learner figures:\n" + "".join(lines)[-5000:]
        before_stop = "".join(lines)
        process.send_signal(signal.SIGINT)  # the example runs until stopped
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    reader.join(timeout=10)
    _assert_clean(before_stop)
    assert "Remote actor count: 2" in before_stop
    _assert_group_gone(process.pid)
