"""A3C and IMPALA (AsyncTrainer) on a cluster of real nodes started through ``parl-lite`` (issue 26):
a node killed mid-run, nodes joining mid-run (one with another token, one with another version, one
that fits), the master killed mid-run."""
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import paddle
import pytest

import parl_lite
from parl_lite import train
from parl_lite.algorithms import A2C, IMPALA
from parl_lite.utils.models import MLPActorCritic

from backends import Cluster, connect_client
from remote_helpers import wait_for_exit
from locations import EXAMPLES



def _impala() -> IMPALA:
    """scripts/examples/train_impala.py's learner."""
    paddle.seed(1)
    return IMPALA(MLPActorCritic(4, 2, 64), sample_batch_steps=11, gamma=0.99, vf_loss_coeff=0.5,
                  clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0, lr=1e-3, max_grad_norm=0.5, clip_c_threshold=1.0,
                  reduction="mean")


def _impala_run(caplog, callback: train.Callback, steps: int, **options) -> tuple:
    """An IMPALA run of scripts/examples/train_impala.py's settings on CartPole-v1 (seed 1): its summary and
    the events it logged."""
    trainer = train.AsyncTrainer(_impala(), "CartPole-v1", num_envs=8, rollout_steps=10, seed=1, **options)
    with caplog.at_level(logging.WARNING, logger="parl_lite.train"):
        summary = trainer.learn(steps, callback=callback)
    return summary, [record.getMessage() for record in caplog.records if record.name == "parl_lite.train"]


def _node_entries(cluster: Cluster) -> dict:
    """The cluster's nodes by address."""
    return {entry["address"]: entry for entry in cluster.processes() if entry["role"] == "node"}


class KillANode(train.Callback):
    """At ``at`` steps, SIGKILL the node (other than the master's) that hosts a rollout actor; then
    note where the actors are."""

    def __init__(self, cluster: Cluster, at: int) -> None:
        self.cluster, self.at = cluster, at
        self.killed: dict | None = None
        self.killed_at_update = 0
        self.actors_after: set = set()  # the node addresses of the actors, some updates after the kill

    def on_step(self, trainer) -> bool:
        addresses = {actor._channel.node.address for actor in trainer.actor_group.actors}
        if self.killed is None and trainer.steps >= self.at:
            master_folder = str(self.cluster.folder / "master")
            self.killed = next(entry for address, entry in _node_entries(self.cluster).items()
                               if address in addresses and entry["cwd"] != master_folder)
            os.kill(self.killed["pid"], signal.SIGKILL)
            self.killed_at_update = trainer.updates
        elif self.killed is not None and not self.actors_after and trainer.updates >= self.killed_at_update + 50:
            self.actors_after = addresses  # >=: a round learns from every rollout that came (two at times)
        return True


@pytest.mark.timeout(420)
def test_impala_on_a_cluster_loses_a_node_replaces_its_actor_and_reaches_475(cluster, caplog):
    connect_client(cluster)
    killer = KillANode(cluster, at=2_000)
    # the first evaluation at 20,000 steps: one at 5,000 reached 500 by luck once, on a loaded machine,
    # and the run ended before the replacement of the actor killed at 2,000 steps was made
    summary, events = _impala_run(caplog, killer, 300_000, actors=2, target=475, eval_every=20_000)
    assert killer.killed is not None and wait_for_exit(killer.killed["pid"], 5)
    assert summary.solved and summary.eval_return >= 475, summary
    lost = [event for event in events if " lost: " in event]
    assert len(lost) == 1 and "IMPALA: rollout actor" in lost[0] and "1 left, making another" in lost[0], events
    assert any("rollout actor 2 made (a replacement): 2 of at most 2" in event for event in events), events
    assert len(killer.actors_after) == 1 and killer.killed["address"] not in killer.actors_after  # on the survivor


BAD_VERSION_NODE = textwrap.dedent("""
    import sys
    import parl_lite.version
    parl_lite.version.__version__ = "0.0.1"    # what another release of parl_lite would say
    from parl_lite.ext.cluster import node
    node.main(sys.argv[1:])
""")


class NodesJoin(train.Callback):
    """At ``at`` steps: a node with a wrong token and one with another parl_lite version try to join,
    then one that fits (2 CPUs); training stops once the actors added on it have each delivered
    ``rollouts`` rollouts (or after ``patience`` seconds)."""

    def __init__(self, cluster: Cluster, at: int, rollouts: int = 3, patience: float = 120.0) -> None:
        self.cluster, self.at, self.rollouts, self.patience = cluster, at, rollouts, patience
        self.refused: dict[str, str] = {}
        self.joined: dict | None = None
        self.updates_when_joined = 0
        self.since = 0.0
        self.status_at_stop: dict = {}

    def on_step(self, trainer) -> bool:
        if self.joined is None and trainer.steps >= self.at:
            self._refused_joins()
            self.joined = self.cluster.add_node("joins", cpus=2)
            self.updates_when_joined, self.since = trainer.updates, time.monotonic()
        if self.joined is None:
            return True
        go_on = not (len(self.served_on_joined()) == 2 and min(self.served_on_joined()) > self.rollouts) and \
            time.monotonic() - self.since < self.patience
        if not go_on:  # the placements while the actors live (those of a closed actor go as its node reports)
            self.status_at_stop = self.cluster.status()
        return go_on

    def served_on_joined(self) -> list[int]:
        """Calls served by the rollout actors on the joined node (their creation is the first)."""
        status = self.cluster.status()
        node_id = next(node["id"] for node in status["nodes"] if node["address"] == self.joined["address"])
        return [actor["calls_served"] for actor in status["actors"]
                if actor["node"] == node_id and actor["class"] in ("RolloutWorker", "OnnxRolloutWorker") and actor["state"] == "alive"]

    def _refused_joins(self) -> None:
        wrong = self.cluster.folder / "wrong-token"
        wrong.write_text("not the token\n")
        wrong.chmod(0o600)
        (self.cluster.folder / "wrong").mkdir()
        result = self.cluster.cli("connect", "--address", self.cluster.address, "--token-file", str(wrong),
                                  cwd=self.cluster.folder / "wrong", check=False)
        assert result.returncode != 0 and "Traceback" not in result.stderr
        self.refused["token"] = result.stderr
        (self.cluster.folder / "old").mkdir()
        result = subprocess.run([sys.executable, "-c", BAD_VERSION_NODE, "--address", self.cluster.address,
                                 "--cpus", "2", "--token-file", self.cluster.token_file,
                                 "--ready-file", str(self.cluster.folder / "old" / "ready")],
                                cwd=self.cluster.folder / "old", env=self.cluster.env, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 1
        self.refused["version"] = result.stderr


@pytest.mark.timeout(300)
def test_nodes_that_join_mid_run_get_rollout_actors_and_misfits_are_refused(small_cluster, caplog):
    cluster = small_cluster  # a node of 1 CPU
    connect_client(cluster)
    joins = NodesJoin(cluster, at=1_000)
    summary, events = _impala_run(caplog, joins, 1_000_000, actors=1, max_actors=3, eval_every=100_000)
    assert "refused our token" in joins.refused["token"]
    assert f"version mismatch: parl_lite {parl_lite.__version__} here, 0.0.1 at" in joins.refused["version"]
    served = joins.served_on_joined()
    assert len(served) == 2 and min(served) > joins.rollouts, served  # two actors added there, both used
    assert summary.updates > joins.updates_when_joined + 2 * joins.rollouts
    assert [node["alive"] for node in cluster.status()["nodes"]] == [True, True]  # the misfits never joined
    client, = joins.status_at_stop["clients"]
    assert sorted(client["nodes"].values()) == [1, 2]
    assert sum("made (room appeared)" in event for event in events) == 2, events
    assert any("3 of at most 3" in event for event in events), events


@pytest.mark.timeout(300)
def test_killing_the_master_stops_an_a3c_run_with_its_checkpoint_and_one_clear_line(cluster, tmp_path):
    checkpoint = tmp_path / "a3c.h5"
    token = Path(cluster.token_file).read_text().strip()
    run = subprocess.Popen([sys.executable, str(EXAMPLES / "train_a3c.py"), "--address", cluster.address,
                            "--save", str(checkpoint), "--eval-every", "500", "--eval-episodes", "2",
                            "--target", "1e9", "--total-steps", "10000000"],
                           cwd=tmp_path, env={**cluster.env, "PARL_LITE_TOKEN": token},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        progress = run.stdout.readline()  # the first evaluation's line: the run is under way
        assert progress.startswith("A3C steps"), progress + run.stderr.read()
        master = next(entry for entry in cluster.processes() if entry["role"] == "master")
        os.kill(master["pid"], signal.SIGKILL)
        killed = time.monotonic()
        _, errors = run.communicate(timeout=60)
    finally:
        run.kill()
        run.wait()
    assert time.monotonic() - killed < 20  # noticed within a second or two; then the checkpoint and the exit
    assert run.returncode == 1 and "Traceback" not in errors, errors
    last = errors.strip().splitlines()[-1]
    stopped = ("RunStopped: A3C on CartPole-v1 stopped at step ", "the rollout actors' backend cannot be reached",
               f"master at {cluster.address} is gone", f"resume with resume='{checkpoint}' (--resume)")
    assert all(part in last for part in stopped), last
    steps = int(last.split("stopped at step ")[1].split(":")[0])
    with h5py.File(checkpoint, "r") as written:
        assert written["trainer"].attrs["steps"] == steps > 0
    parl_lite.Agent(A2C(MLPActorCritic(4, 2, 64))).restore(str(checkpoint))  # a whole checkpoint
