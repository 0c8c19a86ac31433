"""The running totals of a training run that a checkpoint carries besides the solver: the best
evaluated solution (with the observation statistics it was evaluated with), training seconds and
CPU-seconds, episodes and environment steps."""
from dataclasses import dataclass

import numpy as np

from evokit_py.obs_stats import ObsStats
from evokit_py.training.schedule import Batch
from evokit_py.training.setup import Run

__all__ = ["Totals"]


@dataclass
class Totals:
    """See the module docstring; evaluations of the solution are not counted."""
    best_return: float
    best_params: np.ndarray
    best_obs_stats: dict[str, np.ndarray]  # the normalisation the best parameters were evaluated with
    train_seconds: float = 0.0
    episodes: int = 0
    steps: int = 0
    cpu_seconds: float = 0.0  # the trainer's and the sampling workers' CPU time over train_seconds

    @property
    def evaluated(self) -> bool:
        """Whether a solution was evaluated (else the best is the initial solution, never played)."""
        return self.best_return > -np.inf

    @classmethod
    def start(cls, run: Run) -> "Totals":
        """Nothing evaluated yet: the run's initial solution and statistics stand as the best."""
        return cls(-np.inf, run.solver.solution(), run.obs_stats.state_dict())

    def add(self, batch: Batch, episodes_per_candidate: int, cpu_seconds: float) -> None:
        """Count in the episodes, steps and seconds of ``batch``, which took ``cpu_seconds`` of CPU."""
        self.train_seconds += batch.seconds
        self.cpu_seconds += cpu_seconds
        self.episodes += len(batch.infos) * episodes_per_candidate
        self.steps += int(batch.result["steps"])

    def record(self, value: float, params: np.ndarray, obs_stats: dict[str, np.ndarray]) -> None:
        """Keep ``params`` (and the statistics they were evaluated with) if ``value`` is the best so far."""
        if value > self.best_return:
            self.best_return, self.best_params, self.best_obs_stats = value, params, obs_stats

    def to_extra(self) -> dict[str, np.ndarray]:
        """The totals as checkpoint datasets (``extra/*``)."""
        obs = {f"best_obs_stats/{key}": value for key, value in self.best_obs_stats.items()}
        return {"best_return": np.asarray(self.best_return), "best_params": self.best_params, **obs,
                "train_seconds": np.asarray(self.train_seconds), "episodes": np.asarray(self.episodes),
                "steps": np.asarray(self.steps), "train_cpu_seconds": np.asarray(self.cpu_seconds)}

    @classmethod
    def from_extra(cls, extra: dict[str, np.ndarray], obs_stats: ObsStats) -> "Totals":
        """What :meth:`to_extra` saved (``obs_stats`` stand for the best's in a checkpoint from before
        they were saved; CPU-seconds count from 0 in one from before they were)."""
        obs = {key.split("/", 1)[1]: value for key, value in extra.items() if key.startswith("best_obs_stats/")}
        return cls(float(extra["best_return"]), np.asarray(extra["best_params"]), obs or obs_stats.state_dict(),
                   float(extra["train_seconds"]), int(extra["episodes"]), int(extra["steps"]),
                   float(extra.get("train_cpu_seconds", 0.0)))
