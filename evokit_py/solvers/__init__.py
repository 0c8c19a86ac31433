"""ES solvers as ask/tell state machines: Gaussian ES, CMA-ES, GA, and those plugins add.

A distribution adds a solver by registering its class under the entry-point group
``evokit_py.solvers`` with the ``solver.type`` name that selects it (see :mod:`parl_lite.ext`).
"""
import numpy as np

from evokit_py.config import SolverConfig
from evokit_py.noise import NoiseSource
from evokit_py.solvers.base import Basis, Solver, StaleSampleError, centered_rank
from evokit_py.solvers.basic_es import BasicES
from evokit_py.solvers.cma import CMAES, CMAParameters, SepCMAES
from evokit_py.solvers.ga import GA

__all__ = ["Basis", "Solver", "StaleSampleError", "BasicES", "CMAES", "CMAParameters", "SepCMAES", "GA",
           "centered_rank", "make_solver", "solver_types", "solver_class"]

_SOLVERS = {"BASIC_ES": BasicES, "CMA_ES": CMAES, "SEP_CMA_ES": SepCMAES, "GA": GA}


def solver_types() -> list[str]:
    """The ``solver.type`` names available: the built-in ones, then those of installed plugins."""
    from parl_lite.ext import plugins  # here: importlib.metadata costs a sampling worker 15 ms it never needs

    added = [plugin.name for plugin in plugins.installed(plugins.SOLVERS) if plugin.name not in _SOLVERS]
    return [*_SOLVERS, *added]


def solver_class(name: str) -> type:
    """The solver class ``solver.type`` names.

    Raises:
        ValueError: no built-in solver or installed plugin has that name.
        parl_lite.ext.plugins.PluginError: the plugin of that name does not load (the message names it).
    """
    if name in _SOLVERS:
        return _SOLVERS[name]
    from parl_lite.ext import plugins

    try:
        return plugins.load(plugins.SOLVERS, name)
    except KeyError:
        raise ValueError(f"solver.type: no solver is called {name!r} (available: "
                         f"{', '.join(solver_types())})") from None


def make_solver(config: SolverConfig, x0: np.ndarray, noise: NoiseSource) -> Solver:
    """The solver ``config.type`` names, starting from ``x0``."""
    return solver_class(config.type)(config, x0, noise)
