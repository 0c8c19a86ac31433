"""Rollout actors for the training loops: remote :class:`parl_lite.utils.rollout.RolloutWorker`\\ s,
kept alive by an :class:`parl_lite.remote.group.ActorGroup` on whatever backend ``parl_lite.connect``
gave (the local pool, a cluster, Ray).

:class:`RemoteRollouts` gathers them synchronously, as PARL's A2C example does: every actor plays
the same number of steps with the same weights, and their rollouts are put side by side (the
environment axis), so the on-policy loop learns from them as from one vector environment. An actor
that dies is replaced; the round goes on with the rollouts of the others.
"""
import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

import parl_lite
from parl_lite.core.model import Model
from parl_lite.remote.group import ActorGroup, ActorGroupError
from parl_lite.train.base import RunStopped
from parl_lite.utils.envs import EpisodeReturns
from parl_lite.utils.rollout import RolloutWorker

__all__ = ["RemoteRollouts", "RemoteRolloutWorker", "rebuild_fn"]

RemoteRolloutWorker = parl_lite.remote_class(RolloutWorker, wait=False)
_log = logging.getLogger("parl_lite.train")


def rebuild_fn(model: Model, who: str) -> Callable[[], Model]:
    """A picklable function that builds another ``model`` in an actor's process: its class with
    its recorded constructor arguments (:meth:`parl_lite.Model.constructor_args`).

    Raises:
        ValueError: the model did not record them (``who`` is named, with what to pass instead).
    """
    kwargs = model.constructor_args()
    if kwargs is None:
        raise ValueError(f"{who}: {type(model).__name__} did not record its constructor arguments; "
                         "pass model_fn= (a function that builds the actors' model)")
    return _ModelBuilder(type(model), kwargs)


class _ModelBuilder:
    """A picklable ``cls(**kwargs)``."""

    def __init__(self, cls: type, kwargs: dict) -> None:
        self.cls, self.kwargs = cls, kwargs

    def __call__(self) -> Model:
        return self.cls(**self.kwargs)


class RemoteRollouts:
    """``actors`` remote rollout actors of ``num_envs`` environments each, gathered synchronously
    (see the module docstring).

    Args:
        model_fn: builds the actors' copy of the policy (runs in each actor).
        env_id: a registered gymnasium id.
        actors: how many actors, kept by replacing those that die.
        num_envs: environments per actor.
        seed: actor ``i`` seeds its environments and its policy's sampling with ``seed * 1000 + 100 * i``.
        env_kwargs: keyword arguments for making the environments.
        capacity_wait: seconds the run may have no actor while one is being made, before it stops.
        name: the run's name, in the log lines of lost and new actors.
    """

    def __init__(self, model_fn: Callable[[], Model], env_id: str, *, actors: int, num_envs: int, seed: int,
                 env_kwargs: dict[str, Any] | None = None, capacity_wait: float = 60.0, name: str = "") -> None:
        self.model_fn, self.env_id, self.num_envs, self.seed = model_fn, env_id, num_envs, seed
        self.env_kwargs, self.name = env_kwargs, name
        self.group = ActorGroup(self._make_actor, actors, name="rollout actor", capacity_wait=capacity_wait)
        self.returns = EpisodeReturns(0)  # the returns of the episodes that ended
        self._actors: list[Any] | None = None

    def _make_actor(self, index: int) -> Any:
        return RemoteRolloutWorker(self.model_fn, self.env_id, self.num_envs, seed=self.seed * 1000 + 100 * index,
                                   env_kwargs=self.env_kwargs)

    def collect(self, weights: dict[str, np.ndarray], steps: int) -> dict[str, np.ndarray]:
        """Every actor plays ``steps`` steps with ``weights``; their ``[T, n, ...]`` rollouts side
        by side, ``[T, N, ...]`` (see :meth:`parl_lite.utils.rollout.VectorRollout.collect`).

        Raises:
            RunStopped: no actor is left and none can be made, or their backend is gone.
        """
        while True:
            pending = {actor.collect(weights, steps): actor for actor in self._current_actors()}
            concurrent.futures.wait(list(pending))
            rollouts = []
            for future, actor in pending.items():
                try:
                    rollouts.append(future.result())
                except parl_lite.ActorDiedError as error:
                    self.group.lost(actor, error)
                    self._actors = [kept for kept in self._actors or [] if kept is not actor]
            if rollouts:
                batch = {key: np.concatenate([rollout[key] for rollout in rollouts], axis=1)
                         for key in rollouts[0] if key != "episode_returns"}
                returns = np.concatenate([rollout["episode_returns"] for rollout in rollouts])
                self.returns.add(returns.tolist())
                batch["episode_returns"] = returns
                return batch
            self.group.wait_for_change(0.5)

    def _current_actors(self) -> list[Any]:
        """The actors to play this round: the first ones, started now, and those made since."""
        try:
            if self._actors is None:
                self._actors = self.group.start()
            self._actors += self.group.take_new()
        except ActorGroupError as error:
            raise RunStopped(str(error)) from error
        finally:
            for event in self.group.drain_events():
                _log.warning("%s: %s", self.name, event)
        return list(self._actors)

    def close(self) -> None:
        """Close the actors."""
        self.group.close()
