"""What a run writes and reads back: its solver checkpoint (HDF5, :mod:`evokit_py.checkpoint`)
and its policy as a standalone ONNX model, both written atomically."""
import os

import numpy as np

from evokit_py.checkpoint import SolverCheckpointError, check_resume, read_checkpoint, write_checkpoint
from evokit_py.config import config_from_yaml_text
from evokit_py.obs_stats import ObsStats
from evokit_py.training.setup import Run
from parl_lite.common.atomic import write_bytes_atomically

__all__ = ["save_checkpoint", "restore_checkpoint", "export_policy"]


def save_checkpoint(run: Run, path: "str | os.PathLike", extra: dict | None = None) -> None:
    """Write the solution, the solver and optimizer state, the noise seed, the generation, the
    observation statistics and ``extra`` datasets to an HDF5 file, atomically."""
    solver = run.solver
    write_checkpoint(path, solver_type=run.config.solver.type, config_yaml=run.config.to_yaml(),
                     noise_seed=run.noise.seed, params=solver.solution(), solver_state=solver.state_dict(),
                     obs_stats=run.obs_stats.state_dict(), extra=extra)


def restore_checkpoint(run: Run, path: "str | os.PathLike") -> dict[str, np.ndarray]:
    """Put the run's solver and statistics where :func:`save_checkpoint` left them; returns the
    ``extra`` datasets.

    Raises:
        SolverCheckpointError: the file is unreadable or corrupted, or was written with another
            value of a key a resumed run must keep (see ``evokit_py.checkpoint.RESUME_FIXED_KEYS``)
            or for another number of parameters.
    """
    attrs, groups = read_checkpoint(path)
    config, solver = run.config, run.solver
    stored = config_from_yaml_text(str(attrs["config"]))
    check_resume(path, stored, config)
    if attrs["solver_type"] != config.solver.type:
        raise SolverCheckpointError(f"{path} holds a {attrs['solver_type']} solver, the config says "
                                    f"solver.type {config.solver.type}")
    if int(attrs["noise_seed"]) != run.noise.seed:
        raise SolverCheckpointError(f"{path} was sampled with solver.sampling.gaussian_sampling.seed "
                                    f"{attrs['noise_seed']}, the config says {run.noise.seed}")
    if groups["params"]["params"].shape != (solver.dim,):
        raise SolverCheckpointError(f"{path} has {groups['params']['params'].shape[0]} parameters, "
                                    f"the policy has {solver.dim}")
    if stored.solver.population_size != config.solver.population_size:
        raise SolverCheckpointError(f"{path}: solver.population_size was {stored.solver.population_size}, "
                                    f"the config says {config.solver.population_size}")
    try:
        solver.load_state_dict(groups["solver"])
    except KeyError as error:
        raise SolverCheckpointError(f"{path}: the {attrs['solver_type']} state has no {error} (written by an "
                                    f"older evokit_py?)") from error
    run.obs_stats.load_state_dict(groups["obs_stats"])
    return groups["extra"]


def export_policy(run: Run, path: "str | os.PathLike", params: np.ndarray | None = None,
                  obs_stats: dict[str, np.ndarray] | None = None) -> None:
    """Write a standalone ONNX model of ``params`` (default: the current solution), weights as
    initializers and the observation normalisation folded in when configured, atomically.

    Args:
        obs_stats: the statistics (an :meth:`ObsStats.state_dict`) that go with ``params``;
            default: the run's current ones.
    """
    params = run.solver.solution() if params is None else params
    stats = None if obs_stats is None else ObsStats.from_state_dict(obs_stats)
    write_bytes_atomically(path, run.policy.to_onnx(params, *run.normalisation(stats),
                                                         run.config.observation_stats.clip).SerializeToString())
