"""es-train on a cluster of real nodes started through ``parl-lite`` (issue 26): a sampler's node
killed mid-run (sync: the same parameters as an undisturbed run; async: training goes on), every
node lost (the run stops with its checkpoint, and resumes to the same end), a node that joins mid-run
(its samplers are used), the master killed (a checkpoint and one clear line, no hang)."""
import csv
import glob
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import parl_lite
from evokit_py.checkpoint import read_checkpoint
from evokit_py.config import resolve_config
from evokit_py.train import train

from backends import Cluster
from remote_helpers import true_within, wait_for_exit
from locations import CHILD_ENV

# CartPole burning 0.2 ms of CPU a step: a generation (0.1 s or so) is cut by a kill, and a SIGINT
# stops a run a few generations after the line it answers
SLOW = ["env.id=es_test_envs:BusyCartPole-v0", "env.kwargs={busy_ms: 0.2}", "env.max_steps=30",
        "solver.population_size=16", "train.target_return=null", "train.eval_episodes=2", "train.workers=2"]
PROGRESS = r"^BASIC_ES generations +(\d+)/"


class ESCluster(Cluster):
    """A cluster whose nodes import es_test_envs (the tests folder on their PYTHONPATH), and the
    es-train runs started on it."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.env["PYTHONPATH"] = CHILD_ENV["PYTHONPATH"]
        self.runs: list[subprocess.Popen] = []

    def es_train(self, folder: Path, *overrides: str, resume: bool = False) -> subprocess.Popen:
        """``parl-lite es-train --address`` this cluster, writing in ``folder``; its output lines
        readable as they come."""
        folder.mkdir(parents=True, exist_ok=True)
        sets = [argument for setting in _settings(folder, *overrides) for argument in ("--set", setting)]
        run = subprocess.Popen([sys.executable, "-m", "parl_lite.cli", "es-train", "--address", self.address, *sets,
                                *(["--resume"] if resume else [])],
                               cwd=folder, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.runs.append(run)
        return run


@pytest.fixture
def nodes(tmp_path):
    """A master whose own node has 1 CPU (``parl-lite start``); tests add nodes. Afterwards every
    es-train run started on it is ended, and nothing of the cluster may be left."""
    parl_lite.shutdown()
    cluster = ESCluster(tmp_path / "cluster")
    try:
        cluster.start(cpus=1)
        yield cluster
    finally:
        for run in cluster.runs:
            run.kill()
            run.wait()
            if run.stdout is not None:
                run.stdout.close()
        cluster.stop()
        left = [path for run in cluster.runs for path in glob.glob(f"/dev/shm/parl_lite_{run.pid}_*")]
        assert left == [], f"shared memory of es-train runs left: {left}"  # their noise tables


def _settings(folder: Path, *overrides: str) -> list[str]:
    return [f"train.log_dir={folder}", f"train.checkpoint_dir={folder}/ck", *SLOW, *overrides]


def _read_until(run: subprocess.Popen, lines: list[str], *patterns: str) -> list[re.Match]:
    """Read ``run`` 's output into ``lines`` until each of ``patterns`` has matched a line read
    since the call (in any order); their first matches."""
    assert run.stdout is not None
    found: dict[str, re.Match] = {}
    for line in run.stdout:
        lines.append(line)
        found.update({pattern: match for pattern in patterns if pattern not in found
                      for match in [re.search(pattern, line)] if match})
        if len(found) == len(patterns):
            return [found[pattern] for pattern in patterns]
    raise AssertionError(f"the run ended before lines matching {patterns}:\n{''.join(lines)}")


def _progress(run: subprocess.Popen, lines: list[str], generation: int = 0) -> int:
    """Read ``run`` 's output into ``lines`` until the progress line of ``generation`` or a later
    one; its generation."""
    while True:
        found, = _read_until(run, lines, PROGRESS)
        if int(found.group(1)) >= generation:
            return int(found.group(1))


def _finish(run: subprocess.Popen, lines: list[str], timeout: float = 120) -> str:
    """Wait for ``run`` to end; its whole output."""
    out, _ = run.communicate(timeout=timeout)
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
    return _column(folder, "mean_return")


def _kill_a_sampler_node(nodes: ESCluster, run: subprocess.Popen, lines: list[str]) -> tuple[str, int]:
    """Once ``run`` has done a generation, SIGKILL a node
    (not the master's own) that hosts one of its two samplers, and read on until the run has said so
    in a progress line and made a replacement; the node's address and that line's generation."""
    master_node = next(entry["address"] for entry in nodes.processes()
                       if entry["role"] == "node" and entry["cwd"] == str(nodes.folder / "master"))
    _progress(run, lines, 1)
    assert true_within(lambda: sum(_sampler_nodes(nodes).values()) == 2, 30)  # the nodes report every so often
    victim = next(address for address in _sampler_nodes(nodes) if address != master_node)
    _kill_node(nodes, victim)
    recovered, _ = _read_until(run, lines, PROGRESS + ".*worker\\(s\\) lost",
                               r"^es-train: sampler 2 made \(a replacement\): 2 of at most 2$")
    return victim, int(recovered.group(1))


@pytest.fixture
def three_nodes(nodes):
    """``nodes`` with two more nodes of 1 CPU: 3 CPUs for 2 samplers, room for a replacement."""
    nodes.add_node("node-b", cpus=1)
    nodes.add_node("node-c", cpus=1)
    return nodes


@pytest.mark.timeout(180)
def test_a_sync_run_that_loses_a_node_ends_with_the_parameters_of_an_undisturbed_run(three_nodes, tmp_path):
    nodes = three_nodes
    run, lines = nodes.es_train(tmp_path / "disturbed", "train.generations=1000", "train.eval_every=3"), []
    victim, recovered = _kill_a_sampler_node(nodes, run, lines)
    _progress(run, lines, recovered + 1)  # a generation with the replacement
    assert true_within(lambda: list(_sampler_nodes(nodes).values()) == [1, 1], 30)
    assert victim not in _sampler_nodes(nodes)
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


def _stopped(run: subprocess.Popen, lines: list[str], why: str) -> tuple[int, Path]:
    """Wait for ``run`` to stop for lack of workers (within a minute), and check how it says so: status
    1 and, last, one line (no traceback) with ``why`` (a pattern), the checkpoint and how to resume;
    the generation it stopped at and its checkpoint (checked to hold that generation)."""
    out = _finish(run, lines, timeout=60)
    assert run.returncode == 1 and "Traceback" not in out, out
    last = out.strip().splitlines()[-1]
    stopped = re.fullmatch(rf"Error: es-train stopped at generation (\d+): {why}; the checkpoint (\S+) holds "
                           r"generation \1( and (\d+) evaluated candidate\(s\) of the next)?: resume with the same "
                           r"command and --resume once workers can run again \(parl-lite connect adds a node to a "
                           r"cluster\)", last)
    assert stopped, last
    generation, checkpoint = int(stopped.group(1)), Path(stopped.group(2))
    attrs, state = read_checkpoint(checkpoint)
    assert int(attrs["generation"]) == generation >= 1  # no whole generation lost
    kept = state["extra"].get("unfinished/indices", np.zeros(0))  # nor the candidates evaluated of the next
    assert len(kept) == int(stopped.group(4) or 0) and set(kept) <= set(range(16))
    return generation, checkpoint


@pytest.mark.timeout(180)
def test_with_every_node_lost_the_run_stops_with_its_checkpoint_and_resumes_to_the_same_end(nodes, tmp_path):
    nodes.add_node("node-b", cpus=1)
    settings = ("train.generations=6", "train.eval_every=3", "train.capacity_wait=2")
    run, lines = nodes.es_train(tmp_path / "disturbed", *settings), []
    _progress(run, lines, 1)
    # held still while its nodes go: on a quiet machine it would otherwise finish its 6 generations first
    run.send_signal(signal.SIGSTOP)
    try:
        assert true_within(lambda: len(_sampler_nodes(nodes)) == 2, 30)  # on the master's own node and node-b
        for address in list(_sampler_nodes(nodes)):
            _kill_node(nodes, address)
    finally:
        run.send_signal(signal.SIGCONT)
    generation, checkpoint = _stopped(run, lines, r"no sampler left, and none could be made for 2 s")
    assert checkpoint == tmp_path / "disturbed" / "ck" / "solver.h5"
    assert [int(row) for row in _column(tmp_path / "disturbed", "generation")] == list(range(1, generation + 1))
    nodes.add_node("node-c", cpus=2)
    resumed = nodes.es_train(tmp_path / "disturbed", *settings, resume=True)
    out = _finish(resumed, [])
    assert resumed.returncode == 0 and f"resumed from {checkpoint} at generation {generation}" in out, out
    reference = _undisturbed(tmp_path / "undisturbed", *settings)
    _assert_same_end(checkpoint, reference.checkpoint_path)
    assert _mean_returns(tmp_path / "disturbed") == _mean_returns(tmp_path / "undisturbed")


@pytest.mark.timeout(120)
def test_killing_the_master_stops_the_run_with_its_checkpoint_and_one_clear_line(nodes, tmp_path):
    nodes.add_node("node-b", cpus=1)
    run, lines = nodes.es_train(tmp_path / "run", "train.generations=1000", "train.eval_every=3"), []
    _progress(run, lines, 1)
    master = next(entry for entry in nodes.processes() if entry["role"] == "master")
    os.kill(master["pid"], signal.SIGKILL)
    killed = time.monotonic()
    _, checkpoint = _stopped(run, lines, rf"the samplers' backend cannot be reached: .*master at {nodes.address} "
                                         r"is gone.*")
    assert time.monotonic() - killed < 20  # noticed within a second or two, never a hang
    assert checkpoint == tmp_path / "run" / "ck" / "solver.h5"


@pytest.mark.timeout(180)
def test_a_node_that_joins_mid_run_gets_samplers_and_the_sync_result_stays_the_same(nodes, tmp_path):
    run, lines = nodes.es_train(tmp_path / "grown", "train.generations=1000", "train.eval_every=3",
                           "train.workers=1", "train.max_workers=3"), []
    _progress(run, lines, 1)
    joined = nodes.add_node("node-b", cpus=2)
    _read_until(run, lines, r"^es-train: sampler 2 made \(room appeared\): 3 of at most 3$")
    grown = _progress(run, lines)
    served = []
    while not (len(served) == 2 and min(served) >= 2):  # created, then at least one evaluation each
        _progress(run, lines, grown + 1)
        served = _served_on(nodes, joined["address"])
    run.send_signal(signal.SIGINT)
    out = _finish(run, lines)
    assert run.returncode == 130, out
    assert "es-train: sampler 1 made (room appeared): 2 of at most 3" in out
    generations = int(read_checkpoint(tmp_path / "grown" / "ck" / "solver.h5")[0]["generation"])
    reference = _undisturbed(tmp_path / "undisturbed", f"train.generations={generations}", "train.eval_every=3",
                             "train.workers=1")
    _assert_same_end(tmp_path / "grown" / "ck" / "solver.h5", reference.checkpoint_path)
    assert _mean_returns(tmp_path / "grown") == _mean_returns(tmp_path / "undisturbed")


def _served_on(cluster: Cluster, address: str) -> list[int]:
    """Calls served by each Sampler on the node at ``address`` (its creation is the first)."""
    status = cluster.status()
    node = next(node["id"] for node in status["nodes"] if node["address"] == address)
    return [actor["calls_served"] for actor in status["actors"]
            if actor["class"] == "Sampler" and actor["node"] == node]


@pytest.mark.timeout(180)
def test_an_async_run_that_loses_a_node_draws_other_candidates_and_goes_on(three_nodes, tmp_path):
    nodes = three_nodes
    run, lines = nodes.es_train(tmp_path / "async", "train.mode=async", "train.generations=1000",
                                "train.eval_every=2"), []
    victim, recovered = _kill_a_sampler_node(nodes, run, lines)
    after = _progress(run, lines, recovered + 2)
    run.send_signal(signal.SIGINT)
    out = _finish(run, lines)
    assert run.returncode == 130, out
    assert re.search(rf"1 worker\(s\) lost \(node {victim}\), \d+ candidate\(s\) re-drawn, 1 worker\(s\) left", out)
    rows = _column(tmp_path / "async", "generation")
    assert [int(row) for row in rows] == list(range(1, len(rows) + 1)) and len(rows) >= after


def _column(folder: Path, name: str) -> list[str]:
    with open(folder / "progress.csv", newline="") as log:
        return [row[name] for row in csv.DictReader(log)]
