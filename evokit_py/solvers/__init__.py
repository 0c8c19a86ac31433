"""ES solvers as ask/tell state machines built from plain values: Gaussian ES, ARS, CMA-ES, GA, and
those plugins add. Each solver module holds all of its solver: its settings and their checks, whether
it takes asynchronous updates, how it is built from the config and the layout of its checkpointed
state (:class:`Solver`); :mod:`evokit_py.solvers.registry` names them."""
from evokit_py.solvers.ars import ARS
from evokit_py.solvers.base import Solver, StaleSampleError, centered_rank
from evokit_py.solvers.basic_es import BasicES
from evokit_py.solvers.cma import CMAES, CMAParameters, SepCMAES
from evokit_py.solvers.ga import GA
from evokit_py.solvers.registry import make_solver, solver_class, solver_types
from evokit_py.solvers.settings import SolverKeys, StateLayout

__all__ = ["Solver", "StaleSampleError", "SolverKeys", "StateLayout", "ARS", "BasicES", "CMAES", "CMAParameters",
           "SepCMAES", "GA", "centered_rank", "make_solver", "solver_types", "solver_class"]
