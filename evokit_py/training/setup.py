"""The set-up of an ES run: its parts, built once from the config, in one place.

``setup_run(config)`` makes the environment (only to read and check its spaces), the policy (checked
against them) and its initial parameters, the noise (the shared table when cached: the run owns it)
and the solver, and starts the observation statistics. The trainer (:func:`evokit_py.train.train`),
EvoKit's facade (:class:`evokit_py.ESAgent`) and the offline sampler and updater all start from
it; a :class:`Run` is complete once made, so that nothing about it depends on the order in which
methods are called.
"""
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from evokit_py.config import ESConfig
from evokit_py.envs import ActionMap, make_env, observation_size
from evokit_py.limits import check_noise_table
from evokit_py.noise import NoiseSource, NoiseSpec, NoiseTable, SamplingInfo
from evokit_py.obs_stats import ObsStats, normalisation
from evokit_py.policy import OnnxPolicy, make_policy
from evokit_py.solvers import Solver, make_solver

__all__ = ["Run", "setup_run"]


@dataclass
class Run:
    """The parts of one ES run (see the module docstring).

    Attributes:
        config: the validated config.
        policy: the policy graph, weights as inputs (what sampling workers load, what is exported).
        action_map: policy output -> action, for the environment's action space.
        table: the shared noise table this run owns (``None``: uncached sampling).
        noise: the noise source the solver and the candidates use.
        solver: the solver, at generation 0.
        obs_stats: the observation statistics, empty.
    """
    config: ESConfig
    policy: OnnxPolicy
    action_map: ActionMap
    table: NoiseTable | None
    noise: NoiseSource
    solver: Solver
    obs_stats: ObsStats

    def noise_spec(self) -> NoiseSpec:
        """How a sampling worker in another process finds this run's noise."""
        table = self.table
        return NoiseSpec(self.noise.seed, self.noise.dim, table.name if table else None, table.size if table else 0)

    def normalisation(self, stats: ObsStats | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The observation mean and std the policy sees through (:func:`evokit_py.obs_stats.normalisation`)
        for ``stats`` (default: the run's own), ``None, None`` when the config turns normalisation off."""
        return normalisation(self.obs_stats if stats is None else stats, self.config.observation_normalization,
                             self.config.observation_stats.std_floor)

    def fitness(self, result: dict) -> np.ndarray:
        """What the solver maximises for candidates of ``result`` (:func:`evokit_py.sampler.aggregate`
        totals): their mean episode return, less ``env.reward_shift`` per step."""
        env = self.config.env
        if not env.reward_shift:
            return result["returns"]
        return result["returns"] - env.reward_shift * result["candidate_steps"] / env.episodes_per_candidate

    def update(self, infos: Sequence[SamplingInfo], result: dict,
               stale: Literal["refuse", "drop"] = "drop") -> int:
        """One update from evaluated candidates: the solver is told their :meth:`fitness`, and the
        statistics take in their observations when normalisation is on.

        Args:
            result: :func:`evokit_py.sampler.aggregate` totals of the candidates ``infos`` describe.
            stale: what the solver does with samples older than it keeps (see ``Solver.tell``).

        Returns:
            The number of samples dropped as too old.
        """
        dropped = self.solver.tell(list(infos), self.fitness(result), stale)
        if self.config.observation_normalization:
            self.obs_stats.add(result["obs_sum"], result["obs_sumsq"], result["obs_count"])
        return dropped

    def close(self) -> None:
        """Destroy the noise table this run owns (the solver cannot ask for candidates after)."""
        if self.table is not None:
            self.table.unlink()
            self.table = None

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def setup_run(config: ESConfig) -> Run:
    """Build the parts of a run of ``config`` (see the module docstring).

    Raises:
        ValueError: the environment, the policy or the noise does not fit, or the noise table does not
            fit in this machine's shared memory (the message names the key).
        ConfigError: an unknown ``solver.type``; PluginError: its plugin does not load.
    """
    env = make_env(config.env)
    try:
        policy, x0 = make_policy(config.policy, config.seed, env)
        action_map = ActionMap(env.action_space, config.policy)
        obs_size = observation_size(env.observation_space)
    finally:
        env.close()
    sampling = config.solver.sampling.gaussian_sampling
    if sampling.cached:
        check_noise_table(sampling.cache_size)
    table = NoiseTable.create(sampling.seed, sampling.cache_size) if sampling.cached else None
    try:
        noise = NoiseSource(sampling.seed, len(x0), table)
        solver = make_solver(config.solver, x0, noise)
    except BaseException:
        if table is not None:
            table.unlink()
        raise
    return Run(config, policy, action_map, table, noise, solver, ObsStats(obs_size))
