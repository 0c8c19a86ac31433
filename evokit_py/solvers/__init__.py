"""ES solvers as ask/tell state machines built from plain values: Gaussian ES, ARS, CMA-ES, GA, and
those plugins add (:mod:`evokit_py.solvers.registry` builds them from the config)."""
from evokit_py.solvers.ars import ARS
from evokit_py.solvers.base import Solver, StaleSampleError, centered_rank
from evokit_py.solvers.basic_es import BasicES
from evokit_py.solvers.cma import CMAES, CMAParameters, SepCMAES
from evokit_py.solvers.ga import GA
from evokit_py.solvers.registry import make_solver, solver_class, solver_types

__all__ = ["Solver", "StaleSampleError", "ARS", "BasicES", "CMAES", "CMAParameters", "SepCMAES", "GA",
           "centered_rank", "make_solver", "solver_types", "solver_class"]
