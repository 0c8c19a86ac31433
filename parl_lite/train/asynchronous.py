"""The asynchronous loop (A3C, IMPALA): rollout actors on the remote pool, the learner here.

Each actor (a ``@remote_class`` :class:`parl_lite.utils.rollout.RolloutWorker`) plays with the
weights it was last sent; the learner takes whichever rollout arrives first, learns from it and
sends the new weights back with that actor's next request, so actors act with weights up to
``actors - 1`` updates old. Update order depends on timing: a seed does not repeat a run exactly.
"""
import concurrent.futures
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

import parl_lite
from parl_lite.core.agent import Agent
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.model import Model
from parl_lite.train.base import Trainer
from parl_lite.train.on_policy import advantage_batch
from parl_lite.utils.rollout import RolloutWorker

__all__ = ["AsyncTrainer", "impala_batch"]

RemoteRolloutWorker = parl_lite.remote_class(RolloutWorker, wait=False)


class AsyncTrainer(Trainer):
    """Learn from the rollouts of ``actors`` remote actors as they arrive.

    Args:
        agent: the agent or algorithm to train (PPO-style ``value`` needed when ``gae_lambda`` is set).
        env_id: a registered gymnasium id.
        actors: remote rollout actors.
        num_envs: environments per actor.
        rollout_steps: steps per environment in one rollout.
        gamma, gae_lambda: with ``gae_lambda`` set (A3C), ``learn`` gets the batch of
            :func:`parl_lite.train.advantage_batch`, as in :class:`OnPolicyTrainer`; None (IMPALA)
            hands it the trajectories in PARL's layout (see :func:`impala_batch`).
        model_fn: builds the actors' copy of the model (runs in the actor); default: the model's
            class with its recorded constructor arguments (:meth:`parl_lite.Model.constructor_args`).
        **options: the :class:`Trainer` options (seed, target, eval_every, save, ...).
    """

    def __init__(self, agent: Agent | Algorithm, env_id: str, *, actors: int = 2, num_envs: int = 8,
                 rollout_steps: int = 5, gamma: float = 0.99, gae_lambda: float | None = None,
                 model_fn: Callable[[], Model] | None = None, **options) -> None:
        super().__init__(agent, env_id, **options)
        if actors <= 0:
            raise ValueError(f"actors must be positive, got {actors}")
        self.num_actors, self.num_envs, self.rollout_steps = actors, num_envs, rollout_steps
        self.gamma, self.gae_lambda = gamma, gae_lambda
        self.model_fn = model_fn or _rebuild_fn(self.agent.alg.model)
        steps = getattr(self.agent.alg, "sample_batch_steps", None)
        if gae_lambda is None and steps != rollout_steps + 1:
            raise ValueError(f"AsyncTrainer: IMPALA's sample_batch_steps ({steps}) must be rollout_steps + 1 = "
                             f"{rollout_steps + 1}: each actor's {rollout_steps} steps, then the observation "
                             "that bootstraps them")
        self._recent: deque = deque(maxlen=20)
        self._actors: list = []
        self._pending: dict = {}

    def _start_actors(self) -> None:
        self._actors = [RemoteRolloutWorker(self.model_fn, self.env_id, self.num_envs, seed=self.seed * 1000 + 100 * i)
                        for i in range(self.num_actors)]
        weights = self.agent.get_weights()
        self._pending = {actor.collect(weights, self.rollout_steps): actor for actor in self._actors}

    def _round(self, total_steps: int) -> None:
        if not self._actors:
            self._start_actors()
        done, _ = parl_lite.wait(list(self._pending), return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            actor = self._pending.pop(future)
            rollout = future.result()
            self._recent.extend(rollout.pop("episode_returns").tolist())
            if self.gae_lambda is not None:
                batch = advantage_batch(self.agent, rollout, self.gamma, self.gae_lambda)
            else:
                batch = impala_batch(self.agent.alg, rollout, self.gamma)
            self.last_learned = self.agent.learn(**batch)
            self.updates += 1
            self.steps += rollout["rewards"].size
            self._pending[actor.collect(self.agent.get_weights(), self.rollout_steps)] = actor

    def train_return(self) -> float:
        return float(np.mean(self._recent)) if self._recent else float("nan")

    def _close(self) -> None:
        try:
            if self._pending:
                parl_lite.get(list(self._pending))  # let in-flight rollouts finish before the actors stop
        except parl_lite.RemoteError:
            pass  # an actor that died (e.g. of the same Ctrl-C) has nothing left to finish
        finally:
            for actor in self._actors:
                actor.close()
            self._actors, self._pending = [], {}


def impala_batch(algorithm: Any, rollout: dict[str, np.ndarray], gamma: float) -> dict[str, np.ndarray]:
    """A ``[T, N]`` rollout in the layout of PARL's ``IMPALA.learn``: each environment's trajectory
    of ``T + 1`` rows (its ``T`` steps, then the observation after them, which only bootstraps),
    the ``N`` trajectories one after another.

    A time-limit truncation is handled exactly: the truncated step's reward gets ``gamma`` times
    the learner's value of the final observation, and the step counts as done, which cuts the
    trace there as a termination does.

    Returns:
        ``obs``, ``actions``, ``behaviour_logits``, ``rewards``, ``dones``, each ``[N * (T + 1), ...]``.

    Raises:
        ValueError: the rollout has no ``behaviour_logits`` (a continuous policy).
    """
    if "behaviour_logits" not in rollout:
        raise ValueError("IMPALA learns from the behaviour policy's logits: its policy must be discrete")
    T, N = rollout["rewards"].shape
    rewards = rollout["rewards"].astype(np.float32)
    truncated = rollout["ends"] & ~rollout["terminated"]
    if truncated.any():
        rewards[truncated] += gamma * np.asarray(algorithm.value(rollout["next_obs"][truncated])).reshape(-1)

    def trajectories(steps: np.ndarray, after: np.ndarray) -> np.ndarray:  # [T, N, ...], [N, ...] -> [N * (T+1), ...]
        rows = np.concatenate([steps, after[None]]).swapaxes(0, 1)
        return rows.reshape(N * (T + 1), *rows.shape[2:])

    def padded(steps: np.ndarray) -> np.ndarray:  # the bootstrap row's entries are never used
        return trajectories(steps, np.zeros_like(steps[0]))

    return {"obs": trajectories(rollout["obs"], rollout["next_obs"][-1]), "actions": padded(rollout["actions"]),
            "behaviour_logits": padded(rollout["behaviour_logits"]), "rewards": padded(rewards),
            "dones": padded(rollout["ends"])}


def _rebuild_fn(model: Model) -> Callable[[], Model]:
    kwargs = model.constructor_args()
    if kwargs is None:
        raise ValueError(f"AsyncTrainer: {type(model).__name__} did not record its constructor arguments; "
                         "pass model_fn= (a function that builds the actors' model)")
    return _ModelBuilder(type(model), kwargs)


class _ModelBuilder:
    """A picklable ``cls(**kwargs)``."""

    def __init__(self, cls: type, kwargs: dict) -> None:
        self.cls, self.kwargs = cls, kwargs

    def __call__(self) -> Model:
        return self.cls(**self.kwargs)
