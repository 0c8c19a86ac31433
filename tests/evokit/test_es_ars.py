"""ARS (Mania, Guy and Recht 2018): the update against the paper's formula computed by hand, top-b
selection, its config keys, its checkpoints' layout, and the reward shift."""
import numpy as np
import pytest

from evokit_py.checkpoint import SolverCheckpointError, read_checkpoint, write_checkpoint
from evokit_py.config import ConfigError, resolve_config
from evokit_py.noise import NoiseSource
from evokit_py.solvers import ARS, make_solver


def _paper_step(theta, deltas, plus, minus, top, alpha):
    """Algorithm 2 of the paper, line by line: the b directions with the largest max(r+, r-), the
    std of their 2b returns, the step."""
    order = sorted(range(len(plus)), key=lambda k: -max(plus[k], minus[k]))[:top]
    kept = [plus[k] for k in order] + [minus[k] for k in order]
    sigma_r = np.std(kept)
    return theta + alpha / (top * sigma_r) * sum((plus[k] - minus[k]) * deltas[k] for k in order)


@pytest.mark.parametrize("directions, top", [(4, 4), (8, 3), (1, 1)])
def test_ars_step_is_the_papers_update(directions, top):
    rng = np.random.default_rng(directions)
    theta = rng.standard_normal(6)
    solver = ARS(theta, NoiseSource(seed=3, dim=6), directions=directions, top_directions=top, step_size=0.02,
                 sigma=0.05)
    infos = solver.ask()
    assert len(infos) == 2 * directions and solver.group_size == 2
    assert [info.sign for info in infos] == [1, -1] * directions
    returns = rng.normal(100.0, 30.0, size=2 * directions)
    deltas = [solver.noise.get(info).astype(np.float64) for info in infos[0::2]]
    candidates = solver.basis().candidates(infos, solver.noise)
    np.testing.assert_allclose(candidates[0::2], theta + 0.05 * np.array(deltas))
    np.testing.assert_allclose(candidates[1::2], theta - 0.05 * np.array(deltas))
    solver.tell(infos, returns)
    expected = _paper_step(theta, deltas, returns[0::2], returns[1::2], top, 0.02)
    np.testing.assert_allclose(solver.solution(), expected, rtol=1e-12)


def test_ars_leaves_the_directions_outside_the_top_b_out():
    theta = np.zeros(5)
    returns = np.array([10.0, 1.0, 9.0, 2.0, 3.0, 0.5, 4.0, 3.5])  # max per pair: 10, 9, 3, 4 -> top 2: pairs 0, 1
    solvers = [ARS(theta, NoiseSource(seed=1, dim=5), 4, 2, 0.1, 0.1) for _ in range(2)]
    changed = returns.copy()
    changed[4:] = [0.0, 2.5, 1.0, -7.0]  # pairs 2 and 3 still below the top two
    for solver, fitness in zip(solvers, (returns, changed), strict=True):
        solver.tell(solver.ask(), fitness)
    np.testing.assert_array_equal(solvers[0].solution(), solvers[1].solution())
    assert np.any(solvers[0].solution() != 0)


def test_ars_takes_no_step_when_every_return_is_equal():
    solver = ARS(np.ones(3), NoiseSource(seed=1, dim=3), 2, None, 0.1, 0.1)
    solver.tell(solver.ask(), [5.0] * 4)
    np.testing.assert_array_equal(solver.solution(), np.ones(3))
    assert solver.generation == 1


def test_ars_refuses_what_are_not_its_mirrored_pairs():
    solver = ARS(np.zeros(3), NoiseSource(seed=1, dim=3), 2, None, 0.1, 0.1)
    infos = solver.ask()
    with pytest.raises(ValueError, match="mirrored pairs"):
        solver.tell([infos[1], infos[0], infos[2], infos[3]], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="mirrored pairs"):
        solver.tell([infos[0], infos[3], infos[2], infos[1]], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="top_directions"):
        ARS(np.zeros(3), NoiseSource(seed=1, dim=3), 2, 3, 0.1, 0.1)


def test_ars_climbs_a_concave_function():
    centre = np.linspace(-1.0, 1.0, 10)
    solver = ARS(np.zeros(10), NoiseSource(seed=2, dim=10), directions=8, top_directions=4, step_size=0.05,
                 sigma=0.05)
    for _ in range(300):
        infos = solver.ask()
        candidates = solver.basis().candidates(infos, solver.noise)
        solver.tell(infos, [-float(np.sum((x - centre) ** 2)) for x in candidates])
    # from 4.07 to within the step's own noise (ARS's steps are about alpha long, whatever the returns)
    assert np.sum((solver.solution() - centre) ** 2) < 0.05


def test_ars_from_the_config_keys():
    config = resolve_config(None, ["solver.type=ARS", "solver.population_size=16", "solver.ars.top_directions=4",
                                   "solver.optimizer.base_lr=0.01", "solver.sampling.gaussian_sampling.std=0.025"])
    solver = make_solver(config.solver, np.zeros(5), NoiseSource(seed=7, dim=5))
    assert isinstance(solver, ARS)
    assert (solver.directions, solver.top_directions, solver.step_size, solver.sigma) == (8, 4, 0.01, 0.025)
    every = make_solver(resolve_config(None, ["solver.type=ARS"]).solver, np.zeros(5), NoiseSource(seed=7, dim=5))
    assert every.top_directions == every.directions == 8


@pytest.mark.parametrize("override, message", [
    ("solver.population_size=15", r"solver\.population_size: ARS evaluates each of its directions"),
    ("solver.ars.top_directions=9", r"solver\.ars\.top_directions: must be <= the 8 directions"),
    ("solver.ars.top_directions=0", r"solver\.ars\.top_directions: must be > 0"),
    ("solver.optimizer.type=ADAM", r"solver\.optimizer\.type: ARS steps by optimizer\.base_lr"),
    ("train.mode=async", r"train\.mode: async needs solver\.type BASIC_ES"),
])
def test_ars_config_errors_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        resolve_config(None, ["solver.type=ARS", override])


@pytest.mark.parametrize("dataset, value, message", [
    ("theta", np.zeros(6), r"solver/theta: shape \(6,\), expected \(5,\)"),
    ("history/thetas", np.zeros((1, 6)), r"solver/history/thetas: shape \(1, 6\)"),
    ("mystery", np.zeros(3), r"solver/mystery: not part of ARS's state"),
])
def test_an_ars_checkpoint_is_checked_against_its_layout(tmp_path, dataset, value, message):
    # ARS keeps BASIC_ES's state; its checkpoints are checked against that layout before any value is read
    config = resolve_config(None, ["solver.type=ARS", "solver.population_size=4"])
    solver = make_solver(config.solver, np.zeros(5), NoiseSource(seed=7, dim=5))
    solver.tell(solver.ask(), [1.0, 0.0, 3.0, 2.0])
    stats = {"count": np.asarray(0.0), "sum": np.zeros(4), "sumsq": np.zeros(4)}

    def write(path, state):
        write_checkpoint(path, solver_type="ARS", config_yaml=config.to_yaml(), noise_seed=7,
                         params=solver.solution(), solver_state=state, obs_stats=stats)

    write(tmp_path / "sound.h5", solver.state_dict())
    assert read_checkpoint(tmp_path / "sound.h5")[1]["solver"]["generation"] == 1
    write(tmp_path / "bad.h5", {**solver.state_dict(), dataset: value})
    with pytest.raises(SolverCheckpointError, match=message):
        read_checkpoint(tmp_path / "bad.h5")


def test_the_reward_shift_is_taken_per_step_off_each_candidates_mean_return():
    from evokit_py.training.setup import setup_run

    config = resolve_config(None, ["env.reward_shift=1.5", "env.episodes_per_candidate=2"])
    with setup_run(config) as run:
        fitness = run.fitness({"returns": np.array([10.0, 20.0]), "candidate_steps": np.array([8, 30])})
    np.testing.assert_array_equal(fitness, [10.0 - 1.5 * 4, 20.0 - 1.5 * 15])


def test_the_reward_shift_changes_what_the_solver_maximises_not_the_returns_reported(tmp_path):
    """CartPole pays 1 per step: shifted by 1, every candidate's fitness is 0 and ARS takes no
    step, while the log and the evaluations report CartPole's returns."""
    import csv

    from evokit_py.train import train

    def run(shift, folder):
        config = resolve_config(None, [
            "solver.type=ARS", "solver.population_size=4", "policy.mlp.output_activation=none",
            "policy.mlp.bias=false", f"env.reward_shift={shift}", "train.generations=2", "train.target_return=null",
            f"train.log_dir={folder}", f"train.checkpoint_dir={folder}/checkpoints"])
        result = train(config, backend="inprocess", echo=lambda line: None, progress_bar=False)
        with open(result.csv_path, newline="") as handle:
            return result, list(csv.DictReader(handle))

    result, rows = run(1.0, tmp_path / "shifted")
    assert np.all(result.params == 0)
    assert all(float(row["mean_return"]) >= 8 and float(row["eval_return"]) >= 8 for row in rows)
    moved, _ = run(0.5, tmp_path / "half")
    assert np.any(moved.params != 0)
