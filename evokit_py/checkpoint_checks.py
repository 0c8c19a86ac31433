"""What a sound solver checkpoint holds: the layout of its datasets, checked before any value is
read, and the ranges of its values, checked after (no paddle import).

The layout of the solver's state (``solver/*``) is the solver's own
(:meth:`Solver.state_layout <evokit_py.solvers.base.Solver.state_layout>`, in its module, plugins
alike): a dataset it does not name is refused. The layouts of the observation statistics
(``obs_stats/*``) and of what ``es-train`` adds (``extra/*``) are here. Layouts are written in terms
of a few sizes:

- ``n``, the parameter count: the length of ``params`` (a vector), so ``solver/theta`` and
  ``extra/best_params`` must be ``(n,)`` and CMA-ES's ``solver/C`` ``(n, n)``;
- ``o``, the observation size (at most ``n``): ``obs_stats/sum`` is ``(o,)``;
- row counts bounded by the stored config: those of the solver's state (BASIC_ES keeps at most
  ``solver.max_staleness`` versions, a GA's parents are at most ``solver.population_size``), the
  trainer's held rows and pending evaluations at most one per generation, the evaluated candidates
  of an unfinished update (``extra/unfinished/*``) and the previews they were drawn around at most
  ``MAX_CANDIDATES``, a sampling info ``i <= 6`` values (all 6 are checked with the values).

Datasets of other names in ``extra`` (a caller's own) are bounded only by the file's size
(:func:`parl_lite.common.datasets.open_hdf5`).
"""
from collections.abc import Mapping

import h5py
import numpy as np

from evokit_py.solvers.base import Solver
from evokit_py.solvers.settings import SolverKeys
from parl_lite.common.datasets import DatasetError, check_finite, check_integer_range

__all__ = ["check_layout", "check_values", "MAX_GENERATION", "SAMPLING_INFO_FIELDS"]

MAX_GENERATION = 2**31 - 1
MAX_CANDIDATES = 2**24  # of a generation (CMA-ES's restarts grow it past solver.population_size)
SAMPLING_INFO_FIELDS = 6  # SamplingInfo.to_list(): seed, offset, sign, parent, version, preview
_FLOAT32_MAX = float(np.finfo(np.float32).max)

# a layout is a comma-separated list of size letters ("" is a scalar): "n" is the parameter count;
# any other letter is bounded by its limit and bound to its size by the first dataset that has it
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
# parameter vectors outside the solver's state, run by the float32 policy
_PARAMETERS = ("params/params", "extra/best_params", "extra/log/pending_solutions", "extra/unfinished/previews/params")


def _limits(parameter_count: int, generation: int) -> dict[str, tuple[int, str]]:
    """The largest value of each size letter of the trainer's datasets, and what sets it (``n`` is exact)."""
    per_generation = (generation + 1, "one per generation")
    return {"n": (parameter_count, "the parameter count (the length of params)"),
            "o": (parameter_count, "the observation size of obs_stats"), "r": per_generation, "p": per_generation,
            "f": (64, "the progress log's columns"), "c": (MAX_CANDIDATES, "the candidates of a generation"),
            "i": (SAMPLING_INFO_FIELDS, "a sampling info's fields"),
            "v": (MAX_CANDIDATES, "the previews of held candidates")}


def check_layout(datasets: Mapping[str, Mapping[str, h5py.Dataset]], solver: type[Solver], config: SolverKeys,
                 generation: int) -> None:
    """Check the declared shapes and dtypes of a checkpoint's datasets, reading no value.

    Args:
        datasets: group (``params``, ``solver``, ``obs_stats``, ``extra``) -> name -> dataset.
        solver: the class of the file's ``solver_type`` (its :meth:`~Solver.state_layout`).
        config: the ``solver`` block of the config stored in the file.
        generation: the file's ``generation`` attribute (range-checked).

    Raises:
        DatasetError: naming the first dataset whose layout is wrong, or one of ``solver/*`` that
            the solver's layout does not have.
    """
    params = datasets["params"]["params"]
    if not isinstance(params, h5py.Dataset) or params.ndim != 1 or params.dtype.kind != "f":
        raise DatasetError(f"params: {getattr(params, 'dtype', 'a group')} of shape {getattr(params, 'shape', '-')}, "
                           f"expected a float vector")
    limits = _limits(params.shape[0], generation)
    state = solver.state_layout(config, params.shape[0])
    unknown = sorted(set(datasets["solver"]) - set(state.shapes))
    if unknown:
        raise DatasetError(f"solver/{unknown[0]}: not part of {solver.__name__}'s state (its datasets: "
                           f"{', '.join(state.shapes)})")
    _check_group(datasets["params"], {"params": "n"}, "", limits)
    _check_group(datasets["solver"], state.shapes, "solver/", {"n": limits["n"], **state.sizes})
    trainer: dict[str, int] = {}  # sizes of the letters bound so far, shared by obs_stats and extra
    _check_group(datasets["obs_stats"], _OBS_STATS, "obs_stats/", limits, trainer)
    _check_group(datasets["extra"], _TRAINER_EXTRA, "extra/", limits, trainer)


def _check_group(datasets: Mapping[str, h5py.Dataset], layouts: Mapping[str, str], prefix: str,
                 limits: Mapping[str, tuple[int, str]], sizes: dict[str, int] | None = None) -> None:
    """The datasets of one group that ``layouts`` names, against their layouts (``sizes``: the
    letters bound so far)."""
    sizes = {} if sizes is None else sizes
    for name, layout in layouts.items():
        if name in datasets:
            _check_dataset_layout(prefix + name, datasets[name], layout, sizes, limits)


def _check_dataset_layout(name: str, dataset: h5py.Dataset, layout: str, sizes: dict[str, int],
                          limits: Mapping[str, tuple[int, str]]) -> None:
    if dataset.dtype.kind not in "iuf":
        raise DatasetError(f"{name}: dtype {dataset.dtype}, expected real numbers")
    expected = layout.split(",") if layout else []
    if len(dataset.shape) != len(expected):
        raise DatasetError(f"{name}: shape {dataset.shape}, expected {_describe(expected, sizes, limits)}")
    for size, letter in zip(dataset.shape, expected, strict=True):
        bound = limits["n"][0] if letter == "n" else sizes.get(letter)
        fits = size == bound if bound is not None else size <= limits[letter][0]
        if not fits:
            raise DatasetError(f"{name}: shape {dataset.shape}, expected {_describe(expected, sizes, limits)}")
        sizes[letter] = size


def _describe(expected: list[str], sizes: dict[str, int], limits: Mapping[str, tuple[int, str]]) -> str:
    """``(5,) (5 = the parameter count ...)`` or ``(h, 5) (h <= 4 (solver.max_staleness); ...)``."""
    if not expected:
        return "a scalar"
    known = {**sizes, "n": limits["n"][0]}
    dims = [str(known.get(letter, letter)) for letter in expected]
    notes = [f"{letter} <= {limits[letter][0]} ({limits[letter][1]})" for letter in dict.fromkeys(expected)
             if letter not in known]
    if "n" in expected:
        notes.append(f"{limits['n'][0]} = {limits['n'][1]}")
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''}) ({'; '.join(notes)})"


def check_values(groups: Mapping[str, Mapping[str, np.ndarray]], attrs: Mapping, solver: type[Solver],
                 config: SolverKeys) -> None:
    """Check the values of a checkpoint whose layout :func:`check_layout` accepted.

    Args:
        groups: group -> name -> values (read, checksums checked).
        attrs: the file's attributes.
        solver: the class of the file's ``solver_type`` (its :meth:`~Solver.check_state`).
        config: the ``solver`` block of the config stored in the file.

    Raises:
        DatasetError: naming the first dataset or attribute out of range.
    """
    for group in ("params", "solver", "obs_stats"):
        for key, value in groups[group].items():
            check_finite(key if group == "params" else f"{group}/{key}", value)
    state = solver.state_layout(config, len(groups["params"]["params"]))
    for qualified in sorted({*_PARAMETERS, *(f"solver/{name}" for name in state.parameters)}):
        group, _, key = qualified.partition("/")
        vector = groups[group].get(key)
        largest = float(np.max(np.abs(vector))) if vector is not None and vector.size else 0.0
        if largest > _FLOAT32_MAX:
            raise DatasetError(f"{key if group == 'params' else qualified}: values up to {largest:.3g}, beyond "
                               f"float32's range (the policy's precision: they would be infinite)")
    if "generation" not in groups["solver"]:
        raise DatasetError("solver/generation: missing")
    generation = check_integer_range("solver/generation", groups["solver"]["generation"], (0, MAX_GENERATION))
    if check_integer_range("attribute generation", attrs.get("generation"), (0, MAX_GENERATION)) != generation:
        raise DatasetError(f"attribute generation {attrs['generation']} differs from solver/generation {generation}")
    solver.check_state(groups["solver"], generation, config)
    stats = groups["obs_stats"]
    if "count" in stats and float(stats["count"]) < 0:
        raise DatasetError(f"obs_stats/count: {float(stats['count'])} is negative")
    if "sumsq" in stats and np.any(stats["sumsq"] < 0):
        raise DatasetError("obs_stats/sumsq: holds negative values")
