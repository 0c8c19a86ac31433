"""CMA-ES: evaluations to 1e-8 against pycma's, termination, IPOP restarts, the separable variant."""
import numpy as np
import pytest

from evokit_py.config import parse_config
from evokit_py.noise import NoiseSource, StreamNoise
from evokit_py.solvers import CMAParameters, StaleSampleError, make_solver
from es_helpers import rosenbrock, sphere


def ellipsoid(x):
    return float(np.sum(10 ** (6 * np.arange(len(x)) / (len(x) - 1)) * x * x))


def rastrigin(x):
    return float(10 * len(x) + np.sum(x * x - 10 * np.cos(2 * np.pi * x)))


FUNCTIONS = {"sphere": (sphere, 1.0), "ellipsoid": (ellipsoid, 1.0), "rosenbrock": (rosenbrock, 0.0)}
# pycma 4.5.0 (defaults, lambda 10, sigma0 0.5, the starts above), median evaluations to 1e-8 over
# seeds 1-15, measured on this machine: the ceiling our median over 5 seeds must stay under (+5%
# for the last bits of the eigendecomposition, which differ between BLAS builds).
PYCMA_MEDIAN_EVALS = {"sphere": 1360, "ellipsoid": 3920, "rosenbrock": 5210}


def _solver(seed, n=10, lam=10, std=0.5, x0=None, pycma_draws=False, **cma_es):
    kind = cma_es.pop("type", "CMA_ES")
    config = parse_config({"solver": {"type": kind, "population_size": lam, "cma_es": cma_es,
                                      "sampling": {"gaussian_sampling": {"std": std, "seed": seed, "cached": False}}}})
    x0 = np.ones(n) if x0 is None else x0
    noise = StreamNoise(seed, n) if pycma_draws else NoiseSource(seed, n)
    return make_solver(config.solver, np.asarray(x0, dtype=float), noise)


def minimise(solver, f, target=1e-8, budget=20000):
    """Evaluations until a candidate reaches ``target`` (None if the budget or the solver ran out)."""
    evaluations = 0
    while evaluations < budget and solver.stop_reason() is None:
        infos = solver.ask()
        values = [f(x) for x in solver.basis().candidates(infos, solver.noise)]
        evaluations += len(values)
        solver.tell(infos, [-v for v in values])
        if min(values) < target:
            return evaluations
    return None


def _pycma(x0, seed, lam=10, std=0.5):
    cma = pytest.importorskip("cma")
    return cma.CMAEvolutionStrategy(x0, std, {"verbose": -9, "seed": seed, "popsize": lam})


def pycma_evaluations(f, x0, seed, target=1e-8, budget=20000):
    es = _pycma(x0, seed)
    evaluations = 0
    while evaluations < budget:
        candidates = es.ask()
        values = [f(x) for x in candidates]
        evaluations += len(values)
        es.tell(candidates, values)
        if min(values) < target:
            return evaluations
    return budget * 10


@pytest.mark.parametrize("name", FUNCTIONS)
def test_reaches_1e_8_within_pycmas_evaluation_counts(name):
    f, start = FUNCTIONS[name]
    counts = [minimise(_solver(seed, x0=np.full(10, start)), f) for seed in range(5)]
    assert None not in counts, counts
    assert np.median(counts) <= 1.05 * PYCMA_MEDIAN_EVALS[name], counts


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_against_pycma_on_the_same_functions_and_seeds(name):
    """The issue's criterion, on pycma's draws: the same seeds then mean the same samples."""
    f, start = FUNCTIONS[name]
    x0 = np.full(10, start)
    ours = [minimise(_solver(seed, x0=x0, pycma_draws=True), f) or 10 ** 6 for seed in range(1, 6)]
    theirs = [pycma_evaluations(f, x0, seed) for seed in range(1, 6)]
    assert np.median(ours) <= np.median(theirs), (ours, theirs)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_on_pycmas_draws_the_iterates_are_pycmas(name):
    """Mean, step size and covariance after 50 generations (active weights, an eigendecomposition
    per generation at 10-D, hsigma) equal pycma's to rounding, which leaves about 1e-11 σ there; a
    constant or a step that differed would show at 1e-3."""
    f, start = FUNCTIONS[name]
    x0 = np.full(10, start)
    ours, theirs = _solver(1, x0=x0, pycma_draws=True), _pycma(x0, 1)
    for _ in range(50):
        infos = ours.ask()
        ours.tell(infos, [-f(x) for x in ours.basis().candidates(infos, ours.noise)])
        candidates = theirs.ask()
        theirs.tell(candidates, [f(x) for x in candidates])
    assert np.max(np.abs(ours.mean - theirs.mean)) < 1e-9 * theirs.sigma
    assert ours.sigma == pytest.approx(theirs.sigma, rel=1e-9)
    assert ours.C == pytest.approx(theirs.sm.C, rel=1e-9, abs=1e-9 * np.max(theirs.sm.C))


def test_active_weights_follow_the_tutorial():
    params = CMAParameters.create(10, 10, 5)
    assert np.isclose(params.weights[:5].sum(), 1.0) and np.all(params.weights[:5] > 0)
    # negative weights sum to -min(1 + c1/cmu, 1 + 2 mueff-/(mueff + 2), (1 - c1 - cmu)/(n cmu))
    negative = np.log(5.5) - np.log(np.arange(6, 11))
    mueff_minus = negative.sum() ** 2 / np.sum(negative ** 2)
    bound = min(1 + params.c1 / params.cmu, 1 + 2 * mueff_minus / (params.mueff + 2),
                (1 - params.c1 - params.cmu) / (10 * params.cmu))
    assert np.isclose(params.weights[5:].sum(), -bound) and np.all(params.weights[5:] < 0)
    assert np.all(CMAParameters.create(10, 10, 5, active=False).weights[5:] == 0)


@pytest.mark.parametrize("n, lam", [(10, 10), (10, 40), (3, 100), (50, 30)])
def test_the_constants_are_pycmas(n, lam):
    cma = pytest.importorskip("cma")
    es = cma.CMAEvolutionStrategy(np.ones(n), 0.5, {"verbose": -9, "seed": 1, "popsize": lam})
    ours = CMAParameters.create(n, lam, lam // 2)
    theirs = {"c1": es.sp.c1, "cmu": es.sp.cmu, "cc": es.sp.cc, "mueff": es.sp.weights.mueff,
              "cs": es.adapt_sigma.cs, "damps": es.adapt_sigma.damps,
              "chi_n": cma.utilities.math.Mh.chiN(n)}  # what CSA uses (es.const.chiN is the tutorial's)
    assert {key: getattr(ours, key) for key in theirs} == pytest.approx(theirs, rel=1e-12)
    assert ours.weights == pytest.approx(np.asarray(es.sp.weights), rel=1e-12)


def test_the_eigendecomposition_is_lazy_in_high_dimension():
    solver = _solver(0, n=300, lam=20)
    assert solver.eigen_gap > 1
    decompositions = 0
    for _ in range(3 * solver.eigen_gap):
        before = solver.eigen_generation
        infos = solver.ask()
        solver.tell(infos, [-sphere(x) for x in solver.basis().candidates(infos, solver.noise)])
        decompositions += solver.eigen_generation != before
    assert decompositions == 3


def test_stops_on_a_termination_criterion_without_restarts():
    solver = _solver(0, n=4, lam=8)
    assert minimise(solver, sphere, target=-1, budget=10 ** 6) is None
    assert solver.stop_reason() in ("tolfun", "tolx")
    assert sphere(solver.best_x) < 1e-10


def test_ipop_restarts_double_the_population_and_escape_local_optima():
    counts, populations = [], []
    for seed in range(3):
        without = _solver(seed, n=5, lam=8, std=2.0, x0=np.full(5, 3.0))
        assert minimise(without, rastrigin, budget=200_000) is None and without.stop_reason() == "tolfun"
        solver = _solver(seed, n=5, lam=8, std=2.0, x0=np.full(5, 3.0), restarts=6)
        counts.append(minimise(solver, rastrigin, budget=200_000))
        populations.append(solver.population_size)
        assert solver.population_size == 8 * 2 ** solver.restarts_done and len(solver.ask()) == solver.population_size
    assert None not in counts and max(populations) > 8, (counts, populations)


def test_state_round_trip_after_a_restart():
    a = _solver(1, n=4, lam=8, tolfun=1e-3, restarts=2)
    b = _solver(1, n=4, lam=8, tolfun=1e-3, restarts=2)
    while a.restarts_done == 0:
        infos = a.ask()
        a.tell(infos, [-sphere(x) for x in a.basis().candidates(infos, a.noise)])
    b.load_state_dict({k: np.array(v) for k, v in a.state_dict().items()})
    for solver in (a, b):
        for _ in range(5):
            infos = solver.ask()
            solver.tell(infos, [-sphere(x) for x in solver.basis().candidates(infos, solver.noise)])
    assert b.population_size == 16 and np.array_equal(a.solution(), b.solution())


def test_separable_variant_on_a_separable_ellipsoid():
    sep = _solver(0, n=30, lam=12, type="SEP_CMA_ES")
    assert np.ndim(sep.basis().transform) == 1 and sep.C.shape == (30,)
    assert minimise(sep, ellipsoid, budget=60_000) is not None
    flag = _solver(0, n=30, lam=12, diagonal=True)
    for solver in (sep, flag):
        solver.load_state_dict({k: np.array(v) for k, v in _solver(0, n=30, lam=12, type="SEP_CMA_ES").state_dict().items()})
    assert minimise(sep, ellipsoid, budget=3000) == minimise(flag, ellipsoid, budget=3000)
    # the diagonal variant needs fewer evaluations than the full one on a separable problem
    assert minimise(_solver(0, n=30, lam=12, type="SEP_CMA_ES"), ellipsoid, budget=60_000) < \
        minimise(_solver(0, n=30, lam=12), ellipsoid, budget=60_000)


def test_stale_samples_are_refused():
    solver = _solver(0, n=3, lam=6)
    old = solver.ask()
    solver.tell(old, np.arange(6.0))
    with pytest.raises(StaleSampleError, match="CMAES does not correct stale samples"):
        solver.tell(old, np.arange(6.0))


@pytest.mark.timeout(60)
def test_es_train_stops_when_cma_es_terminates(tmp_path):
    from evokit_py.config import resolve_config
    from evokit_py.train import train

    lines = []
    config = resolve_config(None, [f"train.log_dir={tmp_path}", f"train.checkpoint_dir={tmp_path}/ck",
                                   "solver.type=CMA_ES", "solver.population_size=6", "solver.cma_es.tolx=1.0e+9",
                                   "train.target_return=null", "train.generations=20", "env.max_steps=20"])
    result = train(config, backend="inprocess", echo=lines.append)
    assert result.generations == 1 and "solver stopped (tolx)" in lines[-1]


def test_stream_noise_is_numpys_legacy_stream_and_keeps_its_latest_draw_only():
    noise = StreamNoise(5, 3)
    first, second = noise.draw(np.random.default_rng(), 2), noise.draw(np.random.default_rng(), 2)
    stream = np.random.RandomState(5).randn(4, 3)
    assert [noise.get(info).tolist() for info in second] == stream[2:].tolist()
    with pytest.raises(ValueError, match="offset 0"):
        noise.get(first[0])
