"""What a sound solver checkpoint holds: the layout of its datasets, checked before any value is
read, and the ranges of its values, checked after (no paddle import).

The layouts are those of the built-in solvers' state (``solver/*``), of the observation statistics
(``obs_stats/*``) and of what ``es-train`` adds (``extra/*``), in terms of a few sizes:

- ``n``, the parameter count: the length of ``params`` (a vector), so ``solver/theta`` and
  ``extra/best_params`` must be ``(n,)`` and CMA-ES's ``solver/C`` ``(n, n)``;
- ``o``, the observation size (at most ``n``): ``obs_stats/sum`` is ``(o,)``;
- row counts bounded by the stored config: at most ``solver.max_staleness`` kept versions, a GA's
  parents at most ``solver.population_size``, the trainer's held rows and pending evaluations at
  most one per generation, the evaluated candidates of an unfinished update (``extra/unfinished/*``)
  and the previews they were drawn around at most ``MAX_CANDIDATES``, a sampling info ``i <= 6``
  values (all 6 are checked with the values).

Datasets of other names (a plugin solver's state, a caller's extras) are bounded only by the file's
size (:func:`parl_lite.common.datasets.open_hdf5`).
"""
import math
from collections.abc import Mapping

import h5py
import numpy as np

from evokit_py.config import SolverConfig
from evokit_py.solvers.cma_stop import CRITERIA, default_tolstagnation
from parl_lite.common.datasets import DatasetError, check_finite, check_integer_range

__all__ = ["check_layout", "check_values", "MAX_GENERATION", "SAMPLING_INFO_FIELDS"]

MAX_GENERATION = 2**31 - 1
MAX_CANDIDATES = 2**24  # of a generation (CMA-ES's restarts grow it past solver.population_size)
SAMPLING_INFO_FIELDS = 6  # SamplingInfo.to_list(): seed, offset, sign, parent, version, preview
_FLOAT32_MAX = float(np.finfo(np.float32).max)

# a layout is a comma-separated list of size letters ("" is a scalar): "n" is the parameter count;
# any other letter is bounded by _limits and bound to its size by the first dataset that has it
_COMMON = {"generation": "", "sigma": "", "dropped_samples": ""}
_OPTIMIZER = {"optimizer/t": "", "optimizer/velocity": "n", "optimizer/m": "n", "optimizer/v": "n"}
_CMA = {"population_size": "", "restarts_done": "", "run_generation": "", "eigen_generation": "", "best_f": "",
        "stop_reason": "", "mean": "n", "D": "n", "pc": "n", "ps": "n", "best_x": "n",
        "termination/best_history": "b", "termination/stagnation_best": "s", "termination/stagnation_median": "s"}
_SOLVER_LAYOUTS = {
    "BASIC_ES": {**_COMMON, **_OPTIMIZER, "theta": "n", "history/versions": "h", "history/thetas": "h,n"},
    "CMA_ES": {**_COMMON, **_CMA, "C": "n,n", "B": "n,n"},
    "SEP_CMA_ES": {**_COMMON, **_CMA, "C": "n"},
    "GA": {**_COMMON, "parents": "q,n"},
}
_OBS_STATS = {"count": "", "sum": "o", "sumsq": "o"}
_TRAINER_EXTRA = {"best_return": "", "best_params": "n", "best_obs_stats/count": "", "best_obs_stats/sum": "o",
                  "best_obs_stats/sumsq": "o", "train_seconds": "", "episodes": "", "steps": "",
                  "log/held_rows": "r,f", "log/held_evals": "r", "log/pending_generations": "p",
                  "log/pending_solutions": "p,n", "log/pending_obs_count": "p", "log/pending_obs_sum": "p,o",
                  "log/pending_obs_sumsq": "p,o", "unfinished/indices": "c", "unfinished/infos": "c,i",
                  "unfinished/returns": "c",
                  "unfinished/steps": "c", "unfinished/obs_sum": "c,o", "unfinished/obs_sumsq": "c,o",
                  "unfinished/cpu_seconds": "c", "unfinished/previews/ids": "v", "unfinished/previews/versions": "v",
                  "unfinished/previews/params": "v,n"}
# parameter vectors, run by the float32 policy
_PARAMETERS = {"params/params", "solver/theta", "solver/history/thetas", "solver/mean", "solver/best_x",
               "solver/parents", "extra/best_params", "extra/log/pending_solutions",
               "extra/unfinished/previews/params"}
_WHAT = {"n": "the parameter count (the length of params)", "o": "the observation size of obs_stats",
         "h": "solver.max_staleness", "q": "solver.population_size", "r": "one per generation",
         "p": "one per generation", "f": "the progress log's columns", "b": "CMA-ES's tolfun history",
         "s": "CMA-ES's tolstagnation window", "c": "the candidates of a generation",
         "i": "a sampling info's fields", "v": "the previews of held candidates"}


def _layouts(solver_type: str, config: SolverConfig) -> dict[str, dict[str, str]]:
    if solver_type == "CMA_ES" and config.cma_es.diagonal:
        solver_type = "SEP_CMA_ES"
    return {"params": {"params": "n"}, "solver": _SOLVER_LAYOUTS.get(solver_type, {}), "obs_stats": _OBS_STATS,
            "extra": _TRAINER_EXTRA}


def _limits(config: SolverConfig, parameter_count: int, generation: int) -> dict[str, int]:
    """The largest value of each size letter (``n`` is exact)."""
    population = config.population_size
    return {"n": parameter_count, "o": parameter_count, "h": config.max_staleness, "q": population,
            "r": generation + 1, "p": generation + 1, "f": 64, "c": MAX_CANDIDATES, "i": SAMPLING_INFO_FIELDS,
            "v": MAX_CANDIDATES,
            "b": 10 + math.ceil(30 * parameter_count / population),
            "s": max(1, default_tolstagnation(parameter_count, population) if config.cma_es.tolstagnation is None
                     else config.cma_es.tolstagnation)}


def check_layout(datasets: Mapping[str, Mapping[str, h5py.Dataset]], solver_type: str, config: SolverConfig,
                 generation: int) -> None:
    """Check the declared shapes and dtypes of a checkpoint's datasets, reading no value.

    Args:
        datasets: group (``params``, ``solver``, ``obs_stats``, ``extra``) -> name -> dataset.
        solver_type: the file's ``solver_type`` attribute.
        config: the ``solver`` block of the config stored in the file.
        generation: the file's ``generation`` attribute (range-checked).

    Raises:
        DatasetError: naming the first dataset whose layout is wrong.
    """
    params = datasets["params"]["params"]
    if not isinstance(params, h5py.Dataset) or params.ndim != 1 or params.dtype.kind != "f":
        raise DatasetError(f"params: {getattr(params, 'dtype', 'a group')} of shape {getattr(params, 'shape', '-')}, "
                           f"expected a float vector")
    limits = _limits(config, params.shape[0], generation)
    sizes: dict[str, int] = {}
    for group, layouts in _layouts(solver_type, config).items():
        for name, layout in layouts.items():
            if name in datasets[group]:
                _check_dataset_layout(f"{group}/{name}" if group != "params" else name, datasets[group][name],
                                      layout, sizes, limits)


def _check_dataset_layout(name: str, dataset: h5py.Dataset, layout: str, sizes: dict[str, int],
                          limits: dict[str, int]) -> None:
    if dataset.dtype.kind not in "iuf":
        raise DatasetError(f"{name}: dtype {dataset.dtype}, expected real numbers")
    expected = layout.split(",") if layout else []
    if len(dataset.shape) != len(expected):
        raise DatasetError(f"{name}: shape {dataset.shape}, expected {_describe(expected, sizes, limits)}")
    for size, letter in zip(dataset.shape, expected, strict=True):
        bound = limits["n"] if letter == "n" else sizes.get(letter)
        fits = size == bound if bound is not None else size <= limits[letter]
        if not fits:
            raise DatasetError(f"{name}: shape {dataset.shape}, expected {_describe(expected, sizes, limits)}")
        sizes[letter] = size


def _describe(expected: list[str], sizes: dict[str, int], limits: dict[str, int]) -> str:
    """``(5,) (5 = the parameter count ...)`` or ``(h, 5) (h <= 4 (solver.max_staleness); ...)``."""
    if not expected:
        return "a scalar"
    known = {**sizes, "n": limits["n"]}
    dims = [str(known.get(letter, letter)) for letter in expected]
    notes = [f"{letter} <= {limits[letter]} ({_WHAT[letter]})" for letter in dict.fromkeys(expected)
             if letter not in known]
    if "n" in expected:
        notes.append(f"{limits['n']} = {_WHAT['n']}")
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''}) ({'; '.join(notes)})"


def check_values(groups: Mapping[str, Mapping[str, np.ndarray]], attrs: Mapping, config: SolverConfig) -> None:
    """Check the values of a checkpoint whose layout :func:`check_layout` accepted.

    Args:
        groups: group -> name -> values (read, checksums checked).
        attrs: the file's attributes.
        config: the ``solver`` block of the config stored in the file.

    Raises:
        DatasetError: naming the first dataset or attribute out of range.
    """
    for group in ("params", "solver", "obs_stats"):
        for key, value in groups[group].items():
            check_finite(key if group == "params" else f"{group}/{key}", value)
    for qualified in sorted(_PARAMETERS):
        group, _, key = qualified.partition("/")
        vector = groups[group].get(key)
        largest = float(np.max(np.abs(vector))) if vector is not None and vector.size else 0.0
        if largest > _FLOAT32_MAX:
            raise DatasetError(f"{key if group == 'params' else qualified}: values up to {largest:.3g}, beyond "
                               f"float32's range (the policy's precision: they would be infinite)")
    solver = groups["solver"]
    if "generation" not in solver:
        raise DatasetError("solver/generation: missing")
    generation = check_integer_range("solver/generation", solver["generation"], (0, MAX_GENERATION))
    if check_integer_range("attribute generation", attrs.get("generation"), (0, MAX_GENERATION)) != generation:
        raise DatasetError(f"attribute generation {attrs['generation']} differs from solver/generation {generation}")
    if "sigma" in solver and not float(solver["sigma"]) > 0:
        raise DatasetError(f"solver/sigma: {float(solver['sigma'])}, expected a step size > 0")
    if "dropped_samples" in solver:
        check_integer_range("solver/dropped_samples", solver["dropped_samples"], (0, None))
    if "optimizer/t" in solver:
        check_integer_range("solver/optimizer/t", solver["optimizer/t"], (0, generation))
    if "history/versions" in solver:
        _check_versions(solver["history/versions"], generation, config.max_staleness)
    _check_cma_counters(solver, generation, config)
    stats = groups["obs_stats"]
    if "count" in stats and float(stats["count"]) < 0:
        raise DatasetError(f"obs_stats/count: {float(stats['count'])} is negative")
    if "sumsq" in stats and np.any(stats["sumsq"] < 0):
        raise DatasetError("obs_stats/sumsq: holds negative values")


def _check_versions(versions: np.ndarray, generation: int, max_staleness: int) -> None:
    """The versions BASIC_ES keeps for stale samples: distinct, among the ``max_staleness`` before
    ``generation``."""
    oldest = max(0, generation - max_staleness)
    for version in versions:
        check_integer_range("solver/history/versions", version, (oldest, generation - 1))
    if len(set(versions.tolist())) != len(versions):
        raise DatasetError(f"solver/history/versions: {versions.tolist()} holds a version twice")


def _check_cma_counters(solver: Mapping[str, np.ndarray], generation: int, config: SolverConfig) -> None:
    restarts = config.cma_es.restarts
    bounds = {"restarts_done": (0, restarts), "run_generation": (0, generation),
              "population_size": (2, config.population_size * 2**restarts), "stop_reason": (0, len(CRITERIA))}
    for key, bound in bounds.items():
        if key in solver:
            check_integer_range(f"solver/{key}", solver[key], bound)
    if "eigen_generation" in solver:
        check_integer_range("solver/eigen_generation", solver["eigen_generation"],
                            (0, int(solver.get("run_generation", generation))))
