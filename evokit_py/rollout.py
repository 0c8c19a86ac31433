"""Episodes of an ONNX policy in a gymnasium environment: what a sampling worker runs.

Nothing here imports paddle. A :class:`Sampler` holds one environment, one ONNX session and a view of
the noise table; it receives a basis (once per generation) and sampling infos, and returns returns
plus observation sums for the normalisation statistics.
"""
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from evokit_py.config import ESConfig
from evokit_py.noise import NoiseSource, NoiseTable, SamplingInfo
from evokit_py.obs_stats import normalise
from evokit_py.policy import OnnxPolicy, build_mlp
from evokit_py.basis import Basis

__all__ = ["NoiseSpec", "Sampler", "make_env", "make_policy", "check_policy", "episode_seed",
           "candidate_seeds", "candidate_episode_seeds", "ActionMap", "aggregate"]

def make_env(config: ESConfig) -> gym.Env:
    """The environment of ``config.env`` (errors name ``env.id`` / ``env.kwargs``)."""
    try:
        env = gym.make(config.env.id, **config.env.kwargs)
    except gym.error.Error as error:
        raise ValueError(f"env.id / env.kwargs: cannot make {config.env.id!r} with {config.env.kwargs}: "
                         f"{error}") from error
    except TypeError as error:
        raise ValueError(f"env.kwargs: {config.env.kwargs} do not fit {config.env.id!r}: {error}") from error
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        env.close()
        raise ValueError(f"env.id: {config.env.id} has the observation space {space}; evokit_py needs a flat "
                         f"Box (a vector of numbers)")
    return env


def make_policy(config: ESConfig, env: gym.Env) -> "tuple[OnnxPolicy, np.ndarray]":
    """The policy of ``config.policy`` for ``env`` and its initial parameters."""
    if config.policy.onnx:
        return OnnxPolicy.from_file(config.policy.onnx)
    obs_space, act_space = env.observation_space, env.action_space
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        raise ValueError(f"policy.mlp: needs a flat Box observation space, {config.env.id} has {obs_space}")
    mlp = config.policy.mlp
    if isinstance(act_space, gym.spaces.Discrete):
        act_dim, output = int(act_space.n), ("none" if mlp.output_activation == "auto" else mlp.output_activation)
    elif isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
        act_dim = int(act_space.shape[0])
        output = "tanh" if mlp.output_activation == "auto" else mlp.output_activation
    else:
        raise ValueError(f"policy.mlp: action space {act_space} of {config.env.id} is not Discrete or a flat Box")
    policy = OnnxPolicy(build_mlp(obs_space.shape[0], act_dim, mlp.hidden, mlp.activation, output))
    rng = np.random.default_rng(config.seed)
    x0 = np.zeros(policy.param_size)
    if mlp.init_std > 0:
        x0 = mlp.init_std * rng.standard_normal(policy.param_size)
    return policy, x0


def _output_op(policy: OnnxPolicy) -> str:
    """The op type that produces the policy's output, looking through Identity nodes."""
    producers = {output: node for node in policy.model.graph.node for output in node.output}
    node = producers.get(policy.output_name)
    while node is not None and node.op_type == "Identity":
        node = producers.get(node.input[0])
    return node.op_type if node is not None else ""


def check_policy(policy: OnnxPolicy, env: gym.Env, source: str) -> None:
    """Refuse a policy that does not fit ``env`` before any episode runs.

    Args:
        source: what the policy came from, for the message (the ONNX file, or ``policy.mlp``).

    Raises:
        ValueError: naming ``source`` and the space: the observation does not go in, the output
            size is not the action count (Discrete) or the action size (Box), or a softmax output
            drives a continuous action.
    """
    obs_space, act_space = env.observation_space, env.action_space
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        raise ValueError(f"{source}: needs a flat Box observation space, the environment has {obs_space}")
    try:
        output = policy(np.zeros((1, obs_space.shape[0]), dtype=np.float32))
    except Exception as error:  # onnxruntime raises its own exception types for a wrong input
        raise ValueError(f"{source}: does not take the observations of {obs_space} "
                         f"(shape [1, {obs_space.shape[0]}]): {error}") from error
    if output.ndim != 2 or output.shape[0] != 1:
        raise ValueError(f"{source}: gives an output of shape {list(output.shape)} for one observation; "
                         f"expected [1, actions]")
    size = output.shape[1]
    if isinstance(act_space, gym.spaces.Discrete):
        if size != act_space.n:
            raise ValueError(f"{source}: has {size} output(s), the action space {act_space} needs {act_space.n} "
                             f"(one score per action, the action is their argmax)")
    elif isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
        if size != act_space.shape[0]:
            raise ValueError(f"{source}: has {size} output(s), the action space {act_space} needs "
                             f"{act_space.shape[0]}")
        if _output_op(policy) == "Softmax":
            raise ValueError(f"{source}: ends in a softmax, which cannot drive the continuous action space "
                             f"{act_space} (use tanh, scaled to the bounds, or no output activation)")
    else:
        raise ValueError(f"{source}: action space {act_space} is not Discrete or a flat Box")


def observation_size(env: gym.Env) -> int:
    """The length of ``env``'s observations (the first axis of the observation space's shape).

    Raises:
        ValueError: the observation space has no shape.
    """
    shape = env.observation_space.shape
    if not shape:
        raise ValueError(f"env.id: the observation space {env.observation_space} has no shape")
    return shape[0]


class ActionMap:
    """Policy output row -> environment action: argmax for Discrete; for Box, a tanh output in
    [-1, 1] is scaled to finite bounds, anything else is clipped to them."""

    def __init__(self, space: gym.Space, tanh_output: bool):
        self.discrete = isinstance(space, gym.spaces.Discrete)
        if not self.discrete:
            if not isinstance(space, gym.spaces.Box):
                raise ValueError(f"action space {space} is neither Discrete nor Box")
            self.low, self.high = space.low.astype(np.float32), space.high.astype(np.float32)
            self.scale = tanh_output and bool(np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high)))

    def __call__(self, output: np.ndarray):
        if self.discrete:
            return int(output.argmax())
        if self.scale:
            return self.low + (output + 1.0) * 0.5 * (self.high - self.low)
        return np.clip(output, self.low, self.high)


@functools.lru_cache(maxsize=4096)  # a SeedSequence costs ~40 us; with common seeds a batch asks the same ones
def episode_seed(seed: int, generation: int, index: int, episode: int) -> int:
    """The reset seed of one episode: independent of which worker runs it (resume reproduces it)."""
    return int(np.random.SeedSequence([seed, generation, index, episode]).generate_state(1)[0])


def candidate_seeds(config: ESConfig, generation: int, count: int) -> list[list[int]]:
    """The reset seeds of ``count`` candidates' episodes in ``generation``. With
    ``env.common_episode_seeds`` every candidate starts from the same states (common random numbers:
    candidates are compared on equal terms); otherwise each candidate gets its own."""
    return [candidate_episode_seeds(config, generation, i) for i in range(count)]


def candidate_episode_seeds(config: ESConfig, generation: int, index: int) -> list[int]:
    """The reset seeds of candidate ``index``'s episodes in ``generation`` (see :func:`candidate_seeds`)."""
    index = 0 if config.env.common_episode_seeds else index
    return [episode_seed(config.seed, generation, index, e) for e in range(config.env.episodes_per_candidate)]


def aggregate(per_candidate: dict) -> dict:
    """Totals of :meth:`Sampler.evaluate` results (all candidates, in candidate order): ``returns``
    stays per candidate; ``steps``, ``obs_sum``, ``obs_sumsq`` and ``obs_count`` are totals."""
    steps = int(per_candidate["steps"].sum())
    return {"returns": per_candidate["returns"], "steps": steps, "obs_sum": per_candidate["obs_sum"].sum(axis=0),
            "obs_sumsq": per_candidate["obs_sumsq"].sum(axis=0), "obs_count": steps}


@dataclass
class NoiseSpec:
    """How a worker finds the noise: the table's shared-memory name (cached) or just the seed."""
    seed: int
    dim: int
    table_name: str | None = None
    table_size: int = 0


class Sampler:
    """One environment + one ONNX session + the noise: evaluates candidates given by sampling infos.

    Args:
        config: the ES config (env, max steps, episodes per candidate, normalisation).
        policy_bytes: the serialized weights-as-inputs policy graph.
        noise: where the noise table lives (attached, never owned, by the sampler; rebuilt from
            its seed where that shared memory does not exist).
    """

    def __init__(self, config: ESConfig, policy_bytes: bytes, noise: NoiseSpec):
        self.config = config
        self.env = make_env(config)
        self.policy = OnnxPolicy.from_bytes(policy_bytes)
        self._table = (NoiseTable.attach_or_rebuild(noise.table_name, noise.seed, noise.table_size)
                       if noise.table_name else None)
        self.noise = NoiseSource(noise.seed, noise.dim, self._table)
        tanh = config.policy.onnx is None and config.policy.mlp.output_activation in ("auto", "tanh")
        self.action_map = ActionMap(self.env.action_space, tanh)
        self.max_steps = config.env.max_steps or 10**9

    def evaluate(self, basis: dict, obs_mean: np.ndarray | None, obs_std: np.ndarray | None,
                 infos: Sequence[Sequence[int]], seeds: Sequence[Sequence[int]]) -> dict:
        """Evaluate candidates: ``infos[i]`` (a :class:`SamplingInfo` as a list) for the episodes
        reset with ``seeds[i]``.

        Returns:
            Per candidate: ``returns`` (mean episode return), ``steps``, and ``obs_sum``,
            ``obs_sumsq`` (rows) over the observations seen, for the normalisation statistics.
            Per-candidate rows keep the sums independent of how candidates are split among workers.
        """
        basis_obj = Basis.from_dict(basis)
        obs_dim = observation_size(self.env)
        returns, steps = np.zeros(len(infos)), np.zeros(len(infos), dtype=np.int64)
        obs_sum, obs_sumsq = np.zeros((len(infos), obs_dim)), np.zeros((len(infos), obs_dim))
        for i, (info, episode_seeds) in enumerate(zip(infos, seeds, strict=True)):
            self.policy.set_parameters(basis_obj.candidate(SamplingInfo.from_list(info), self.noise))
            for seed in episode_seeds:
                episode_return, observations = self.run_episode(int(seed), obs_mean, obs_std)
                returns[i] += episode_return / len(episode_seeds)
                steps[i] += len(observations)
                obs_sum[i] += observations.sum(axis=0)
                obs_sumsq[i] += np.square(observations).sum(axis=0)
        return {"returns": returns, "steps": steps, "obs_sum": obs_sum, "obs_sumsq": obs_sumsq}

    def run_episode(self, seed: int, obs_mean: np.ndarray | None = None,
                    obs_std: np.ndarray | None = None) -> "tuple[float, np.ndarray]":
        """One episode with the current parameters; returns its return and the raw observations."""
        obs, _ = self.env.reset(seed=seed)
        observations: list[np.ndarray] = []
        total = 0.0
        policy, action_map, step = self.policy, self.action_map, self.env.step
        for _ in range(self.max_steps):
            observations.append(obs)
            obs, reward, terminated, truncated, _ = step(action_map(policy(normalise(obs, obs_mean, obs_std))[0]))
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
