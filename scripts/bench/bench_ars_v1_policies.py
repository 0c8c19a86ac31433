"""The ARS authors' published linear policies, trained on gym's v1 MuJoCo tasks, run on gymnasium's.

    python scripts/bench/bench_ars_v1_policies.py --policy Hopper-v5=Hopper-v1/lin_policy_plus.npz \\
        --policy Swimmer-v5=Swimmer-v1/lin_policy_plus.npz --episodes 20

The ARS paper's figures come from the v1 tasks (gym 0.9.3, mujoco-py 0.5.7, MuJoCo Pro 1.31), which
gymnasium does not register (it has v2 to v5); mujoco-py 0.5.7 loads ``libmujoco131.so`` from MuJoCo
Pro 1.31's own bundle, which is not on PyPI. A policy that reached its
threshold on v1 and falls on v5 shows how far the two tasks' dynamics are apart, apart from any
training method. The policy files are the ``lin_policy_plus.npz`` files (``gait5_reward_11200.npz``
for Walker2d) of the ``trained_policies`` folder of the ARS authors' repository
(github.com/modestyachts/ARS): a pickled object array ``[M, mean, std]``, read here by an unpickler
that builds numpy arrays and nothing else. As the authors' ``run_policy.py`` does, the action is
``M @ ((obs - mean) / std)``, passed unclipped (MuJoCo clamps the controls).

Each policy plays ``--episodes`` episodes seeded from 10**9 (as ``bench_es_mujoco.py`` seeds its
final episodes). Prints ONE JSON line: per task, the returns' mean, min and max, the mean episode
length and how many episodes ran to the time limit.
"""
import argparse
import importlib.metadata
import json
import pickle
import sys
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np

_ARRAY_GLOBALS = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
                  ("numpy._core.multiarray", "_reconstruct"), ("_codecs", "encode")}
_MAX_POLICY_BYTES = 1 << 20


class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays; any other global in the stream is refused before it is looked up."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _ARRAY_GLOBALS:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which is not part of a numpy array")
        return super().find_class(module, name)


def load_ars_policy(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(M, mean, std)`` from an ARS ``lin_policy_plus.npz``; ``ValueError`` naming ``path`` otherwise."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) != 1 or members[0].file_size > _MAX_POLICY_BYTES:
                raise ValueError(f"holds {[m.filename for m in members]}, not one array of at most "
                                 f"{_MAX_POLICY_BYTES} bytes")
            with archive.open(members[0]) as stream:
                version = np.lib.format.read_magic(stream)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read_header(stream)
                if dtype.kind != "O" or shape != (3,):
                    raise ValueError(f"holds a {dtype} array of shape {shape}, not the object array [M, mean, std]")
                weights, mean, std = _ArraysOnly(stream, encoding="latin1").load()
    except (OSError, zipfile.BadZipFile, pickle.UnpicklingError, ValueError, TypeError, EOFError) as error:
        raise ValueError(f"{path}: not an ARS policy file: {error}") from None
    return np.asarray(weights, np.float64), np.asarray(mean, np.float64), np.asarray(std, np.float64)


def play(env_id: str, policy: tuple[np.ndarray, np.ndarray, np.ndarray], episodes: int) -> dict:
    """The policy's returns and episode lengths on ``episodes`` episodes of ``env_id`` seeded from 10**9."""
    weights, mean, std = policy
    env = gym.make(env_id)
    try:
        observation_shape = env.observation_space.shape or ()
        expected = (*(env.action_space.shape or ()), *observation_shape)
        statistics = ((), observation_shape)  # a scalar mean and std: trained without normalisation (Swimmer)
        if weights.shape != expected or mean.shape not in statistics or std.shape not in statistics:
            raise ValueError(f"{env_id}: takes a policy M of shape {expected} with a mean and std of shape "
                             f"{observation_shape} or (), the file has {weights.shape}, {mean.shape} and {std.shape}")
        returns, lengths = [], []
        for seed in range(10**9, 10**9 + episodes):
            obs, _ = env.reset(seed=seed)
            total, steps, ended = 0.0, 0, False
            while not ended:
                obs, reward, terminated, truncated, _ = env.step(weights @ ((obs - mean) / std))
                total, steps, ended = total + float(reward), steps + 1, terminated or truncated
            returns.append(total)
            lengths.append(steps)
        limit = env.spec.max_episode_steps if env.spec else None
    finally:
        env.close()
    return {"return_mean": round(float(np.mean(returns)), 1), "return_min": round(min(returns), 1),
            "return_max": round(max(returns), 1), "episode_length_mean": round(float(np.mean(lengths)), 1),
            "episodes_to_time_limit": sum(length == limit for length in lengths), "episodes": episodes}


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _task_and_file(text: str) -> tuple[str, Path]:
    env_id, separator, path = text.partition("=")
    if not separator or not env_id or not path:
        raise argparse.ArgumentTypeError(f"--policy takes ENV_ID=PATH, like Hopper-v5=lin_policy_plus.npz, "
                                         f"not {text!r}")
    return env_id, Path(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", type=_task_and_file, action="append", required=True, metavar="ENV_ID=PATH",
                        help="a gymnasium task and an ARS policy file to run on it (repeatable)")
    parser.add_argument("--episodes", type=int, default=20, help="fresh episodes per policy")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes takes a positive number, not {args.episodes}")
    try:
        policies = {env_id: load_ars_policy(path) for env_id, path in args.policy}
        tasks = {env_id: {"policy_file": str(path), **play(env_id, policies[env_id], args.episodes)}
                 for env_id, path in args.policy}
    except (ValueError, gym.error.Error) as error:
        sys.exit(f"bench_ars_v1_policies: {error}")
    print(json.dumps({"gymnasium": gym.__version__, "mujoco": _version("mujoco"), "tasks": tasks}))


if __name__ == "__main__":
    main()
