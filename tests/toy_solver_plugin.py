"""A toy ES solver as a third-party plugin writes one, all in this module: its settings (the block
``solver.toy``) and their checks, its rule for asynchronous training, how it is built from the
config, its ask/tell and the layout of its checkpointed state. ``tests/cli/test_plugins.py`` installs it
as ``myplugin.toy`` under the entry point ``evokit_py.solvers: TOY_ES = myplugin.toy:ToyES``.

Each generation it moves its centre towards the mean noise of its ``toy.elite`` best candidates,
by ``toy.step`` times the noise scale.
"""
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from evokit_py.basis import Basis
from evokit_py.schema import POSITIVE, ConfigError
from evokit_py.solvers import Solver, SolverKeys, StateLayout


@dataclass
class ToyConfig:
    """TOY_ES's keys: the block ``solver.toy``."""
    config_key: ClassVar[str] = "toy"
    step: float = field(default=1.0, metadata=POSITIVE)
    elite: int = field(default=2, metadata=POSITIVE)


class ToyES(Solver):
    """Moves towards its best candidates; refuses stale samples, so ``train.mode: async`` is refused."""

    settings = ToyConfig
    accepts_stale = False

    def __init__(self, x0, noise, population_size, sigma, step, elite, max_staleness=0):
        super().__init__(x0, noise, population_size, sigma, max_staleness)
        self.centre = np.array(x0, dtype=np.float64)
        self.step, self.elite = step, elite
        self.moves = 0

    @classmethod
    def check_config(cls, config: SolverKeys) -> None:
        elite = config.settings(ToyConfig).elite
        if elite > config.population_size:
            raise ConfigError(f"toy.elite: must be <= population_size ({config.population_size}), got {elite}")

    @classmethod
    def from_config(cls, config: SolverKeys, x0, noise) -> Solver:
        own = config.settings(ToyConfig)
        return cls(x0, noise, step=own.step, elite=own.elite, **config.common_arguments())

    @classmethod
    def state_layout(cls, config: SolverKeys, parameter_count: int) -> StateLayout:
        return super().state_layout(config, parameter_count).extended({"centre": "n", "moves": ""},
                                                                      parameters=("centre",))

    def _ask(self, rng):
        return self.noise.draw(rng, self.population_size)

    def basis(self):
        return Basis(self.centre[None].copy(), self.sigma)

    def _tell(self, infos, fitness):
        best = np.argsort(-fitness, kind="stable")[:self.elite]
        direction = np.mean([self.noise.get(infos[i]) for i in best], axis=0)
        self.centre = self.centre + self.step * self.sigma * direction
        self.moves += 1

    def solution(self):
        return self.centre.copy()

    def state_dict(self):
        return {**super().state_dict(), "centre": self.centre.copy(), "moves": np.asarray(self.moves)}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.centre = np.array(state["centre"], dtype=np.float64)
        self.moves = int(state["moves"])
