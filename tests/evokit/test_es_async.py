"""Asynchronous updates: versioned sampling infos, EvoKit's correction of stale BASIC_ES samples,
refusal beyond max_staleness, es-train's async mode (evaluations between candidates, checkpoint and
resume) and an offline update mixing versions."""
import csv
import dataclasses
import json
import os
import re
import signal
import threading

import numpy as np
import pytest

import parl_lite
from evokit_py.agent import ESAgent
from evokit_py.checkpoint import read_checkpoint
from evokit_py.config import ConfigError, parse_config
from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.offline import sample_generation, update_from_log
from evokit_py.pool import EvaluationPool
from evokit_py.training.evaluations import EvaluationQueue
from evokit_py.training.schedule import _around_preview, async_batches
from evokit_py.training.setup import setup_run
from evokit_py.training.unfinished import UnfinishedGeneration
from evokit_py.basis import Basis
from evokit_py.solvers import StaleSampleError, make_solver
from evokit_py.train import train
from locations import ROOT
from es_helpers import run_config


# this module's run settings, before each test's overrides
RUN = ("train.eval_every=2", "train.eval_episodes=2", "env.max_steps=100", "solver.population_size=8")


def _basic_es(max_staleness=2, mirrored=True, std=0.5, optimizer="SGD"):
    config = parse_config({"solver": {
        "type": "BASIC_ES", "population_size": 4, "mirrored_sampling": mirrored, "fitness_shaping": "none",
        "max_staleness": max_staleness, "optimizer": {"type": optimizer, "base_lr": 1.0},
        "sampling": {"gaussian_sampling": {"std": std, "cached": False, "seed": 3}}}})
    return make_solver(config.solver, np.zeros(3), NoiseSource(3, 3))


def test_infos_carry_their_version_and_read_old_lists():
    solver = _basic_es()
    assert {info.version for info in solver.ask()} == {0}
    solver.tell(solver.ask(), [1.0, 0.0, 0.0, 0.0])
    assert {info.version for info in solver.ask()} == {1}
    assert SamplingInfo.from_list([5, 0, -1, 0]) == SamplingInfo(5, 0, -1, 0, 0)
    info = SamplingInfo(5, 7, 1, 0, 9)
    assert SamplingInfo.from_list(info.to_list()) == info


def test_a_stale_sample_is_corrected_by_the_parameter_difference():
    solver = _basic_es(std=0.5)
    old = solver.ask()
    theta0 = solver.solution()
    solver.tell(old, [1.0, 0.0, 0.0, 0.0])
    theta1 = solver.solution()
    assert not np.allclose(theta0, theta1)
    new = solver.ask()
    mixed = [old[2], new[0], new[1]]  # old[2] was evaluated at theta0 + 0.5 * eps(old[2])
    rewards = [2.0, 1.0, -1.0]
    solver.tell(mixed, rewards)
    # by hand: the perturbation of each sample relative to theta1, in units of std; SGD(lr 1) ascends
    # sum(reward * perturbation) / (n * std) with no fitness shaping
    eps = lambda info: NoiseSource(3, 3).get(info).astype(float)
    perturbations = [eps(old[2]) + (theta0 - theta1) / 0.5, eps(new[0]), -eps(new[1])]
    expected = theta1 + sum(r * p for r, p in zip(rewards, perturbations)) / (3 * 0.5)
    assert np.allclose(solver.solution(), expected)
    assert np.allclose(perturbations[0] * 0.5, theta0 + 0.5 * eps(old[2]) - theta1)


def test_samples_older_than_max_staleness_are_refused_or_dropped():
    solver = _basic_es(max_staleness=1)
    first = solver.ask()
    solver.tell(first, [1.0, 0.0, 0.0, 0.0])
    second = solver.ask()
    solver.tell(second, [0.0, 1.0, 0.0, 0.0])
    current = solver.ask()
    before = solver.solution()
    with pytest.raises(StaleSampleError, match=r"version 0; the solver keeps versions 1\.\.2 \(solver.max_staleness is 1\)"):
        solver.tell(first[:1] + current[:2], [1.0, 2.0, 3.0])
    assert solver.generation == 2 and np.array_equal(solver.solution(), before)  # refused: nothing changed
    assert solver.tell(second[:1] + current[:2], [1.0, 2.0, 3.0]) == 0  # one version old: kept
    assert solver.tell(first[:2] + solver.ask()[:2], [1.0, 2.0, 3.0, 4.0], stale="drop") == 2
    assert solver.dropped_samples == 2 and solver.generation == 4
    with pytest.raises(ValueError, match="version 9"):
        solver.tell([SamplingInfo(1, 0, 1, 0, 9)], [1.0])


def test_infos_carry_their_preview_and_read_lists_without_one():
    info = SamplingInfo(5, 7, -1, 0, 9, 4)
    assert SamplingInfo.from_list(info.to_list()) == info and len(info.to_list()) == 6
    assert SamplingInfo.from_list([5, 7, -1, 0, 9]) == SamplingInfo(5, 7, -1, 0, 9, 0)


@pytest.mark.parametrize("optimizer", ["SGD", "ADAM"])
def test_a_preview_is_the_update_of_the_results_so_far_and_leaves_the_solver_as_it_was(optimizer):
    solver, twin = _basic_es(optimizer=optimizer), _basic_es(optimizer=optimizer)
    for s in (solver, twin):  # a first update, so that Adam has state to keep
        s.tell(s.ask(), [1.0, 0.0, -1.0, 0.5])
    infos = solver.ask()
    state = solver.state_dict()
    preview = solver.preview(infos[:2], [1.0, -1.0])
    assert solver.generation == 1 and state.keys() == solver.state_dict().keys()
    assert all(np.array_equal(value, state[key]) for key, value in solver.state_dict().items())
    twin.tell(infos[:2], [1.0, -1.0])
    assert np.array_equal(solver.preview_basis(preview).centers[0], twin.solution())
    assert solver.previews[preview][0] == 2  # a preview of version 2


def test_a_candidate_drawn_around_a_preview_is_corrected_by_the_preview_s_difference():
    solver = _basic_es(std=0.5)
    first = solver.ask()
    preview = solver.preview(first[:2], [1.0, 0.0])  # made while first[2:] still run
    centre = solver.preview_basis(preview).centers[0]
    ahead = dataclasses.replace(solver.ask(extra_round=1)[0], version=1, preview=preview)  # past the batch
    solver.tell(first, [1.0, 0.0, 0.0, 0.0])
    theta1 = solver.solution()
    assert not np.allclose(centre, theta1)  # the preview missed the last pair's results
    new = solver.ask()
    rewards = [2.0, 1.0, -1.0]
    solver.tell([ahead, new[0], new[1]], rewards)
    # by hand, as for a stale sample: ahead was evaluated at centre + 0.5 * eps, i.e. at the
    # perturbation eps + (centre - theta1) / 0.5 of theta1
    eps = lambda info: NoiseSource(3, 3).get(info).astype(float)
    perturbations = [eps(ahead) + (centre - theta1) / 0.5, eps(new[0]), -eps(new[1])]
    expected = theta1 + sum(r * p for r, p in zip(rewards, perturbations)) / (3 * 0.5)
    assert np.allclose(solver.solution(), expected)
    evaluated = Basis(centre[None], 0.5).candidate(ahead, NoiseSource(3, 3))
    assert np.allclose(perturbations[0] * 0.5, evaluated - theta1)


def test_previews_age_with_their_version_and_are_not_checkpointed():
    solver = _basic_es(max_staleness=1)
    infos = solver.ask()
    preview = solver.preview(infos, [1.0, 0.0, 0.0, 0.0])
    ahead = dataclasses.replace(solver.ask(extra_round=1)[0], version=1, preview=preview)
    with pytest.raises(ValueError, match="preview 1 says version 0, that preview is of version 1"):
        solver.tell([dataclasses.replace(ahead, version=0)], [1.0])
    solver.tell(infos, [1.0, 0.0, 0.0, 0.0])
    twin = _basic_es(max_staleness=1)
    twin.load_state_dict({k: np.array(v) for k, v in solver.state_dict().items()})
    with pytest.raises(StaleSampleError, match="preview 1, which this solver does not hold"):
        twin.tell([ahead], [1.0])
    solver.tell(solver.ask(), [1.0, 0.0, 0.0, 0.0])
    assert preview in solver.previews  # version 1, one update old: kept (max_staleness 1)
    solver.tell(solver.ask(), [1.0, 0.0, 0.0, 0.0])
    assert solver.previews == {}
    with pytest.raises(StaleSampleError, match=r"of version 1; the solver keeps versions 2\.\.3"):
        solver.tell([ahead], [1.0])
    assert solver.preview([ahead], [1.0]) == 0  # nothing recent enough: no preview


def test_held_results_drawn_around_a_preview_are_corrected_after_a_resume_as_before():
    """An async run stopped after an update holds a pair drawn around the preview of that update:
    its checkpoint keeps the pair with the preview, and the resumed solver's next update, with the
    pair first, is the one the run would have made."""
    solver = _basic_es(max_staleness=1)
    infos = solver.ask()
    preview = solver.preview(infos[:2], [1.0, 0.0])
    ahead = [dataclasses.replace(info, version=1, preview=preview) for info in solver.ask(extra_round=1)[:2]]
    solver.tell(infos, [1.0, 0.0, 0.5, 0.2])
    row = {"returns": np.array([3.0]), "steps": np.array([9]), "obs_sum": np.zeros((1, 4)),
           "obs_sumsq": np.zeros((1, 4)), "cpu_seconds": np.zeros(1)}
    extra = UnfinishedGeneration(arrived=[(info, row) for info in ahead]).to_extra(solver)
    assert list(extra["unfinished/previews/ids"]) == [preview] and list(extra["unfinished/previews/versions"]) == [1]
    twin = _basic_es(max_staleness=1)
    twin.load_state_dict({key: np.array(value) for key, value in solver.state_dict().items()})
    held = UnfinishedGeneration.from_extra(extra, 1).hold(twin)
    assert [info for info, _ in held] == ahead
    more = solver.ask()[:2]
    solver.tell([*ahead, *more], [3.0, 3.0, 1.0, 0.0])
    twin.tell([info for info, _ in held] + more, [3.0, 3.0, 1.0, 0.0])
    assert np.array_equal(twin.solution(), solver.solution()) and twin.dropped_samples == 0
    assert twin.preview(more, [1.0, 0.0]) == preview + 1  # new previews get other ids


def test_solvers_that_do_not_correct_stale_samples_cannot_preview():
    config = parse_config({"solver": {"type": "CMA_ES", "population_size": 4}})
    solver = make_solver(config.solver, np.zeros(3), NoiseSource(3, 3))
    with pytest.raises(NotImplementedError, match="CMAES cannot preview"):
        solver.preview(solver.ask(), [1.0, 0.0, 0.0, 0.0])


def test_kept_versions_are_bounded_and_survive_a_state_round_trip():
    solver = _basic_es(max_staleness=3)
    asked = []
    for _ in range(10):
        asked.append(solver.ask())
        solver.tell(asked[-1], [1.0, 0.0, -1.0, 0.5])
    assert sorted(solver.history) == [7, 8, 9]
    twin = _basic_es(max_staleness=3)
    twin.load_state_dict({k: np.array(v) for k, v in solver.state_dict().items()})
    for s in (solver, twin):
        s.tell(asked[7][:2] + s.ask()[:2], [1.0, 2.0, 3.0, 4.0])
    assert np.array_equal(solver.solution(), twin.solution())


def test_async_mode_needs_a_solver_that_corrects_stale_samples():
    with pytest.raises(ConfigError, match="train.mode: async needs solver.type BASIC_ES"):
        parse_config({"train": {"mode": "async"}, "solver": {"type": "CMA_ES"}})


@pytest.mark.timeout(60)
def test_async_with_one_in_process_worker_is_the_sync_run(tmp_path):
    sync = train(run_config(tmp_path / "sync", *RUN, "train.generations=3"), backend="inprocess", echo=lambda line: None)
    asynchronous = train(run_config(tmp_path / "async", *RUN, "train.generations=3", "train.mode=async"),
                         backend="inprocess", echo=lambda line: None)
    assert np.array_equal(sync.params, asynchronous.params) and sync.episodes == asynchronous.episodes


def _evaluations(result) -> list[tuple[int, float]]:
    """(generation, eval_return) of every row of a run's progress.csv."""
    with open(result.csv_path, newline="") as handle:
        return [(int(row["generation"]), float(row["eval_return"])) for row in csv.DictReader(handle)]


@pytest.mark.timeout(60)
def test_async_evaluations_match_sync_ones_row_for_row(tmp_path):
    """One in-process worker: an evaluation requested after update g runs before the next batch's
    candidates and lands in row g when it arrives; same solution, normalisation and episodes as sync."""
    overrides = ["train.generations=5", "train.eval_every=1"]
    sync = train(run_config(tmp_path / "sync", *RUN, *overrides), backend="inprocess", echo=lambda line: None)
    asynchronous = train(run_config(tmp_path / "async", *RUN, *overrides, "train.mode=async"), backend="inprocess",
                         echo=lambda line: None)
    assert _evaluations(asynchronous) == _evaluations(sync)
    assert [generation for generation, _ in _evaluations(sync)] == [1, 2, 3, 4, 5]
    assert asynchronous.best_eval_return == sync.best_eval_return
    assert np.array_equal(asynchronous.params, sync.params)  # the best evaluated solution, kept when requested


@pytest.mark.timeout(60)
def test_async_stops_as_soon_as_an_evaluation_reaches_the_target(tmp_path):
    """One in-process worker: the evaluation after update g runs before any candidate of the next
    batch, so async stops at sync's generation (not after one more batch), with sync's weights."""
    overrides = ["train.generations=20", "train.eval_every=1", "train.target_return=60"]
    sync = train(run_config(tmp_path / "sync", *RUN, *overrides), backend="inprocess", echo=lambda line: None)
    asynchronous = train(run_config(tmp_path / "async", *RUN, *overrides, "train.mode=async"), backend="inprocess",
                         echo=lambda line: None)
    assert sync.solved and 1 < sync.generations < 20
    assert asynchronous.solved and asynchronous.generations == sync.generations
    assert asynchronous.summary.solved_at == sync.summary.solved_at == sync.steps
    assert np.array_equal(asynchronous.params, sync.params) and _evaluations(asynchronous) == _evaluations(sync)


def _open_gate(gate) -> None:
    try:
        os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))  # opens the gate (its reader waits)
    except OSError:  # no reader: the gated episode never started
        pass


@pytest.mark.timeout(90)
def test_closing_the_async_schedule_does_not_wait_for_a_candidate_still_running(tmp_path):
    """Training stops (the schedule is closed, the pool closed) while one worker's first episode
    waits at a gate: neither waits for it, and the gated worker ends once the gate opens."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    config = run_config(tmp_path, *RUN, "env.id=gated_env:GatedCartPole-v0", f"env.kwargs={{gate: {gate}}}",
                     "solver.population_size=2", "train.mode=async")
    run = setup_run(config)
    pool = EvaluationPool(config, run.policy.to_bytes(), run.noise_spec(), 2, "remote")
    batches = async_batches(run, pool)
    stopper = threading.Thread(target=lambda: (batches.close(), pool.close()))
    try:
        assert len(next(batches).infos) == 2  # the other worker's pair, while the gated one waits
        stopper.start()
        stopper.join(timeout=30)
        assert not stopper.is_alive(), "closing the schedule or the pool waited for the gated candidate"
    finally:
        _open_gate(gate)
        if stopper.is_alive():
            stopper.join(timeout=30)
        pool.close()
        run.close()
        parl_lite.shutdown()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("lookahead", [True, False])
def test_a_candidate_handed_out_past_a_full_batch_is_drawn_around_a_preview(tmp_path, lookahead):
    """Population 4, two workers: one worker's first pair waits at a gate, so the other one's pair
    and the gated pair make up the batch, and the other worker's next pair is handed out past it.
    With train.lookahead it is drawn around the preview of the update its first pair's results make
    (and arrives first, closing the batch); without, around the current parameters."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    config = run_config(tmp_path, *RUN, "env.id=gated_env:GatedCartPole-v0", f"env.kwargs={{gate: {gate}}}",
                     "solver.population_size=4", "train.mode=async", f"train.lookahead={str(lookahead).lower()}")
    run = setup_run(config)
    solver = run.solver
    twin = make_solver(config.solver, solver.solution(), solver.noise)
    pool = EvaluationPool(config, run.policy.to_bytes(), run.noise_spec(), 2, "remote")
    batches = async_batches(run, pool)
    try:
        batch = next(batches)
        first, ahead = batch.infos[:2], batch.infos[2:]
        assert [(info.version, info.preview) for info in first] == [(0, 0), (0, 0)]
        if not lookahead:
            assert [(info.version, info.preview) for info in ahead] == [(0, 0), (0, 0)] and solver.previews == {}
            return
        [preview] = {info.preview for info in ahead}
        assert preview > 0 and {info.version for info in ahead} == {1}
        twin.tell(first, batch.result["returns"][:2])
        assert np.array_equal(solver.preview_basis(preview).centers[0], twin.solution())
        # the schedule told the solver the batch: the early preview pair was corrected, not refused
        assert batch.generation == 0 and solver.generation == 1 and solver.dropped_samples == 0
    finally:
        _open_gate(gate)
        batches.close()
        pool.close()
        run.close()
        parl_lite.shutdown()


def test_candidates_around_a_preview_are_normalised_with_the_results_so_far():
    config = parse_config({"solver": {"population_size": 4}})
    run = setup_run(config)
    try:
        run.obs_stats.add(np.ones(4), np.full(4, 2.0), 2)
        infos = run.solver.ask()
        rows = [(info, {"returns": np.array([r]), "steps": np.array([3]), "obs_sum": np.full((1, 4), 6.0),
                        "obs_sumsq": np.full((1, 4), 20.0)}) for info, r in zip(infos[:2], [1.0, 0.0])]
        moved, (basis, mean, std) = _around_preview(run, rows, infos[2:], ({}, None, None))
        [preview] = {info.preview for info in moved}
        assert [(info.seed, info.offset, info.sign) for info in moved] == \
            [(info.seed, info.offset, info.sign) for info in infos[2:]]
        assert np.array_equal(basis["centers"], run.solver.preview_basis(preview).centers)
        stats = run.obs_stats.copy()
        for _ in rows:
            stats.add(np.full(4, 6.0), np.full(4, 20.0), 3)
        assert stats.count == 8 and np.allclose(mean, stats.mean()) and np.allclose(std, stats.std(run.config.observation_stats.std_floor))
    finally:
        run.close()


@pytest.mark.timeout(60)
def test_an_evaluation_cut_short_plays_only_its_missing_episodes(tmp_path):
    """When training stops, an evaluation with some episodes played hands back the others only."""
    config = run_config(tmp_path, *RUN, "train.eval_episodes=3")
    run = setup_run(config)
    pool = EvaluationPool(config, run.policy.to_bytes(), run.noise_spec(), 1, "inprocess")
    try:
        queue = EvaluationQueue()
        queue.request(0, Basis(run.solver.solution()[None], 0.0).to_dict(), None, None, [[11], [12], [13]])
        call = queue.next_call()
        result = pool.workers[0].evaluate(*call.args)
        queue.record(call.purpose, result)
        [(generation, (_, _, _, seeds), played)] = queue.outstanding()
        assert generation == 0 and seeds == [[12], [13]] and played == [float(result["returns"][0])]
        assert queue.outstanding() == [] and queue.next_call() is None
    finally:
        pool.close()
        run.close()


@pytest.mark.timeout(60)
def test_a_resumed_async_run_writes_the_rows_and_runs_the_evaluations_held_at_its_checkpoint(tmp_path):
    """Stopped by Ctrl-C after generation 3, row 3 still waits for its evaluation: the checkpoint
    carries the row and the solution to evaluate. With the row missing from the CSV as well (a kill
    before it was written), the resumed run writes it and runs its evaluation: the evaluations are
    the uninterrupted run's, row for row (one in-process worker: async is the sync run)."""
    overrides = ["train.eval_every=1", "train.mode=async"]

    def stop_after_generation_3(line: str) -> None:
        if re.match(r"\S+ generations +3/", line):
            os.kill(os.getpid(), signal.SIGINT)  # es-train's first Ctrl-C: stop after this generation

    first = train(run_config(tmp_path / "cut", *RUN, *overrides, "train.generations=6"), backend="inprocess",
                  echo=stop_after_generation_3)
    assert first.interrupted and first.generations == 3
    csv_path = tmp_path / "cut" / "run" / "progress.csv"
    lines = csv_path.read_text().splitlines()
    assert lines[-1].startswith("3,") and "nan" in lines[-1]  # its evaluation never ran
    csv_path.write_text("\n".join(lines[:-1]) + "\n")  # as if killed before the row was written
    resumed = train(run_config(tmp_path / "cut", *RUN, *overrides, "train.generations=5"), resume=True,
                    backend="inprocess", echo=lambda line: None)
    whole = train(run_config(tmp_path / "whole", *RUN, *overrides, "train.generations=5"), backend="inprocess",
                  echo=lambda line: None)
    assert [generation for generation, _ in _evaluations(resumed)] == [1, 2, 3, 4, 5]
    assert _evaluations(resumed) == _evaluations(whole)


@pytest.mark.timeout(120)
def test_async_evaluations_on_the_pool_fill_every_row(tmp_path):
    config = run_config(tmp_path, *RUN, "train.generations=8", "train.eval_every=1", "train.mode=async",
                     "env.max_steps=200", "solver.max_staleness=8")
    try:
        result = train(config, backend="remote", echo=lambda line: None)
    finally:
        parl_lite.shutdown()
    evaluations = _evaluations(result)
    assert [generation for generation, _ in evaluations] == list(range(1, 9))
    assert all(np.isfinite(value) for _, value in evaluations)
    assert result.best_eval_return == max(value for _, value in evaluations)


@pytest.mark.timeout(180)
def test_async_training_on_the_pool_checkpoints_and_resumes(tmp_path):
    lines = []
    config = run_config(tmp_path, *RUN, "train.generations=4", "train.checkpoint_every=2", "train.mode=async",
                     "solver.max_staleness=3")
    try:
        first = train(config, backend="remote", echo=lines.append)
        assert first.generations == 4 and "async updates" in lines[0]
        attrs, groups = read_checkpoint(first.checkpoint_path)
        assert int(attrs["generation"]) == 4
        assert list(groups["solver"]["history/versions"]) == [1, 2, 3]
        more = run_config(tmp_path, *RUN, "train.generations=7", "train.checkpoint_every=2", "train.mode=async",
                       "solver.max_staleness=3")
        lines.clear()
        second = train(more, resume=True, backend="remote", echo=lines.append)
    finally:
        parl_lite.shutdown()
    assert lines[0].startswith(f"resumed from {first.checkpoint_path} at generation 4")
    assert second.generations == 7 and second.episodes > first.episodes
    rows = (tmp_path / "run" / "progress.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[0]) for row in rows] == list(range(1, 8))
    _, groups = read_checkpoint(second.checkpoint_path)
    assert list(groups["solver"]["history/versions"]) == [4, 5, 6]


@pytest.mark.timeout(120)
def test_an_offline_update_mixes_samples_of_several_versions(tmp_path):
    config = run_config(tmp_path, *RUN, "solver.max_staleness=2")
    checkpoint, log = tmp_path / "solver.h5", tmp_path / "samples.jsonl"
    assert sample_generation(config, checkpoint, log, shard=0, shards=2) == 0
    assert sample_generation(config, checkpoint, log, shard=1, shards=2) == 0
    assert update_from_log(config, checkpoint, log) == 1
    # a slow sampler still at version 0 (shards 2 and 3: further candidates) and one at version 1
    applied = len(log.read_text().splitlines())
    for shard in (2, 3):
        sample_generation(config, tmp_path / "missing.h5", log, shard=shard, shards=2)  # starts from version 0
    sample_generation(config, checkpoint, log, shard=0, shards=2)
    first = [json.loads(line) for line in log.read_text().splitlines()[:applied]]
    records = [json.loads(line) for line in log.read_text().splitlines()[applied:]]
    assert sorted({r["generation"] for r in records}) == [0, 1]
    assert update_from_log(config, checkpoint, log) == 2
    # the same two updates done by hand
    agent = ESAgent(config)
    try:
        agent.update([SamplingInfo.from_list(i) for r in first for i in r["infos"]],
                     [x for r in first for x in r["rewards"]])
        agent.update([SamplingInfo.from_list(i) for r in records for i in r["infos"]],
                     [x for r in records for x in r["rewards"]])
        _, groups = read_checkpoint(checkpoint)
        assert np.allclose(groups["params"]["params"], agent.solver.solution())
    finally:
        agent.close()
    # a sample older than max_staleness: refused by default, dropped when asked
    sample_generation(config, tmp_path / "missing.h5", log, shard=4, shards=2)  # version 0, now 2 behind
    sample_generation(config, checkpoint, log, shard=1, shards=2)
    update_from_log(config, checkpoint, log)  # version 0 is 2 updates old: still kept (max_staleness 2)
    sample_generation(config, tmp_path / "missing.h5", log, shard=5, shards=2)  # version 0, 3 behind
    with pytest.raises(StaleSampleError, match="max_staleness is 2"):
        update_from_log(config, checkpoint, log)
    sample_generation(config, checkpoint, log, shard=0, shards=2)
    assert update_from_log(config, checkpoint, log, stale="drop") == 4


@pytest.mark.timeout(240)
def test_the_online_offline_script_with_concurrent_samplers(tmp_path):
    import subprocess
    import sys

    root = ROOT
    config_path = tmp_path / "es.yaml"
    config_path.write_text(run_config(tmp_path, *RUN, "env.max_steps=50").to_yaml())
    out = subprocess.run([sys.executable, str(root / "scripts" / "examples" / "es_online_offline.py"), "--config", str(config_path),
                          "--samplers", "2", "--shards", "4", "--cycles", "2", "--workdir", str(tmp_path / "w")],
                         capture_output=True, text=True, timeout=220,
                         env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert "update 2/2: version 2" in out.stdout
    attrs, groups = read_checkpoint(tmp_path / "w" / "solver.h5")
    assert int(attrs["generation"]) == 2
    records = [json.loads(line) for line in (tmp_path / "w" / "samples.jsonl").read_text().splitlines()]
    assert sum(len(r["infos"]) for r in records) >= 16 and int(groups["extra"]["log_lines_applied"]) <= len(records)
