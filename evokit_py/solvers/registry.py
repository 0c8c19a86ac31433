"""Which solver ``solver.type`` names: the built-in ones, then those plugins register.

A solver class carries all that the config and the checkpoints need of it (its settings, their
checks, whether it takes asynchronous updates, how it is built from the ``solver`` block, the layout
of its state: see :class:`~evokit_py.solvers.base.Solver`), so this registry is only names. A
distribution adds a solver by registering its class under the entry-point group
``evokit_py.solvers`` with the ``solver.type`` name that selects it (see :mod:`parl_lite.ext`); a
class derived from a built-in one inherits what it does not declare (a subclass of :class:`BasicES`
has BASIC_ES's keys and is built as BASIC_ES is).
"""
import numpy as np

from evokit_py.noise import NoiseSource
from evokit_py.schema import ConfigError
from evokit_py.solvers.ars import ARS
from evokit_py.solvers.base import Solver
from evokit_py.solvers.basic_es import BasicES
from evokit_py.solvers.cma import CMAES, SepCMAES
from evokit_py.solvers.ga import GA
from evokit_py.solvers.settings import SolverKeys

__all__ = ["BUILT_IN", "make_solver", "solver_types", "solver_class"]

BUILT_IN: dict[str, type[Solver]] = {"BASIC_ES": BasicES, "CMA_ES": CMAES, "SEP_CMA_ES": SepCMAES, "GA": GA,
                                     "ARS": ARS}
"""The built-in solvers by ``solver.type``; they win over a plugin of the same name."""

_loaded: dict[str, type[Solver]] = {}  # plugin solvers loaded so far, by name


def solver_types() -> list[str]:
    """The ``solver.type`` names available: the built-in ones, then those of installed plugins."""
    from parl_lite import plugins  # here: importlib.metadata costs 15 ms that only a lookup needs

    added = [plugin.name for plugin in plugins.installed(plugins.SOLVERS) if plugin.name not in BUILT_IN]
    return [*BUILT_IN, *added]


def solver_class(name: str) -> type[Solver]:
    """The solver class ``solver.type`` names.

    Raises:
        ConfigError: no built-in solver or installed plugin has that name, or the plugin's object
            is not a :class:`Solver` class (the message names ``solver.type``).
        parl_lite.plugins.PluginError: the plugin of that name does not load (the message names it).
    """
    if name in BUILT_IN:
        return BUILT_IN[name]
    if name in _loaded:
        return _loaded[name]
    from parl_lite import plugins

    plugin = plugins.find(plugins.SOLVERS, name)
    if plugin is None:
        raise ConfigError(f"solver.type: must be one of {', '.join(solver_types())}, got {name!r}")
    found = plugin.load()
    if not (isinstance(found, type) and issubclass(found, Solver)):
        raise ConfigError(f"solver.type: {plugin.description} is {found!r}, not a subclass of "
                          f"evokit_py.solvers.Solver")
    _loaded[name] = found
    return found


def make_solver(config: SolverKeys, x0: np.ndarray, noise: NoiseSource) -> Solver:
    """The solver ``config.type`` names, built from the ``solver`` block ``config``, starting from ``x0``.

    Raises:
        ConfigError, PluginError: as :func:`solver_class`.
    """
    return solver_class(config.type).from_config(config, x0, noise)
