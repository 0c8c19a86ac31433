"""Fixed-length, time-major rollouts from a vector environment, locally or in a remote actor.

``VectorRollout.collect(policy, steps)`` returns ``[T, N, ...]`` arrays: ``obs``, ``actions``,
what the policy recorded of the behaviour policy (``log_probs``, and ``behaviour_logits`` for a
discrete policy in a :class:`RolloutWorker`), ``rewards``, ``terminated``, ``ends`` (terminated
or truncated) and ``next_obs`` (the true next observation: the final one when an episode ended),
which is everything GAE and V-trace need with the learner's own value function, plus
``episode_returns``, the returns of the episodes that ended during the call.

``RolloutWorker`` wraps one with a local copy of the policy model, to be run as a
``@remote_class`` actor (A2C's, A3C's and IMPALA's): ``collect(weights, steps)`` loads the
learner's weights, then collects. It acts with the model's policy distribution
(:func:`parl_lite.core.distributions.policy_distribution`), with no algorithm: the learner's
algorithm, its optimizer and hyperparameters stay with the learner. ``OnnxRolloutWorker`` does the
same with the policy's ONNX graph in onnxruntime, its process never importing paddle: the trainers
use it for every model parl_lite's ONNX translation takes.
"""
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium.spaces import Box

from parl_lite.utils.envs import EpisodeReturns, final_observations, make_vector_env

if TYPE_CHECKING:  # actors import paddle only when they run a policy
    from parl_lite.core.model import Model

__all__ = ["VectorRollout", "RolloutWorker", "OnnxPolicySampler", "OnnxRolloutWorker"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

Policy = Callable[[np.ndarray], tuple[np.ndarray, dict[str, np.ndarray]]]


class VectorRollout:
    """A vector environment that keeps its state between :meth:`collect` calls.

    Args:
        env_id: a registered gymnasium id.
        num_envs: number of environment copies.
        seed: copy ``i`` is reset with ``seed + i``.
        env_kwargs: keyword arguments for making the environment (see
            :func:`parl_lite.utils.envs.make_vector_env`).
    """

    def __init__(self, env_id: str, num_envs: int, seed: int, env_kwargs: dict[str, Any] | None = None) -> None:
        self.env, self.obs = make_vector_env(env_id, num_envs, seed, env_kwargs=env_kwargs)
        space = self.env.single_action_space
        self.continuous = isinstance(space, Box)
        self.low: np.ndarray | None = space.low if isinstance(space, Box) else None
        self.high: np.ndarray | None = space.high if isinstance(space, Box) else None
        self.returns = EpisodeReturns(num_envs)
        self.steps = 0

    def collect(self, policy: Policy, steps: int) -> dict[str, np.ndarray]:
        """Play ``steps`` steps in every copy.

        Args:
            policy: ``obs [N, ...] -> (actions, recorded)``, ``recorded`` naming the per-step arrays
                to keep (e.g. ``{"log_probs": ...}``); continuous actions are clipped to the action
                space for the environment but stored unclipped.
            steps: rollout length T.

        Returns:
            ``[T, N, ...]`` arrays and ``episode_returns`` (see the module docstring).
        """
        buffer: dict[str, list[np.ndarray]] = {}
        episode_returns: list[float] = []
        for _ in range(steps):
            actions, recorded = policy(self.obs)
            env_actions = np.clip(actions, self.low, self.high) if self.continuous else actions
            next_obs, rewards, terminated, truncated, info = self.env.step(env_actions)
            ends = terminated | truncated
            episode_returns += self.returns.update(rewards, ends, info)
            row = {"obs": self.obs, "actions": actions, **recorded, "rewards": rewards.astype(np.float32),
                   "terminated": terminated, "ends": ends, "next_obs": final_observations(next_obs, ends, info)}
            for key, value in row.items():
                buffer.setdefault(key, []).append(value)
            self.obs = next_obs
        self.steps += steps * self.env.num_envs
        batch = {key: np.stack(values) for key, values in buffer.items()}
        batch["episode_returns"] = np.asarray(episode_returns, dtype=np.float64)
        return batch

    def close(self) -> None:
        """Close the environments."""
        self.env.close()


class RolloutWorker:
    """A rollout actor: a :class:`VectorRollout` and its own copy of the policy model.

    Args:
        model_fn: builds the policy model (a :class:`parl_lite.Model` whose ``policy(obs)``, or
            ``forward``, gives logits or a ``(mean, std)`` pair: see
            :func:`parl_lite.core.distributions.policy_output`); it runs in the actor's process.
        env_id: a registered gymnasium id.
        num_envs: environment copies in this actor.
        seed: seeds the environments and the actor's paddle generator.
        env_kwargs: keyword arguments for making the environment.
    """

    def __init__(self, model_fn: Callable[[], "Model"], env_id: str, num_envs: int, seed: int,
                 env_kwargs: dict[str, Any] | None = None) -> None:
        import paddle  # only the actor processes that run a policy pay for paddle

        paddle.seed(seed)
        self.model = model_fn()
        self.rollout = VectorRollout(env_id, num_envs, seed, env_kwargs)

    def _policy(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions drawn from the policy; their log-probabilities, and the logits of a discrete policy."""
        import paddle

        from parl_lite.core.algorithm import to_numpy, to_tensor
        from parl_lite.core.distributions import Categorical, policy_distribution

        with paddle.no_grad():
            dist = policy_distribution(self.model, to_tensor(obs))
            actions = dist.sample()
            recorded = {"log_probs": to_numpy(dist.log_prob(actions))}
            if isinstance(dist, Categorical):
                recorded["behaviour_logits"] = to_numpy(dist.logits)
        return to_numpy(actions), recorded

    def collect(self, weights: dict[str, np.ndarray] | None, steps: int) -> dict[str, np.ndarray]:
        """Load ``weights`` (None: keep the current ones) and collect ``steps`` steps.

        Returns:
            :meth:`VectorRollout.collect`'s arrays.
        """
        if weights is not None:
            self.model.set_weights(weights)
        return self.rollout.collect(self._policy, steps)


class OnnxPolicySampler:
    """Actions drawn with numpy from a policy graph that onnxruntime runs: logits (a categorical
    policy: Gumbel-max) or ``(mean, std)`` (a diagonal Gaussian), with their log-probabilities (and
    the logits), as the actor-critic algorithms' ``sample_actions`` draws them in paddle; a call is
    :meth:`VectorRollout.collect`'s policy.

    Args:
        graph: the serialized policy graph (:func:`parl_lite.io.onnx_export.policy_graph`).
        seed: seeds the draws.
    """

    def __init__(self, graph: bytes, seed: "int | list[int]") -> None:
        from parl_lite.common.onnx_runtime import WeightedModel

        self.policy = WeightedModel(graph)
        self.rng = np.random.default_rng(seed)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Draw with these weights (a model's ``get_weights()``) from now on."""
        self.policy.set_weights(weights)

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        outputs = self.policy(obs)
        if len(outputs) == 2:  # (mean, std): a diagonal Gaussian
            mean, std = outputs
            noise = self.rng.standard_normal(mean.shape).astype(np.float32)
            log_probs = (-0.5 * noise**2 - np.log(std) - _HALF_LOG_2PI).sum(axis=-1)
            return mean + std * noise, {"log_probs": log_probs.astype(np.float32)}
        logits = outputs[0]
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_softmax = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        actions = np.argmax(log_softmax - np.log(-np.log(self.rng.random(logits.shape))), axis=-1)
        log_probs = np.take_along_axis(log_softmax, actions[:, None], axis=-1)[:, 0]
        return actions, {"log_probs": log_probs.astype(np.float32), "behaviour_logits": log_softmax}


class OnnxRolloutWorker:
    """A rollout actor that runs the policy in onnxruntime (its process never imports paddle):
    a :class:`VectorRollout` and an :class:`OnnxPolicySampler`, whose actions are recorded with
    their log-probabilities (and the logits), as :class:`RolloutWorker` does.

    Args:
        graph: the serialized policy graph.
        env_id: a registered gymnasium id.
        num_envs: environment copies in this actor.
        seed: seeds the environments and the action draws.
        env_kwargs: keyword arguments for making the environment.
    """

    def __init__(self, graph: bytes, env_id: str, num_envs: int, seed: int,
                 env_kwargs: dict[str, Any] | None = None) -> None:
        self.sampler = OnnxPolicySampler(graph, seed)
        self.rollout = VectorRollout(env_id, num_envs, seed, env_kwargs)

    def collect(self, weights: dict[str, np.ndarray] | None, steps: int) -> dict[str, np.ndarray]:
        """Use ``weights`` (None: keep the current ones) and collect ``steps`` steps.

        Returns:
            :meth:`VectorRollout.collect`'s arrays.
        """
        if weights is not None:
            self.sampler.set_weights(weights)
        return self.rollout.collect(self.sampler, steps)
