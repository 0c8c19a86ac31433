"""What a training loop hands an algorithm: one sample type per training regime.

Each sample is a dataclass of numpy arrays, one row per step (paddle-free: the arrays become
tensors in one place, :class:`parl_lite.Algorithm`'s ``learn``; ``uint8`` frames stay ``uint8``):

| sample | regime: what it holds | built by |
|---|---|---|
| :class:`Transitions` | off-policy: a replay memory's minibatch | ``OffPolicyTrainer`` |
| :class:`AdvantageBatch` | on-policy: a ``[T, N]`` rollout, GAE advantages | ``OnPolicyTrainer``, ``AsyncTrainer`` |
| :class:`Trajectories` | V-trace: each environment's steps, then the next observation | ``AsyncTrainer`` |
| :class:`Episode` | Monte-Carlo: one whole episode and its returns | ``EpisodicTrainer`` |

An algorithm says which one its ``learn`` takes (``sample_type``) and which of ``learn``'s
arguments each array is (``learn_arguments(sample)``; by default the sample's fields under their
own names), in its own module; a loop builds the sample its algorithm takes and calls
``agent.learn_from(sample)``, which is ``agent.learn(**agent.alg.learn_arguments(sample))``. So a
new algorithm of a regime needs no change to its loop.
"""
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from parl_lite.utils.gae import gae
from parl_lite.utils.returns import discounted_returns

__all__ = ["Sample", "Transitions", "AdvantageBatch", "Trajectories", "Episode"]

Rollout = dict[str, np.ndarray]  # a [T, N] rollout, as parl_lite.utils.rollout.VectorRollout.collect returns it
ValueFunction = Callable[[np.ndarray], Any]  # observations [B, ...] -> V [B] or [B, 1] (numpy)
_Rows = TypeVar("_Rows", bound="Sample")


@dataclasses.dataclass(frozen=True)
class Sample:
    """Base of the sample types: named numpy arrays of one leading size (the rows)."""

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by field name (not copied)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    def __len__(self) -> int:
        return len(getattr(self, dataclasses.fields(self)[0].name))

    def rows(self: _Rows, index: np.ndarray) -> _Rows:
        """The sample of the rows at ``index`` (a minibatch)."""
        return type(self)(**{name: array[index] for name, array in self.arrays().items()})


@dataclasses.dataclass(frozen=True)
class Transitions(Sample):
    """Off-policy transitions under PARL's names (``ReplayMemory.sample_batch``'s order).

    Attributes:
        obs: ``[B, ...]``.
        action: ``[B]`` (discrete) or ``[B, act_dim]`` (continuous).
        reward: ``[B]``.
        next_obs: ``[B, ...]``, the true next observation (the final one at an episode's end).
        terminal: ``[B]``, true where the episode terminated (not at a time-limit truncation).
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    terminal: np.ndarray


@dataclasses.dataclass(frozen=True)
class AdvantageBatch(Sample):
    """An on-policy batch: a ``[T, N]`` rollout flattened to ``T * N`` rows (step-major), with
    the learner's values and GAE advantages.

    Attributes:
        obs: ``[T*N, ...]``.
        actions: ``[T*N]`` (discrete) or ``[T*N, act_dim]``.
        log_probs: ``[T*N]``, the actions' log-probabilities when they were taken.
        values: ``[T*N]``, the learner's ``V(obs)`` before it learns from the batch.
        advantages: ``[T*N]``.
        returns: ``[T*N]``, the value targets ``advantages + values``.
    """

    obs: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray

    @classmethod
    def from_rollout(cls, rollout: Rollout, value: ValueFunction, gamma: float,
                     gae_lambda: float) -> "AdvantageBatch":
        """Flatten a ``[T, N]`` rollout, its values from ``value`` (the learner's value function,
        one call over ``obs`` and ``next_obs``), advantages and returns from
        :func:`parl_lite.utils.gae.gae` (a time-limit truncation bootstraps from the final
        observation's value)."""
        T, N = rollout["rewards"].shape
        obs_shape = rollout["obs"].shape[2:]
        flat_obs = rollout["obs"].reshape(T * N, *obs_shape)
        both = np.asarray(value(np.concatenate([flat_obs, rollout["next_obs"].reshape(T * N, *obs_shape)])))
        both = both.reshape(-1)
        values, next_values = both[:T * N].reshape(T, N), both[T * N:].reshape(T, N)
        advantages, returns = gae(rollout["rewards"], values, next_values, rollout["terminated"], rollout["ends"],
                                  gamma, gae_lambda)
        actions = rollout["actions"]
        return cls(obs=flat_obs, actions=actions.reshape(T * N, *actions.shape[2:]),
                   log_probs=rollout["log_probs"].reshape(-1), values=values.reshape(-1),
                   advantages=advantages.reshape(-1), returns=returns.reshape(-1))


@dataclasses.dataclass(frozen=True)
class Trajectories(Sample):
    """``N`` trajectories of ``T + 1`` rows, one after another (``[N * (T + 1), ...]``, PARL's
    IMPALA layout): each environment's ``T`` steps, then the observation after them, which only
    bootstraps (its other entries are zeros). An algorithm that learns from them says how many
    rows a trajectory has in ``sample_batch_steps`` (PARL's name), ``T + 1``.

    Attributes:
        obs: ``[N*(T+1), ...]``.
        actions: ``[N*(T+1)]``.
        behaviour_logits: ``[N*(T+1), num_actions]``, the acting policy's logits.
        rewards: ``[N*(T+1)]``.
        dones: ``[N*(T+1)]``, true where the episode ended (terminated or truncated).
    """

    obs: np.ndarray
    actions: np.ndarray
    behaviour_logits: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray

    @classmethod
    def from_rollout(cls, rollout: Rollout, value: ValueFunction, gamma: float) -> "Trajectories":
        """A ``[T, N]`` rollout's trajectories. A time-limit truncation is handled exactly: the
        truncated step's reward gets ``gamma`` times ``value`` (the learner's value function) of
        the final observation, and the step counts as done, which cuts the trace there as a
        termination does.

        Raises:
            ValueError: the rollout has no ``behaviour_logits`` (a continuous policy).
        """
        if "behaviour_logits" not in rollout:
            raise ValueError("Trajectories carry the behaviour policy's logits: the policy must be discrete")
        T, N = rollout["rewards"].shape
        rewards = rollout["rewards"].astype(np.float32)
        truncated = rollout["ends"] & ~rollout["terminated"]
        if truncated.any():
            rewards[truncated] += gamma * np.asarray(value(rollout["next_obs"][truncated])).reshape(-1)

        def trajectories(steps: np.ndarray, after: np.ndarray) -> np.ndarray:  # [T, N, ...], [N, ...] -> [N*(T+1), ...]
            rows = np.concatenate([steps, after[None]]).swapaxes(0, 1)
            return rows.reshape(N * (T + 1), *rows.shape[2:])

        def padded(steps: np.ndarray) -> np.ndarray:  # the bootstrap row's entries are never used
            return trajectories(steps, np.zeros_like(steps[0]))

        return cls(obs=trajectories(rollout["obs"], rollout["next_obs"][-1]), actions=padded(rollout["actions"]),
                   behaviour_logits=padded(rollout["behaviour_logits"]), rewards=padded(rewards),
                   dones=padded(rollout["ends"]))


@dataclasses.dataclass(frozen=True)
class Episode(Sample):
    """One whole episode with the return of each step (REINFORCE's).

    Attributes:
        obs: ``[T, ...]``.
        actions: ``[T]`` (or ``[T, act_dim]``).
        returns: ``[T]``, the discounted reward-to-go, standardised over the episode.
    """

    obs: np.ndarray
    actions: np.ndarray
    returns: np.ndarray

    @classmethod
    def from_steps(cls, observations: Sequence[np.ndarray], actions: Sequence[Any], rewards: Sequence[float],
                   gamma: float) -> "Episode":
        """The episode of these steps: its returns from
        :func:`parl_lite.utils.returns.discounted_returns`, normalised (the baseline)."""
        return cls(obs=np.array(observations), actions=np.array(actions),
                   returns=discounted_returns(rewards, gamma, normalize=True))
