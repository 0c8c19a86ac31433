"""Where candidates are evaluated: :class:`Sampler` s in this process or as ``parl_lite`` actors.

The trainer only calls :meth:`EvaluationPool.evaluate`. Candidates go out in small chunks, the next
chunk to whichever worker finishes first, so that episodes of very different lengths (CartPole: 10
to 500 steps) keep every worker busy. Results are put back in candidate order and summed per
candidate, so the outcome does not depend on the number of workers or on who ran what.
:meth:`EvaluationPool.submit` is the asynchronous mode's: one call on one chosen worker, not waited for.
"""
import concurrent.futures
import math
from collections.abc import Sequence

import numpy as np

from evokit_py.config import ESConfig
from evokit_py.limits import check_cluster_workers, check_local_workers
from evokit_py.noise import NoiseSpec
from evokit_py.sampler import Sampler, aggregate

__all__ = ["EvaluationPool"]

CHUNKS_PER_WORKER = 4  # more chunks balance better; each costs one remote call (~0.1-0.2 ms)
RAY_HERE = "ray://local"  # the Ray backend's address for a Ray started on this machine


class EvaluationPool:
    """``workers`` samplers behind one ``evaluate`` call.

    Args:
        config: the ES config.
        policy_bytes: the serialized weights-as-inputs policy graph.
        noise: where workers find the noise.
        workers: number of worker processes (remote backend).
        backend: ``"remote"`` (one ``parl_lite`` actor per worker process) or ``"inprocess"``
            (one sampler in this process, whatever ``workers`` says; for tests and debugging).
        address: where the remote samplers run, as ``parl_lite.connect`` takes it (``host:port``
            of a parl_lite cluster, ``ray://local``, ...; default: the local pool).

    Raises:
        ConfigError: more workers than the machine or the cluster takes (:mod:`evokit_py.limits`).
    """

    def __init__(self, config: ESConfig, policy_bytes: bytes, noise: NoiseSpec, workers: int,
                 backend: str = "remote", address: str | None = None):
        if workers < 1:
            raise ValueError(f"train.workers must be >= 1, got {workers}")
        if backend not in ("remote", "inprocess"):
            raise ValueError(f"backend must be 'remote' or 'inprocess', got {backend!r}")
        self.backend = backend
        if backend == "remote":
            import parl_lite

            if address in (None, RAY_HERE):  # the workers are processes of this machine
                check_local_workers(workers, config.train.oversubscribe)
            if address is not None:
                status = parl_lite.connect(address).status()
                if status.get("kind") == "cluster":
                    check_cluster_workers(workers, status)
            remote_sampler = parl_lite.remote_class(wait=False)(Sampler)
            self.workers = [remote_sampler(config, policy_bytes, noise) for _ in range(workers)]
        else:
            self.workers = [Sampler(config, policy_bytes, noise)]  # one is enough: they would run in turn

    def evaluate(self, basis: dict, obs_mean: np.ndarray | None, obs_std: np.ndarray | None,
                 infos: Sequence[list[int]], seeds: Sequence[list[int]]) -> dict:
        """Evaluate every candidate (see :meth:`Sampler.evaluate`); returns :func:`aggregate` totals."""
        if self.backend == "inprocess":
            return aggregate(self.workers[0].evaluate(basis, obs_mean, obs_std, infos, seeds))
        import parl_lite

        size = max(1, math.ceil(len(infos) / (CHUNKS_PER_WORKER * len(self.workers))))
        chunks = [range(start, min(start + size, len(infos))) for start in range(0, len(infos), size)]
        results: dict[int, dict] = {}  # chunk index -> its result

        def submit(worker, index):
            chunk = chunks[index]
            return worker.evaluate(basis, obs_mean, obs_std, [infos[i] for i in chunk], [seeds[i] for i in chunk])

        running: dict[concurrent.futures.Future, tuple[Sampler, int]] = {}  # future -> (worker, chunk index)
        next_chunk = 0
        for worker in self.workers[:len(chunks)]:
            running[submit(worker, next_chunk)] = (worker, next_chunk)
            next_chunk += 1
        while running:
            done, _ = parl_lite.wait(list(running), return_when="FIRST_COMPLETED")
            for future in done:
                worker, index = running.pop(future)
                results[index] = future.result()
                if next_chunk < len(chunks):
                    running[submit(worker, next_chunk)] = (worker, next_chunk)
                    next_chunk += 1
        ordered = [results[index] for index in range(len(chunks))]
        return aggregate({key: np.concatenate([result[key] for result in ordered]) for key in ordered[0]})

    @property
    def size(self) -> int:
        """How many calls can run at once (1 for the in-process backend)."""
        return len(self.workers)

    def submit(self, worker: int, basis: dict, obs_mean: np.ndarray | None, obs_std: np.ndarray | None,
               infos: Sequence[list[int]], seeds: Sequence[list[int]]) -> concurrent.futures.Future:
        """Start :meth:`Sampler.evaluate` on worker ``worker`` (0 <= worker < :attr:`size`) and return
        its future at once (in process: a future already done)."""
        if self.backend == "remote":
            return self.workers[worker].evaluate(basis, obs_mean, obs_std, infos, seeds)
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(self.workers[worker].evaluate(basis, obs_mean, obs_std, infos, seeds))
        return future

    def close(self) -> None:
        """Close every sampler at once: a remote actor ends after the calls already sent (their
        results are not waited for), an in-process sampler releases its environment."""
        for worker in self.workers:
            if self.backend == "remote":
                worker.close()
            else:
                worker.release()
        self.workers = []
