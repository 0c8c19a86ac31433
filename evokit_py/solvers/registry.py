"""Which solver ``solver.type`` names, and building it from the config: the only place where the
``solver`` block becomes a solver. Solvers and optimizers take plain values; this module turns the
block into them.

A distribution adds a solver by registering its class under the entry-point group
``evokit_py.solvers`` with the ``solver.type`` name that selects it (see :mod:`parl_lite.ext`). A
plugin class is built as its nearest built-in base class is (a subclass of :class:`BasicES` gets
BASIC_ES's values, a direct subclass of :class:`Solver` the common ones: ``x0``, ``noise``,
``population_size``, ``sigma``, ``max_staleness``).
"""
from collections.abc import Callable

import numpy as np

from evokit_py.config import ConfigError, OptimizerConfig, SolverConfig
from evokit_py.noise import NoiseSource
from evokit_py.optimizers import SGD, Adam, Momentum, Optimizer
from evokit_py.solvers.ars import ARS
from evokit_py.solvers.base import Solver
from evokit_py.solvers.basic_es import BasicES
from evokit_py.solvers.cma import CMAES, SepCMAES
from evokit_py.solvers.ga import GA

__all__ = ["make_solver", "make_optimizer", "solver_types", "solver_class"]

_SOLVERS: dict[str, type[Solver]] = {"BASIC_ES": BasicES, "CMA_ES": CMAES, "SEP_CMA_ES": SepCMAES, "GA": GA,
                                     "ARS": ARS}


def solver_types() -> list[str]:
    """The ``solver.type`` names available: the built-in ones, then those of installed plugins."""
    from parl_lite import plugins  # here: importlib.metadata costs 15 ms that only a lookup needs

    added = [plugin.name for plugin in plugins.installed(plugins.SOLVERS) if plugin.name not in _SOLVERS]
    return [*_SOLVERS, *added]


def solver_class(name: str) -> type[Solver]:
    """The solver class ``solver.type`` names.

    Raises:
        ConfigError: no built-in solver or installed plugin has that name, or the plugin's object
            is not a :class:`Solver` class (the message names ``solver.type``).
        parl_lite.plugins.PluginError: the plugin of that name does not load (the message names it).
    """
    if name in _SOLVERS:
        return _SOLVERS[name]
    from parl_lite import plugins

    plugin = plugins.find(plugins.SOLVERS, name)
    if plugin is None:
        raise ConfigError(f"solver.type: must be one of {', '.join(solver_types())}, got {name!r}")
    found = plugin.load()
    if not (isinstance(found, type) and issubclass(found, Solver)):
        raise ConfigError(f"solver.type: {plugin.description} is {found!r}, not a subclass of "
                          f"evokit_py.solvers.Solver")
    return found


def make_optimizer(config: OptimizerConfig, dim: int) -> Optimizer:
    """The optimizer ``solver.optimizer`` describes, for ``dim`` parameters."""
    if config.type == "SGD":
        return SGD(dim, config.base_lr)
    if config.type == "MOMENTUM":
        return Momentum(dim, config.base_lr, config.momentum.mu)
    return Adam(dim, config.base_lr, config.adam.beta1, config.adam.beta2, config.adam.epsilon)


def _common(config: SolverConfig) -> dict:
    return {"population_size": config.population_size, "sigma": config.sampling.gaussian_sampling.std,
            "max_staleness": config.max_staleness}


def _basic_es(cls: type, config: SolverConfig, x0: np.ndarray, noise: NoiseSource) -> Solver:
    return cls(x0, noise, optimizer=make_optimizer(config.optimizer, noise.dim), mirrored=config.mirrored_sampling,
               fitness_shaping=config.fitness_shaping, weight_decay=config.weight_decay, **_common(config))


def _cma_es(cls: type, config: SolverConfig, x0: np.ndarray, noise: NoiseSource) -> Solver:
    cma = config.cma_es
    return cls(x0, noise, mu=cma.mu, active=cma.active, diagonal=cma.diagonal, restarts=cma.restarts,
               tolfun=cma.tolfun, tolx=cma.tolx, tolconditioncov=cma.tolconditioncov,
               tolstagnation=cma.tolstagnation, **_common(config))


def _ga(cls: type, config: SolverConfig, x0: np.ndarray, noise: NoiseSource) -> Solver:
    return cls(x0, noise, elite_count=config.ga.elite_count, truncation=config.ga.truncation, **_common(config))


def _ars(cls: type, config: SolverConfig, x0: np.ndarray, noise: NoiseSource) -> Solver:
    return cls(x0, noise, directions=config.population_size // 2, top_directions=config.ars.top_directions,
               step_size=config.optimizer.base_lr, sigma=config.sampling.gaussian_sampling.std)


def _solver(cls: type, config: SolverConfig, x0: np.ndarray, noise: NoiseSource) -> Solver:
    return cls(x0, noise, **_common(config))


# how each built-in class (and so each plugin class derived from it) is built from the config
_BUILDERS: dict[type, Callable[[type, SolverConfig, np.ndarray, NoiseSource], Solver]] = {
    ARS: _ars, BasicES: _basic_es, CMAES: _cma_es, GA: _ga, Solver: _solver}


def make_solver(config: SolverConfig, x0: np.ndarray, noise: NoiseSource) -> Solver:
    """The solver ``config.type`` names, starting from ``x0``.

    Raises:
        ConfigError, PluginError: as :func:`solver_class`.
    """
    cls = solver_class(config.type)
    builder = next(_BUILDERS[base] for base in cls.__mro__ if base in _BUILDERS)
    return builder(cls, config, x0, noise)
