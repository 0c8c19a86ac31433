"""es-train on a cluster of real nodes started through ``parl-lite`` (issue 26): a sampler's node
killed mid-run (sync: the same parameters as an undisturbed run; async: training goes on), every
node lost (the run stops with its checkpoint, and resumes to the same end), a node that joins mid-run
(its samplers are used), the master killed (a checkpoint and one clear line, no hang)."""
import csv
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import parl_lite
from evokit_py.checkpoint import read_checkpoint
from evokit_py.config import resolve_config
from evokit_py.train import train

from backends import Cluster
from remote_helpers import wait_for_exit

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# CartPole burning 1 ms of CPU a step: a generation lasts long enough to be cut by a kill
SLOW = ["env.id=es_test_envs:BusyCartPole-v0", "env.kwargs={busy_ms: 1}", "env.max_steps=50",
        "solver.population_size=16", "train.target_return=null", "train.eval_episodes=2", "train.workers=2"]
PROGRESS = r"^BASIC_ES generations +(\d+)/"


@pytest.fixture
def nodes(tmp_path):
    """A master whose own node has 1 CPU (``parl-lite start``); tests add nodes. The nodes import
    es_test_envs (the tests folder is on their PYTHONPATH); afterwards nothing of it may be left."""
    parl_lite.shutdown()
    cluster = Cluster(tmp_path / "cluster")
    cluster.env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TESTS), *sys.path])
    try:
        cluster.start(cpus=1)
        yield cluster
    finally:
        cluster.stop()


def _settings(folder: Path, *overrides: str) -> list[str]:
    return [f"train.log_dir={folder}", f"train.checkpoint_dir={folder}/ck", *SLOW, *overrides]


def _es_train(cluster: Cluster, folder: Path, *overrides: str, resume: bool = False) -> subprocess.Popen:
    """``parl-lite es-train --address`` the cluster, its output lines readable as they come."""
    folder.mkdir(parents=True, exist_ok=True)
    sets = [argument for setting in _settings(folder, *overrides) for argument in ("--set", setting)]
    return subprocess.Popen([sys.executable, "-m", "parl_lite.cli", "es-train", "--address", cluster.address, *sets,
                             *(["--resume"] if resume else [])],
                            cwd=folder, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _read_until(run: subprocess.Popen, lines: list[str], pattern: str) -> re.Match:
    """Read ``run`` 's output into ``lines`` until a line matches ``pattern``; the match."""
    assert run.stdout is not None
    for line in run.stdout:
        lines.append(line)
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"the run ended before a line matching {pattern!r}:\n{''.join(lines)}")


def _progress(run: subprocess.Popen, lines: list[str], generation: int = 0, text: str = "") -> int:
    """Read ``run`` 's output into ``lines`` until the progress line of ``generation`` or a later one
    that holds ``text``; its generation."""
    while True:
        found = _read_until(run, lines, PROGRESS)
        if int(found.group(1)) >= generation and text in found.string:
            return int(found.group(1))


def _finish(run: subprocess.Popen, lines: list[str], timeout: float = 120) -> str:
    """Wait for ``run`` to end; its whole output."""
    try:
        out, _ = run.communicate(timeout=timeout)
    finally:
        run.kill()
        run.wait()
    return "".join(lines) + out


def _sampler_nodes(cluster: Cluster) -> dict[str, int]:
    """The node addresses hosting a Sampler actor (alive, or starting as far as the master knows:
    the nodes report every so often), and how many each hosts."""
    status = cluster.status()
    address = {node["id"]: node["address"] for node in status["nodes"]}
    where: dict[str, int] = {}
    for actor in status["actors"]:
        if actor["class"] == "Sampler" and actor["state"] in ("starting", "alive"):
            where[address[actor["node"]]] = where.get(address[actor["node"]], 0) + 1
    return where


def _kill_node(cluster: Cluster, address: str) -> dict:
    entry = next(entry for entry in cluster.processes() if entry["role"] == "node" and entry["address"] == address)
    os.kill(entry["pid"], signal.SIGKILL)
    assert wait_for_exit(entry["pid"], 10)
    return entry


def _undisturbed(folder: Path, *overrides: str):
    """The same run in this process, with no cluster."""
    return train(resolve_config(None, _settings(folder, *overrides)), backend="inprocess", echo=lambda line: None)


def _assert_same_end(checkpoint: Path, reference: Path) -> None:
    _, ours = read_checkpoint(checkpoint)
    _, theirs = read_checkpoint(reference)
    assert np.array_equal(ours["params"]["params"], theirs["params"]["params"])
    for key, value in theirs["solver"].items():
        assert np.array_equal(value, ours["solver"][key]), key
    for key, value in theirs["obs_stats"].items():
        assert np.array_equal(value, ours["obs_stats"][key]), key


def _mean_returns(folder: Path) -> list[str]:
    with open(folder / "progress.csv", newline="") as log:
        return [row["mean_return"] for row in csv.DictReader(log)]


@pytest.mark.timeout(180)
def test_a_sync_run_that_loses_a_node_ends_with_the_parameters_of_an_undisturbed_run(nodes, tmp_path):
    nodes.add_node("node-b", cpus=1)
    nodes.add_node("node-c", cpus=1)
    run, lines = _es_train(nodes, tmp_path / "disturbed", "train.generations=1000", "train.eval_every=3"), []
    _progress(run, lines, 1)
    master_node = next(entry["address"] for entry in nodes.processes()
                       if entry["role"] == "node" and entry["cwd"] == str(nodes.folder / "master"))
    victim = next(address for address in _sampler_nodes(nodes) if address != master_node)
    _kill_node(nodes, victim)
    recovered = _progress(run, lines, text="worker(s) lost")
    _read_until(run, lines, r"^es-train: sampler 2 made \(a replacement\): 2 of at most 2$")
    _progress(run, lines, recovered + 1)  # a generation on the replacement
    assert list(_sampler_nodes(nodes).values()) == [1, 1] and victim not in _sampler_nodes(nodes)
    run.send_signal(signal.SIGINT)  # stops after the generation under way, with its checkpoint
    out = _finish(run, lines)
    assert run.returncode == 130, out
    assert re.search(rf"1 worker\(s\) lost \(node {victim}\), \d+ candidate\(s\) re-queued, 1 worker\(s\) left", out)
    assert re.search(rf"es-train: sampler \d lost: .*its node {victim} is gone", out), out
    generations = int(read_checkpoint(tmp_path / "disturbed" / "ck" / "solver.h5")[0]["generation"])
    assert generations > recovered
    reference = _undisturbed(tmp_path / "undisturbed", f"train.generations={generations}", "train.eval_every=3")
    _assert_same_end(tmp_path / "disturbed" / "ck" / "solver.h5", reference.checkpoint_path)
    assert _mean_returns(tmp_path / "disturbed") == _mean_returns(tmp_path / "undisturbed")
