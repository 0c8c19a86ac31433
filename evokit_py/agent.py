"""ESAgent: EvoKit's agent interface in Python.

    agent = ESAgent()
    agent.load_config("es.yaml")
    agent.load_inference_model()          # the config's ONNX file or MLP; or a path
    agent.init_solver()
    sampler = agent.clone()               # shares the solver: sees every update
    info = sampler.add_noise()            # perturbs the clone; info = (seed, offset, sign, parent)
    action = sampler.predict(obs)
    agent.update([info, ...], [reward, ...])
    agent.save_solver("solver.h5"); agent.save_inference_model("policy.onnx")

Clones share the master's solver, noise and observation statistics; each has its own parameters.
A clone that has not added noise predicts with the master's current solution; after an ``update`` a
clone's noise is dropped (it sees the new parameters until it adds noise again).
"""
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from evokit_py.checkpoint import SolverCheckpointError, check_resume, read_checkpoint, write_checkpoint
from evokit_py.config import ESConfig, config_from_yaml_text, default_config, load_config
from evokit_py.envs import ActionMap, make_env, observation_size
from evokit_py.noise import NoiseSource, NoiseSpec, NoiseTable, SamplingInfo
from evokit_py.obs_stats import ObsStats, normalisation, normalise
from evokit_py.policy import OnnxPolicy, make_policy
from evokit_py.solvers import Solver, make_solver
from parl_lite.io.atomic import write_bytes_atomically

__all__ = ["ESAgent"]


class _Shared:
    """What a master agent and its clones share."""

    def __init__(self, config: ESConfig):
        self.config = config
        self.env = make_env(config.env)  # spaces only: action mapping and observation size
        self.x0: np.ndarray | None = None
        self.table: NoiseTable | None = None
        self.noise: NoiseSource | None = None
        self.solver: Solver | None = None
        self.obs_stats = ObsStats(observation_size(self.env.observation_space))
        self.pending: list[SamplingInfo] = []
        self.pending_generation = -1


class ESAgent:
    """An ES agent (see the module docstring). ``config`` defaults to the built-in CartPole job."""

    def __init__(self, config: ESConfig | None = None):
        self._reset(config or default_config())

    def _reset(self, config: ESConfig) -> None:
        self._shared = _Shared(config)
        self._policy: OnnxPolicy | None = None
        self._info: SamplingInfo | None = None
        self._generation = -1
        self.is_clone = False

    @property
    def config(self) -> ESConfig:
        return self._shared.config

    @property
    def solver(self) -> Solver:
        if self._shared.solver is None:
            raise RuntimeError("call init_solver() first")
        return self._shared.solver

    @property
    def obs_stats(self) -> ObsStats:
        return self._shared.obs_stats

    def load_config(self, path: "str | Path") -> None:
        """Read and validate a YAML config (errors name the key); resets the agent (and releases
        the noise table it owned)."""
        config = load_config(path)
        self.close()
        self._reset(config)

    def load_inference_model(self, onnx_path: "str | Path | None" = None) -> None:
        """Use the ONNX policy at ``onnx_path`` (its float weights become the initial parameters),
        or, with no path, the config's ``policy`` (ONNX file or MLP).

        Raises:
            ValueError: the policy does not fit the environment (naming the file and the space).
        """
        shared = self._shared
        policy = self.config.policy if onnx_path is None else dataclasses.replace(self.config.policy,
                                                                                     onnx=str(onnx_path))
        self._policy, shared.x0 = make_policy(policy, self.config.seed, shared.env)
        self._action_map = ActionMap(shared.env.action_space, policy)

    def init_solver(self) -> None:
        """Build the noise (the shared table when cached; this agent owns it) and the solver."""
        shared = self._shared
        if shared.x0 is None:
            self.load_inference_model()
        x0 = shared.x0
        assert x0 is not None, "load_inference_model() sets the initial parameters"
        sampling = self.config.solver.sampling.gaussian_sampling
        self._release_table()
        if sampling.cached:
            shared.table = NoiseTable.create(sampling.seed, sampling.cache_size)
        shared.noise = NoiseSource(sampling.seed, len(x0), shared.table)
        shared.solver = make_solver(self.config.solver, x0, shared.noise)

    def clone(self) -> "ESAgent":
        """A sampling agent sharing this agent's solver, noise and statistics, with its own parameters."""
        if self._policy is None:
            raise RuntimeError("call load_inference_model() before clone()")
        twin = ESAgent.__new__(ESAgent)
        twin._shared = self._shared
        twin._policy = OnnxPolicy(self._policy.to_bytes())
        twin._action_map = self._action_map
        twin._info = None
        twin._generation = -1
        twin.is_clone = True
        return twin

    def noise_spec(self) -> NoiseSpec:
        """How a sampling worker in another process finds this agent's noise."""
        noise, table = self._shared.noise, self._shared.table
        if noise is None:
            raise RuntimeError("call init_solver() first")
        return NoiseSpec(noise.seed, noise.dim, table.name if table else None, table.size if table else 0)

    def policy_bytes(self) -> bytes:
        """The serialized weights-as-inputs policy graph (what sampling workers load)."""
        return self._loaded_policy().to_bytes()

    def add_noise(self, info: SamplingInfo | None = None) -> SamplingInfo:
        """Perturb this agent's parameters with the next candidate of the generation (or with the
        given ``info``, which reproduces that candidate exactly); returns the sampling info."""
        solver, shared = self.solver, self._shared
        if info is None:
            if shared.pending_generation != solver.generation:
                shared.pending, shared.pending_generation = list(solver.ask()), solver.generation
            if not shared.pending:
                raise RuntimeError(f"all {self.config.solver.population_size} candidates of generation "
                                   f"{solver.generation} are out: call update() with their rewards")
            info = shared.pending.pop(0)
        self._loaded_policy().set_parameters(solver.basis().candidate(info, self._noise()))
        self._info, self._generation = info, solver.generation
        return info

    def parameters(self) -> np.ndarray:
        """The parameters ``predict`` uses now (float32)."""
        return self._refresh().get_parameters()

    def predict(self, obs: np.ndarray):
        """The action for one observation (normalised with the shared statistics when configured)."""
        policy = self._refresh()
        x = normalise(obs, *normalisation(self.obs_stats, self.config.observation_normalization))
        return self._action_map(policy(x)[0])

    def update(self, sampling_infos: Sequence[SamplingInfo], rewards: Sequence[float],
               stale: Literal["refuse", "drop"] = "refuse") -> int:
        """Tell the solver the rewards of these candidates; every clone sees the new parameters.

        Infos may come from the last ``solver.max_staleness`` versions (BASIC_ES corrects them);
        older ones raise :class:`~evokit_py.solvers.StaleSampleError` (``stale="refuse"``) or are
        left out and counted (``stale="drop"``). Returns the number dropped.
        """
        dropped = self.solver.tell(list(sampling_infos), rewards, stale)
        self._shared.pending = []
        return dropped

    def _loaded_policy(self) -> OnnxPolicy:
        if self._policy is None:
            raise RuntimeError("call load_inference_model() first")
        return self._policy

    def _noise(self) -> NoiseSource:
        if self._shared.noise is None:
            raise RuntimeError("call init_solver() first")
        return self._shared.noise

    def _refresh(self) -> OnnxPolicy:
        """The policy, with the current solution unless this agent perturbed it in this generation."""
        policy = self._loaded_policy()
        solver = self._shared.solver
        if solver is None:
            return policy  # no solver yet: the policy keeps its loaded parameters
        if self._info is None or self._generation != solver.generation:
            self._info = None
            policy.set_parameters(solver.solution())
            self._generation = solver.generation
        return policy

    def save_inference_model(self, path: "str | os.PathLike", params: np.ndarray | None = None,
                             obs_stats: dict | None = None) -> None:
        """Write a standalone ONNX model of ``params`` (default: the current solution), weights as
        initializers and the observation normalisation folded in when configured, atomically.

        Args:
            obs_stats: the normalisation statistics (an :meth:`ObsStats.state_dict`) that go with
                ``params``; default: the current ones.
        """
        params = self.solver.solution() if params is None else params
        stats = self.obs_stats if obs_stats is None else ObsStats.from_state_dict(obs_stats)
        model = self._loaded_policy().to_onnx(params, *normalisation(stats, self.config.observation_normalization))
        self._generation = -1  # to_onnx changed the policy's parameters
        write_bytes_atomically(path, model.SerializeToString())

    def save_solver(self, path: "str | Path", extra: dict | None = None) -> None:
        """Write parameters, solver and optimizer state, noise seed, generation and observation
        statistics to an HDF5 file, atomically."""
        solver = self.solver
        write_checkpoint(path, solver_type=self.config.solver.type, config_yaml=self.config.to_yaml(),
                         noise_seed=self._noise().seed, params=solver.solution(),
                         solver_state=solver.state_dict(), obs_stats=self.obs_stats.state_dict(), extra=extra)

    def load_solver(self, path: "str | Path") -> dict:
        """Restore what :meth:`save_solver` wrote; returns its ``extra`` datasets.

        Raises:
            SolverCheckpointError: the file is unreadable or corrupted, or was written with another
                value of a key a resumed run must keep (see ``evokit_py.checkpoint.RESUME_FIXED_KEYS``)
                or for another number of parameters.
        """
        attrs, groups = read_checkpoint(path)
        solver = self.solver
        stored = config_from_yaml_text(str(attrs["config"]))
        check_resume(path, stored, self.config)
        if attrs["solver_type"] != self.config.solver.type:
            raise SolverCheckpointError(f"{path} holds a {attrs['solver_type']} solver, the config says "
                                        f"solver.type {self.config.solver.type}")
        if int(attrs["noise_seed"]) != self._noise().seed:
            raise SolverCheckpointError(f"{path} was sampled with solver.sampling.gaussian_sampling.seed "
                                        f"{attrs['noise_seed']}, the config says {self._noise().seed}")
        if groups["params"]["params"].shape != (solver.dim,):
            raise SolverCheckpointError(f"{path} has {groups['params']['params'].shape[0]} parameters, "
                                        f"the policy has {solver.dim}")
        if stored.solver.population_size != self.config.solver.population_size:
            raise SolverCheckpointError(f"{path}: solver.population_size was {stored.solver.population_size}, "
                                        f"the config says {self.config.solver.population_size}")
        try:
            solver.load_state_dict(groups["solver"])
        except KeyError as error:
            raise SolverCheckpointError(f"{path}: the {attrs['solver_type']} state has no {error} (written by an "
                                        f"older evokit_py?)") from error
        self.obs_stats.load_state_dict(groups["obs_stats"])
        self._shared.pending = []
        self._generation = -1
        return groups["extra"]

    def _release_table(self) -> None:
        if self._shared.table is not None:
            self._shared.table.unlink()
            self._shared.table = None

    def close(self) -> None:
        """Master only: destroy the shared noise table (clones just drop their reference)."""
        if not self.is_clone:
            self._release_table()
            self._shared.env.close()

    def __enter__(self) -> "ESAgent":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
