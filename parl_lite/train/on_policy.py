"""The on-policy loop (PPO, A2C): rollouts from a vector environment, advantages, one ``learn``."""

from typing import Any

import numpy as np

from parl_lite.core.agent import Agent
from parl_lite.core.algorithm import Algorithm
from parl_lite.train.base import Trainer
from parl_lite.utils.gae import gae
from parl_lite.utils.rollout import VectorRollout
from parl_lite.utils.scheduler import LinearDecayScheduler

__all__ = ["OnPolicyTrainer", "advantage_batch"]


def advantage_batch(agent: Agent, rollout: dict[str, np.ndarray], gamma: float,
                    gae_lambda: float) -> dict[str, np.ndarray]:
    """Flatten a ``[T, N]`` rollout into the batch PPO and A2C learn from.

    Values come from the agent's current value function (one forward over ``obs`` and
    ``next_obs``), advantages and returns from :func:`parl_lite.utils.gae.gae`.

    Returns:
        ``obs``, ``actions``, ``log_probs``, ``advantages``, ``returns``, ``values``, each ``[T*N, ...]``.
    """
    T, N = rollout["rewards"].shape
    flat_obs = rollout["obs"].reshape(T * N, -1)
    critic: Any = agent.alg  # an actor-critic algorithm (PPO, A2C): it has value(obs)
    both = critic.value(np.concatenate([flat_obs, rollout["next_obs"].reshape(T * N, -1)]))
    values, next_values = both[:T * N].reshape(T, N), both[T * N:].reshape(T, N)
    advantages, returns = gae(rollout["rewards"], values, next_values, rollout["terminated"], rollout["ends"],
                              gamma, gae_lambda)
    actions = rollout["actions"]
    return {"obs": flat_obs, "actions": actions.reshape(T * N, *actions.shape[2:]),
            "log_probs": rollout["log_probs"].reshape(-1), "advantages": advantages.reshape(-1),
            "returns": returns.reshape(-1), "values": values.reshape(-1)}


class OnPolicyTrainer(Trainer):
    """Collect ``rollout_steps`` steps in each of ``num_envs`` environments with ``agent.sample``,
    compute GAE advantages with the agent's value function, and call ``agent.learn`` once.

    The algorithm has ``sample(obs) -> (actions, log_probs)`` and ``value(obs)`` (as PPO and A2C
    do); its ``learn`` gets ``obs``, ``actions``, ``log_probs``, ``advantages``, ``returns``,
    ``values``.

    Args:
        agent: the agent or algorithm to train.
        env_id: a registered gymnasium id.
        num_envs: environments stepped together (one batched forward per step).
        rollout_steps: steps per environment between updates.
        gamma: discount.
        gae_lambda: GAE's lambda (1: n-step Monte-Carlo returns, as A2C).
        anneal: decay the learning rate (and PPO's ``clip_param``) linearly to 0 over the budget.
        **options: the :class:`Trainer` options (seed, target, eval_every, save, ...).
    """

    def __init__(self, agent: Agent | Algorithm, env_id: str, *, num_envs: int = 8, rollout_steps: int = 32,
                 gamma: float = 0.99, gae_lambda: float = 0.95, anneal: bool = False, **options) -> None:
        super().__init__(agent, env_id, **options)
        if rollout_steps <= 0:
            raise ValueError(f"rollout_steps must be positive, got {rollout_steps}")
        self.rollout = VectorRollout(env_id, num_envs, seed=self.seed)
        self.num_envs, self.rollout_steps = num_envs, rollout_steps
        self.gamma, self.gae_lambda, self.anneal = gamma, gae_lambda, anneal
        alg: Any = self.agent.alg  # PPO or A2C: optimizer, clip_param (PPO)
        self._base_lr = alg.optimizer.get_lr() if anneal else None
        self._base_clip: float | None = getattr(alg, "clip_param", None) if anneal else None
        self._schedule: LinearDecayScheduler | None = None

    def _budget(self, total_steps: int) -> int:
        per_round = self.rollout_steps * self.num_envs
        num_updates = max(1, total_steps // per_round)
        if self.anneal:
            self._schedule = LinearDecayScheduler(1.0, num_updates, end_value=0.0)
        return num_updates * per_round

    def _round(self, total_steps: int) -> None:
        if self._schedule is not None and self._base_lr is not None:  # both set when annealing
            fraction = self._schedule.value_at(self.updates)
            alg: Any = self.agent.alg
            alg.optimizer.set_lr(self._base_lr * fraction)
            if self._base_clip is not None:
                alg.clip_param = self._base_clip * max(fraction, 1e-3)
        rollout = self.rollout.collect(self.agent.sample, self.rollout_steps)
        self.last_stats = self.agent.learn(advantage_batch(self.agent, rollout, self.gamma, self.gae_lambda))
        self.updates += 1
        self.steps += self.rollout_steps * self.num_envs

    def train_return(self) -> float:
        return self.rollout.returns.recent_mean

    def _close(self) -> None:
        self.rollout.env.close()
