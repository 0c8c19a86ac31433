"""ESAgent: EvoKit's agent interface in Python, a facade over a run's set-up
(:func:`evokit_py.training.setup.setup_run`).

    agent = ESAgent("es.yaml")            # or an ESConfig; model="paddle.onnx" for a policy file
    sampler = agent.clone()               # shares the solver: sees every update
    info = sampler.add_noise()            # perturbs the clone; info = (seed, offset, sign, parent)
    action = sampler.predict(obs)
    agent.update([info, ...], [reward, ...])
    agent.save_solver("solver.h5"); agent.save_inference_model("policy.onnx")

The agent is complete once made: policy, noise (the shared table, which this agent owns), solver and
statistics. Clones share the master's solver, noise and observation statistics; each has its own
parameters. A clone that has not added noise predicts with the master's current solution; after an
``update`` a clone's noise is dropped (it sees the new parameters until it adds noise again).
"""
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from evokit_py.config import ESConfig, default_config, load_config
from evokit_py.noise import NoiseSpec, SamplingInfo
from evokit_py.obs_stats import ObsStats, normalise
from evokit_py.policy import OnnxPolicy
from evokit_py.solvers import Solver
from evokit_py.training.saving import export_policy, restore_checkpoint, save_checkpoint
from evokit_py.training.setup import setup_run

__all__ = ["ESAgent"]

class _Candidates:
    """The candidates of the current generation not handed out yet, shared by an agent and its
    clones, and how many times the solver was restored from a checkpoint (clones then drop their noise)."""

    def __init__(self) -> None:
        self.generation = -1  # the generation ``infos`` are of
        self.infos: list[SamplingInfo] = []
        self.restores = 0

    def reset(self) -> None:
        """Forget the candidates not handed out (the solver was told or restored)."""
        self.generation, self.infos = -1, []

    def next(self, solver: Solver) -> SamplingInfo:
        """The next candidate of the solver's generation not handed out yet.

        Raises:
            RuntimeError: every candidate of the generation is out (``update`` starts the next).
        """
        if self.generation != solver.generation:
            self.infos, self.generation = list(solver.ask()), solver.generation
        if not self.infos:
            raise RuntimeError(f"all {solver.population_size} candidates of generation {solver.generation} are out: "
                               f"call update() with their rewards")
        return self.infos.pop(0)


class ESAgent:
    """An ES agent (see the module docstring).

    Args:
        config: the config, or the path of a YAML config; default: the built-in CartPole job.
        model: an ONNX file to use instead of the config's ``policy`` (its float weights become
            the initial parameters).

    Raises:
        ConfigError: a bad config (naming the key); ValueError: the policy does not fit the
            environment (naming the file and the space).
    """

    def __init__(self, config: "ESConfig | str | Path | None" = None,
                 model: "str | os.PathLike | None" = None):
        if config is None:
            config = default_config()
        elif not isinstance(config, ESConfig):
            config = load_config(config)
        if model is not None:
            config = dataclasses.replace(config, policy=dataclasses.replace(config.policy, onnx=str(model)))
        self._run = setup_run(config)
        self._candidates = _Candidates()
        self.is_clone = False
        self._start_policy()

    def _start_policy(self) -> None:
        """This agent's own policy session, showing the solution until it adds noise."""
        self._policy = OnnxPolicy.from_bytes(self._run.policy.to_bytes())
        self._seen = (-1, -1)  # (restores, generation) the policy's parameters are of

    @property
    def config(self) -> ESConfig:
        return self._run.config

    @property
    def solver(self) -> Solver:
        return self._run.solver

    @property
    def obs_stats(self) -> ObsStats:
        return self._run.obs_stats

    def clone(self) -> "ESAgent":
        """A sampling agent sharing this agent's solver, noise and statistics, with its own parameters."""
        twin = ESAgent.__new__(ESAgent)
        twin._run, twin._candidates, twin.is_clone = self._run, self._candidates, True
        twin._start_policy()
        return twin

    def noise_spec(self) -> NoiseSpec:
        """How a sampling worker in another process finds this agent's noise."""
        return self._run.noise_spec()

    def policy_bytes(self) -> bytes:
        """The serialized weights-as-inputs policy graph (what sampling workers load)."""
        return self._run.policy.to_bytes()

    def add_noise(self, info: SamplingInfo | None = None) -> SamplingInfo:
        """Perturb this agent's parameters with the next candidate of the generation (or with the
        given ``info``, which reproduces that candidate exactly); returns the sampling info."""
        solver = self.solver
        if info is None:
            info = self._candidates.next(solver)
        self._policy.set_parameters(solver.basis().candidate(info, self._run.noise))
        self._seen = (self._candidates.restores, solver.generation)
        return info

    def parameters(self) -> np.ndarray:
        """The parameters ``predict`` uses now (float32)."""
        return self._refresh().get_parameters()

    def predict(self, obs: np.ndarray):
        """The action for one observation, normalised as the workers normalise it (with the shared
        statistics, when configured)."""
        output = self._refresh()(normalise(obs, *self._run.normalisation(), self._run.config.observation_stats.clip))
        return self._run.action_map(output[0])

    def update(self, sampling_infos: Sequence[SamplingInfo], rewards: Sequence[float],
               stale: Literal["refuse", "drop"] = "refuse") -> int:
        """Tell the solver the rewards of these candidates; every clone sees the new parameters.

        Infos may come from the last ``solver.max_staleness`` versions (BASIC_ES corrects them);
        older ones raise :class:`~evokit_py.solvers.StaleSampleError` (``stale="refuse"``) or are
        left out and counted (``stale="drop"``). Returns the number dropped.
        """
        dropped = self.solver.tell(list(sampling_infos), rewards, stale)
        self._candidates.reset()
        return dropped

    def _refresh(self) -> OnnxPolicy:
        """The policy, with the current solution unless this agent perturbed it since the last
        update or restore."""
        now = (self._candidates.restores, self.solver.generation)
        if self._seen != now:
            self._policy.set_parameters(self.solver.solution())
            self._seen = now
        return self._policy

    def save_inference_model(self, path: "str | os.PathLike", params: np.ndarray | None = None,
                             obs_stats: dict | None = None) -> None:
        """Write a standalone ONNX model of ``params`` (default: the current solution), weights as
        initializers and the observation normalisation folded in when configured, atomically.

        Args:
            obs_stats: the normalisation statistics (an :meth:`ObsStats.state_dict`) that go with
                ``params``; default: the current ones.
        """
        export_policy(self._run, path, params, obs_stats)

    def save_solver(self, path: "str | Path", extra: dict | None = None) -> None:
        """Write parameters, solver and optimizer state, noise seed, generation and observation
        statistics to an HDF5 file, atomically."""
        save_checkpoint(self._run, path, extra)

    def load_solver(self, path: "str | Path") -> dict:
        """Restore what :meth:`save_solver` wrote; returns its ``extra`` datasets.

        Raises:
            SolverCheckpointError: see :func:`evokit_py.training.saving.restore_checkpoint`.
        """
        extra = restore_checkpoint(self._run, path)
        self._candidates.reset()
        self._candidates.restores += 1
        return extra

    def close(self) -> None:
        """Master only: destroy the shared noise table (clones just drop their reference)."""
        if not self.is_clone:
            self._run.close()

    def __enter__(self) -> "ESAgent":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
