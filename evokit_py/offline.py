"""Online sampling, offline update: one process samples and logs, another updates the solver.

The sampler loads the solver checkpoint (if any), evaluates the generation's candidates and appends
one JSON line to the sampling log: ``{"generation", "infos", "rewards", "obs_sum", "obs_sumsq",
"obs_count"}`` (infos as ``[seed, offset, sign, parent]``, never the noise). The updater reads the
line of the checkpoint's generation, tells the solver, folds in the observation statistics and
writes the checkpoint (and an ONNX policy) atomically. Both use the same episode seeds as
``es-train``, so a cycle of them reproduces the trainer's generations exactly.
"""
import json
import os
from pathlib import Path

import numpy as np

from evokit_py.agent import ESAgent
from evokit_py.config import ESConfig
from evokit_py.noise import SamplingInfo
from evokit_py.rollout import Sampler, candidate_seeds

__all__ = ["sample_generation", "update_from_log"]


def _agent(config: ESConfig, checkpoint: Path) -> ESAgent:
    agent = ESAgent(config)
    agent.load_inference_model()
    agent.init_solver()
    if checkpoint.is_file():
        agent.load_solver(checkpoint)
    return agent


def sample_generation(config: ESConfig, checkpoint: "str | os.PathLike", log_path: "str | os.PathLike") -> int:
    """Evaluate the checkpoint's current generation and append its infos and rewards to ``log_path``.

    Returns:
        The generation sampled.
    """
    checkpoint, log_path = Path(checkpoint), Path(log_path)
    with _agent(config, checkpoint) as agent:
        solver = agent.solver
        generation = solver.generation
        infos = solver.ask()
        normalise = config.observation_normalization
        mean = agent.obs_stats.mean().astype("float32") if normalise else None
        std = agent.obs_stats.std().astype("float32") if normalise else None
        seeds = candidate_seeds(config, generation, len(infos))
        sampler = Sampler(config, agent.policy_bytes(), agent.noise_spec())
        try:
            result = sampler.evaluate(solver.basis().to_dict(), mean, std, [i.to_list() for i in infos], seeds)
        finally:
            sampler.close()
    record = {"generation": generation, "infos": [i.to_list() for i in infos],
              "rewards": result["returns"].tolist(), "obs_sum": result["obs_sum"].tolist(),
              "obs_sumsq": result["obs_sumsq"].tolist(), "obs_count": int(result["obs_count"])}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as handle:
        handle.write(json.dumps(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return generation


def update_from_log(config: ESConfig, checkpoint: "str | os.PathLike", log_path: "str | os.PathLike",
                    onnx_path: "str | os.PathLike | None" = None) -> int:
    """Apply the logged generation that matches the checkpoint, then save the checkpoint.

    Returns:
        The solver's generation after the update.

    Raises:
        ValueError: the log has no line for the checkpoint's generation.
    """
    checkpoint, log_path = Path(checkpoint), Path(log_path)
    with _agent(config, checkpoint) as agent:
        generation = agent.solver.generation
        records = [json.loads(line) for line in Path(log_path).read_text().splitlines() if line.strip()]
        matching = [r for r in records if r["generation"] == generation]
        if not matching:
            raise ValueError(f"sampling log {log_path} has no line for generation {generation}")
        record = matching[-1]
        agent.update([SamplingInfo.from_list(i) for i in record["infos"]], record["rewards"])
        if config.observation_normalization:
            agent.obs_stats.add(np.asarray(record["obs_sum"]), np.asarray(record["obs_sumsq"]), record["obs_count"])
        agent.save_solver(checkpoint)
        if onnx_path is not None:
            agent.save_inference_model(onnx_path)
        return agent.solver.generation
