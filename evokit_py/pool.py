"""Where candidates are evaluated: :class:`Sampler` s in this process or as ``parl_lite`` actors.

The trainer only calls :meth:`EvaluationPool.evaluate`. Candidates are dealt to workers by stride
(worker k gets candidates k, k+W, ...), which balances episodes of very different lengths better
than contiguous blocks; results come back in candidate order, so the outcome does not depend on the
number of workers.
"""
from typing import List, Optional, Sequence

import numpy as np

from evokit_py.config import ESConfig
from evokit_py.rollout import NoiseSpec, Sampler

__all__ = ["EvaluationPool"]


class EvaluationPool:
    """``workers`` samplers behind one ``evaluate`` call.

    Args:
        config: the ES config.
        policy_bytes: the serialized weights-as-inputs policy graph.
        noise: where workers find the noise.
        workers: number of samplers.
        backend: ``"remote"`` (one ``parl_lite`` actor per worker process) or ``"inprocess"``
            (samplers in this process, evaluated one after the other; for tests and debugging).
    """

    def __init__(self, config: ESConfig, policy_bytes: bytes, noise: NoiseSpec, workers: int,
                 backend: str = "remote"):
        if workers < 1:
            raise ValueError(f"train.workers must be >= 1, got {workers}")
        if backend not in ("remote", "inprocess"):
            raise ValueError(f"backend must be 'remote' or 'inprocess', got {backend!r}")
        self.backend = backend
        if backend == "remote":
            import parl_lite
            remote_sampler = parl_lite.remote_class(wait=False)(Sampler)
            self.workers = [remote_sampler(config, policy_bytes, noise) for _ in range(workers)]
        else:
            self.workers = [Sampler(config, policy_bytes, noise) for _ in range(workers)]

    def evaluate(self, basis: dict, obs_mean: Optional[np.ndarray], obs_std: Optional[np.ndarray],
                 infos: Sequence[List[int]], seeds: Sequence[List[int]]) -> dict:
        """Evaluate every candidate (see :meth:`Sampler.evaluate`); results in candidate order."""
        count = len(self.workers)
        shares = [list(range(k, len(infos), count)) for k in range(count)]
        calls = [(worker, share) for worker, share in zip(self.workers, shares) if share]
        pending = [worker.evaluate(basis, obs_mean, obs_std, [infos[i] for i in share], [seeds[i] for i in share])
                   for worker, share in calls]
        if self.backend == "remote":
            import parl_lite
            pending = parl_lite.get(pending)
        returns = np.zeros(len(infos))
        merged = {"steps": 0, "obs_sum": 0.0, "obs_sumsq": 0.0, "obs_count": 0}
        for (_, share), result in zip(calls, pending):
            returns[share] = result["returns"]
            for key in merged:
                merged[key] = merged[key] + result[key]
        return {"returns": returns, **merged}

    def close(self) -> None:
        """Close every sampler (a remote actor's ``close`` ends the actor)."""
        for worker in self.workers:
            worker.close()
        self.workers = []
