"""Solvers (ask/tell), optimizers, fitness shaping, their state round trips, and the layout every
registered solver declares for its checkpointed state."""
import h5py
import numpy as np
import pytest

from evokit_py.checkpoint import SolverCheckpointError, read_checkpoint, write_checkpoint
from evokit_py.checkpoint_checks import check_layout
from evokit_py.config import parse_config
from evokit_py.noise import NoiseSource, NoiseTable
from evokit_py.optimizers import SGD, Adam, Momentum
from evokit_py.solvers import BasicES, centered_rank, make_solver, solver_types
from parl_lite.common.datasets import DatasetError, dataset_names
from es_helpers import rosenbrock, sphere


def _solver(solver_cfg, x0, noise=None):
    config = parse_config({"solver": solver_cfg}).solver
    seed = config.sampling.gaussian_sampling.seed
    return make_solver(config, np.asarray(x0, dtype=float), noise or NoiseSource(seed, len(x0)))


def _minimise(solver, f, target, budget):
    evaluations = 0
    while evaluations < budget:
        infos, basis = solver.ask(), solver.basis()
        values = [f(basis.candidate(info, solver.noise)) for info in infos]
        evaluations += len(values)
        solver.tell(infos, [-v for v in values])
        if min(values) < target:
            return evaluations
    return None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cma_es_sphere_and_rosenbrock_within_pycma_ballpark(seed):
    # pycma (lambda=10, n=10) needs about 1,300-1,600 evaluations on the sphere and 5,500-7,500 on
    # Rosenbrock to reach 1e-8; allow a margin above that, none below.
    es = {"type": "CMA_ES", "population_size": 10,
          "sampling": {"gaussian_sampling": {"std": 0.5, "seed": seed, "cached": False}}}
    sphere_evals = _minimise(_solver(es, np.ones(10)), sphere, 1e-8, 3000)
    rosen_evals = _minimise(_solver(es, np.zeros(10)), rosenbrock, 1e-8, 12000)
    assert sphere_evals is not None and 1000 <= sphere_evals <= 2000, sphere_evals
    assert rosen_evals is not None and 4000 <= rosen_evals <= 10000, rosen_evals


def test_cma_es_with_the_shared_noise_table():
    with NoiseTable.create(3, 100_000) as table:
        es = {"type": "CMA_ES", "population_size": 10, "sampling": {"gaussian_sampling": {"std": 0.5, "seed": 3}}}
        assert _minimise(_solver(es, np.ones(10), NoiseSource(3, 10, table)), sphere, 1e-8, 3000) is not None


def test_basic_es_descends_the_sphere_with_each_optimizer():
    for optimizer in ({"type": "ADAM", "base_lr": 0.05}, {"type": "SGD", "base_lr": 0.05},
                      {"type": "MOMENTUM", "base_lr": 0.05}):
        es = {"type": "BASIC_ES", "population_size": 20, "optimizer": optimizer,
              "sampling": {"gaussian_sampling": {"std": 0.1, "cached": False, "seed": 1}}}
        solver = _solver(es, np.full(5, 2.0))
        start = sphere(solver.solution())
        _minimise(solver, sphere, -1, 20 * 100)
        assert sphere(solver.solution()) < 0.05 * start, optimizer


def test_basic_es_mirrored_pairs_and_gradient_direction():
    es = {"population_size": 4, "optimizer": {"type": "SGD", "base_lr": 1.0},
          "fitness_shaping": "none", "sampling": {"gaussian_sampling": {"std": 1.0, "cached": False}}}
    solver = _solver(es, np.zeros(3))
    infos = solver.ask()
    assert [i.sign for i in infos] == [1, -1, 1, -1] and infos[0].seed == infos[1].seed
    assert solver.ask() == infos  # asking again in the same generation gives the same infos
    eps = [solver.noise.get(i).astype(float) for i in infos]
    solver.tell(infos, [1.0, 0.0, 0.0, 0.0])
    assert np.allclose(solver.solution(), eps[0] / 4)


def test_ga_keeps_the_elite_and_improves():
    ga = {"type": "GA", "population_size": 20, "ga": {"elite_count": 2, "truncation": 0.25},
          "sampling": {"gaussian_sampling": {"std": 0.3, "cached": False}}}
    solver = _solver(ga, np.full(4, 3.0))
    best = []
    for _ in range(40):
        infos, basis = solver.ask(), solver.basis()
        values = [-sphere(basis.candidate(i, solver.noise)) for i in infos]
        solver.tell(infos, values)
        best.append(-sphere(solver.solution()))
        assert [i.sign for i in solver.ask()[:2]] == [0, 0]
    assert all(b2 >= b1 for b1, b2 in zip(best, best[1:]))  # elitism on a noise-free function
    assert -best[-1] < 0.05 * sphere(np.full(4, 3.0))


@pytest.mark.parametrize("kind", ["BASIC_ES", "CMA_ES", "GA", "ARS"])
def test_state_dict_round_trip_continues_identically(kind):
    cfg = {"type": kind, "population_size": 8, "sampling": {"gaussian_sampling": {"std": 0.3, "cached": False}}}
    a, b = _solver(cfg, np.ones(6)), _solver(cfg, np.ones(6))
    for _ in range(3):
        infos, basis = a.ask(), a.basis()
        a.tell(infos, [-sphere(basis.candidate(i, a.noise)) for i in infos])
    b.load_state_dict({k: np.array(v) for k, v in a.state_dict().items()})
    for solver in (a, b):
        for _ in range(2):
            infos, basis = solver.ask(), solver.basis()
            solver.tell(infos, [-sphere(basis.candidate(i, solver.noise)) for i in infos])
    assert np.array_equal(a.solution(), b.solution())


def test_tell_refuses_mismatched_fitness():
    solver = _solver({"population_size": 4, "sampling": {"gaussian_sampling": {"cached": False}}}, np.zeros(2))
    with pytest.raises(ValueError, match="4 sampling infos"):
        solver.tell(solver.ask(), [1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        solver.tell(solver.ask(), [1.0, np.nan, 0.0, 0.0])


def test_optimizers_step_against_the_gradient():
    grad = np.array([1.0, -2.0])
    assert np.allclose(SGD(2, 0.1).step(np.zeros(2), grad), [-0.1, 0.2])
    momentum = Momentum(2, 0.1, mu=0.5)
    momentum.step(np.zeros(2), grad)
    assert np.allclose(momentum.velocity, 0.5 * grad)
    adam = Adam(2, 0.1)
    assert np.allclose(adam.step(np.zeros(2), grad), [-0.1, 0.1], atol=1e-6)  # first Adam step ~ lr*sign
    restored = Adam(2, 0.1)
    restored.load_state_dict(adam.state_dict())
    assert np.array_equal(restored.step(np.zeros(2), grad), adam.step(np.zeros(2), grad))


def test_centered_rank():
    assert np.allclose(centered_rank([10.0, -3.0, 7.0, 100.0]), [1 / 6, -0.5, -1 / 6, 0.5])


def _checkpoint_of(path, config, solver, state=None):
    """Write ``solver`` (or the ``state`` given) to a checkpoint at ``path``, as es-train does."""
    write_checkpoint(path, solver_type=config["solver"]["type"], config_yaml=parse_config(config).to_yaml(),
                     noise_seed=solver.noise.seed, params=solver.solution(),
                     solver_state=solver.state_dict() if state is None else state,
                     obs_stats={"count": np.asarray(0.0), "sum": np.zeros(3), "sumsq": np.zeros(3)})


@pytest.mark.parametrize("solver_type", solver_types())  # the built-in ones and every installed plugin's
@pytest.mark.parametrize("diagonal", [False, True])
def test_every_registered_solver_declares_the_layout_of_its_state(tmp_path, solver_type, diagonal):
    config = {"solver": {"type": solver_type, "population_size": 6, "cma_es": {"diagonal": diagonal},
                         "sampling": {"gaussian_sampling": {"std": 0.3, "cached": False}}}}
    solver = _solver(config["solver"], np.ones(5))
    for _ in range(2):  # a state with history, parents, paths: more than at the start
        infos, basis = solver.ask(), solver.basis()
        solver.tell(infos, [-sphere(basis.candidate(i, solver.noise)) for i in infos])
    layout = type(solver).state_layout(parse_config(config).solver, 5)
    undeclared = sorted(set(solver.state_dict()) - set(layout.shapes))
    assert not undeclared, f"{solver_type}: its state_layout does not name {undeclared}"
    _checkpoint_of(tmp_path / "s.h5", config, solver)
    _, groups = read_checkpoint(tmp_path / "s.h5")  # the datasets checked against that layout
    assert set(groups["solver"]) == set(solver.state_dict())


class _Undeclared(BasicES):
    """A solver that keeps a dataset its layout does not declare."""

    def state_dict(self):
        return {**super().state_dict(), "scratch": np.zeros(3)}


def test_a_state_dataset_outside_the_solver_s_layout_is_refused(tmp_path):
    config = {"solver": {"type": "BASIC_ES", "population_size": 4}}
    solver = _solver(config["solver"], np.zeros(5))
    _checkpoint_of(tmp_path / "s.h5", config, solver, {**solver.state_dict(), "scratch": np.zeros(3)})
    with pytest.raises(SolverCheckpointError, match=r"solver/scratch: not part of BasicES's state \(its datasets: "
                                                    r"generation, sigma, dropped_samples, optimizer/t"):
        read_checkpoint(tmp_path / "s.h5")
    undeclared = _Undeclared.from_config(parse_config(config).solver, np.zeros(5), solver.noise)
    _checkpoint_of(tmp_path / "u.h5", config, undeclared)
    with h5py.File(tmp_path / "u.h5", "r") as file:
        datasets = {group: {name: file[group][name] for name in dataset_names(file[group])}
                    for group in ("solver", "obs_stats")}
        datasets.update(params={"params": file["params"]}, extra={})
        with pytest.raises(DatasetError, match=r"solver/scratch: not part of _Undeclared's state"):
            check_layout(datasets, _Undeclared, parse_config(config).solver, 0)
