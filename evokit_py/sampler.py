"""Episodes of an ONNX policy in a gymnasium environment: all that a sampling worker imports.

Nothing here imports paddle, the solvers or the trainer's modules. A :class:`Sampler` holds one
environment, one ONNX session and a view of the noise table; it receives a basis (once per
generation) and sampling infos, and returns returns plus observation sums for the normalisation
statistics.
"""
import time
from collections.abc import Sequence

import numpy as np

from evokit_py.basis import Basis
from evokit_py.envs import ActionMap, make_env, observation_size
from evokit_py.noise import NoiseSource, NoiseSpec, NoiseTable, SamplingInfo
from evokit_py.obs_stats import normalise
from evokit_py.policy import sampling_policy
from evokit_py.sections import WorkerConfig

__all__ = ["Sampler", "aggregate"]


def aggregate(per_candidate: dict) -> dict:
    """Totals of :meth:`Sampler.evaluate` results (all candidates, in candidate order): ``returns``
    and ``candidate_steps`` stay per candidate; ``steps``, ``obs_sum``, ``obs_sumsq``, ``obs_count``
    and ``cpu_seconds`` are totals."""
    steps = int(per_candidate["steps"].sum())
    return {"returns": per_candidate["returns"], "candidate_steps": per_candidate["steps"], "steps": steps,
            "obs_sum": per_candidate["obs_sum"].sum(axis=0), "obs_sumsq": per_candidate["obs_sumsq"].sum(axis=0),
            "obs_count": steps, "cpu_seconds": float(per_candidate["cpu_seconds"].sum())}


class Sampler:
    """One environment + one ONNX session + the noise: evaluates candidates given by sampling infos.

    Args:
        config: what the worker reads of the ES config (the env, the policy, the observation statistics).
        policy_bytes: the serialized weights-as-inputs policy graph.
        noise: where the noise table lives (attached, never owned, by the sampler; rebuilt from
            its seed where that shared memory does not exist).
    """

    def __init__(self, config: WorkerConfig, policy_bytes: bytes, noise: NoiseSpec):
        self.config = config
        self.env = make_env(config.env)
        self.policy = sampling_policy(config.policy, policy_bytes, self.env)
        self._table = (NoiseTable.attach_or_rebuild(noise.table_name, noise.seed, noise.table_size)
                       if noise.table_name else None)
        self.noise = NoiseSource(noise.seed, noise.dim, self._table)
        self.action_map = ActionMap(self.env.action_space, config.policy)

    def evaluate(self, basis: dict, obs_mean: np.ndarray | None, obs_std: np.ndarray | None,
                 infos: Sequence[Sequence[int]], seeds: Sequence[Sequence[int]]) -> dict:
        """Evaluate candidates: ``infos[i]`` (a :class:`SamplingInfo` as a list) for the episodes
        reset with ``seeds[i]``.

        Returns:
            Per candidate: ``returns`` (mean episode return), ``steps``, ``obs_sum`` and ``obs_sumsq``
            (rows) over the observations seen, for the normalisation statistics, and
            ``cpu_seconds`` (this process's CPU time for the candidate's episodes). Per-candidate
            rows keep the sums independent of how candidates are split among workers.
        """
        basis_obj = Basis.from_dict(basis)
        obs_dim = observation_size(self.env.observation_space)
        returns, steps = np.zeros(len(infos)), np.zeros(len(infos), dtype=np.int64)
        obs_sum, obs_sumsq = np.zeros((len(infos), obs_dim)), np.zeros((len(infos), obs_dim))
        cpu_seconds = np.zeros(len(infos))
        for i, (info, episode_seeds) in enumerate(zip(infos, seeds, strict=True)):
            tick = time.process_time()
            self.policy.set_parameters(basis_obj.candidate(SamplingInfo.from_list(info), self.noise))
            for seed in episode_seeds:
                episode_return, observations = self.run_episode(int(seed), obs_mean, obs_std)
                returns[i] += episode_return / len(episode_seeds)
                steps[i] += len(observations)
                obs_sum[i] += observations.sum(axis=0)
                obs_sumsq[i] += np.square(observations).sum(axis=0)
            cpu_seconds[i] = time.process_time() - tick
        return {"returns": returns, "steps": steps, "obs_sum": obs_sum, "obs_sumsq": obs_sumsq,
                "cpu_seconds": cpu_seconds}

    def run_episode(self, seed: int, obs_mean: np.ndarray | None = None,
                    obs_std: np.ndarray | None = None) -> "tuple[float, np.ndarray]":
        """One episode with the current parameters; returns its return and the raw observations."""
        obs, _ = self.env.reset(seed=seed)
        observations: list[np.ndarray] = []
        total = 0.0
        policy, action_map, step, normalise_obs = self.policy, self.action_map, self.env.step, normalise
        clip = self.config.observation_stats.clip
        while True:  # the env's time limit (``env.max_steps``, see make_env) ends an episode too
            observations.append(obs)
            action = action_map(policy(normalise_obs(obs, obs_mean, obs_std, clip))[0])
            obs, reward, terminated, truncated, _ = step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return total, np.asarray(observations, dtype=np.float64)

    def release(self) -> None:
        """Close the environment and unmap the noise table. For samplers in this process: a remote
        sampler's worker process does this as it ends, so that closing the actor (no ``close``
        method to run) does not wait behind an episode still running."""
        self.env.close()
        if self._table is not None:
            self._table.close()
