"""Rollout actors for the training loops, kept alive by an :class:`parl_lite.remote.group.ActorGroup`
on whatever backend ``parl_lite.connect`` gave (the local pool, a cluster, Ray).

:class:`RolloutActors` makes them: when the model's policy translates to ONNX, each actor is an
:class:`parl_lite.utils.rollout.OnnxRolloutWorker` (onnxruntime runs the policy, 3 to 5 times
faster than paddle on the small batches actors see, and the actor's process never imports
paddle); otherwise a :class:`parl_lite.utils.rollout.RolloutWorker` with its own paddle copy of
the model.

:class:`RemoteRollouts` gathers them synchronously, as PARL's A2C example does: every actor plays
the same number of steps with the same weights, and their rollouts are put side by side (the
environment axis), so the on-policy loop learns from them as from one vector environment. An actor
that dies is replaced; the round goes on with the rollouts of the others.
"""
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

import parl_lite
from parl_lite.core.model import Model
from parl_lite.remote.group import ActorGroup, ActorGroupError
from parl_lite.remote.work import Finished, WorkQueue
from parl_lite.io.onnx_export import OnnxExportError, policy_graph
from parl_lite.train.base import EnvSpaces, RunStopped, env_spaces
from parl_lite.utils.envs import EpisodeReturns
from parl_lite.utils.rollout import OnnxRolloutWorker, RolloutWorker

__all__ = ["RemoteRollouts", "RolloutActors", "rebuild_fn", "translated_policy"]

_RemoteRolloutWorker = parl_lite.remote_class(RolloutWorker, wait=False)
_RemoteOnnxRolloutWorker = parl_lite.remote_class(OnnxRolloutWorker, wait=False)
_log = logging.getLogger("parl_lite.train")
_WAIT = 0.5  # seconds between two looks at the actor group while no rollout arrives


class RolloutActors:
    """Makes the rollout actors of a model (see the module docstring): ``make(index)`` is actor
    ``index``, seeded ``seed * 1000 + 100 * index``.

    Args:
        model: the learner's model (its ``policy``, or ``forward`` when it has none, is what the
            actors run).
        env_id: a registered gymnasium id.
        num_envs: environments per actor.
        seed: the run's seed.
        env_kwargs: keyword arguments for making the environments.
        model_fn: builds a paddle copy of the model in an actor whose policy has no ONNX translation
            (default: the model's class with its recorded constructor arguments).
        who: the trainer, named in errors and the log.
    """

    def __init__(self, model: Model, env_id: str, num_envs: int, seed: int, env_kwargs: dict[str, Any] | None,
                 model_fn: Callable[[], Model] | None = None, who: str = "") -> None:
        self.env_id, self.num_envs, self.seed, self.env_kwargs = env_id, num_envs, seed, env_kwargs
        self.graph = translated_policy(model, env_spaces(env_id, env_kwargs), f"{who}: the rollout actors")
        self.model_fn = None if self.graph is not None else model_fn or rebuild_fn(model, who)

    def make(self, index: int) -> Any:
        seed = self.seed * 1000 + 100 * index
        if self.graph is not None:
            return _RemoteOnnxRolloutWorker(self.graph, self.env_id, self.num_envs, seed, self.env_kwargs)
        return _RemoteRolloutWorker(self.model_fn, self.env_id, self.num_envs, seed, self.env_kwargs)


def translated_policy(model: Model, spaces: EnvSpaces, who: str) -> bytes | None:
    """The ONNX graph of ``model`` 's policy for the observations of ``spaces``
    (:func:`parl_lite.io.onnx_export.policy_graph`), or None when it does not translate (``who``
    logs that it runs paddle, and why)."""
    import paddle

    obs = paddle.static.InputSpec([None, *spaces.obs_shape], "uint8" if spaces.image else "float32", "obs")
    try:
        return policy_graph(model, obs)
    except OnnxExportError as error:
        _log.info("%s run paddle (%s)", who, error)
        return None


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
    """Rollout actors, ``actors`` of them, gathered synchronously (see the module docstring).

    Args:
        maker: makes the actors (:class:`RolloutActors`).
        actors: how many actors, kept by replacing those that die.
        capacity_wait: seconds the run may have no actor while one is being made, before it stops.
        name: the run's name, in the log lines of lost and new actors.
    """

    def __init__(self, maker: RolloutActors, *, actors: int, capacity_wait: float = 60.0, name: str = "") -> None:
        self.name = name
        self.group = ActorGroup(maker.make, actors, name="rollout actor", capacity_wait=capacity_wait)
        self.returns = EpisodeReturns(0)  # the returns of the episodes that ended
        self._queue: WorkQueue[tuple[dict[str, np.ndarray], int]] | None = None

    def collect(self, weights: dict[str, np.ndarray], steps: int) -> dict[str, np.ndarray]:
        """Every actor plays ``steps`` steps with ``weights``; their ``[T, n, ...]`` rollouts side
        by side, ``[T, N, ...]`` (see :meth:`parl_lite.utils.rollout.VectorRollout.collect`).

        Raises:
            RunStopped: no actor is left and none can be made, or their backend is gone.
        """
        while True:
            queue = self._actors()
            for _ in queue.actors:
                queue.submit((weights, steps), retry=False)
            rollouts = []
            while queue.busy:
                rollouts += [done.result() for done in self._next_finished(queue) if done.lost is None]
            if rollouts:
                batch = {key: np.concatenate([rollout[key] for rollout in rollouts], axis=1)
                         for key in rollouts[0] if key != "episode_returns"}
                returns = np.concatenate([rollout["episode_returns"] for rollout in rollouts])
                self.returns.add(returns.tolist())
                batch["episode_returns"] = returns
                return batch
            self._next_finished(queue)  # no actor was left: waits for one

    def _actors(self) -> WorkQueue[tuple[dict[str, np.ndarray], int]]:
        """The queue of the actors' rollouts; the first actors are started on the first call."""
        if self._queue is None:
            try:
                actors = self.group.start()
            except ActorGroupError as error:
                raise RunStopped(str(error)) from error
            self._queue = WorkQueue(actors, lambda actor, work: actor.collect(*work), self.group)
        return self._queue

    def _next_finished(self, queue: WorkQueue) -> list[Finished]:
        try:
            return queue.next_finished(_WAIT)
        except ActorGroupError as error:
            raise RunStopped(str(error)) from error
        finally:
            for event in self.group.drain_events():
                _log.warning("%s: %s", self.name, event)

    def close(self) -> None:
        """Close the actors."""
        self.group.close()
