"""ES solvers as ask/tell state machines: Gaussian ES, CMA-ES, GA."""
import numpy as np

from evokit_py.config import SolverConfig
from evokit_py.noise import NoiseSource
from evokit_py.solvers.base import Basis, Solver, StaleSampleError, centered_rank
from evokit_py.solvers.basic_es import BasicES
from evokit_py.solvers.cma import CMAES, CMAParameters, SepCMAES
from evokit_py.solvers.ga import GA

__all__ = ["Basis", "Solver", "StaleSampleError", "BasicES", "CMAES", "CMAParameters", "SepCMAES", "GA", "centered_rank",
           "make_solver"]

_SOLVERS = {"BASIC_ES": BasicES, "CMA_ES": CMAES, "SEP_CMA_ES": SepCMAES, "GA": GA}


def make_solver(config: SolverConfig, x0: np.ndarray, noise: NoiseSource) -> Solver:
    """The solver ``config.type`` names, starting from ``x0``."""
    return _SOLVERS[config.type](config, x0, noise)
