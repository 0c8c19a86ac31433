"""The asynchronous loop (A3C, IMPALA): rollout actors on the remote pool or a cluster, the learner here.

Each actor (a ``@remote_class`` :class:`parl_lite.utils.rollout.RolloutWorker`) plays with the
weights it was last sent; the learner takes whichever rollout arrives first, learns from it and
sends the new weights back with that actor's next request, so actors act with weights up to
``actors - 1`` updates old. Update order depends on timing: a seed does not repeat a run exactly.
What the learner learns from is the sample its algorithm takes (``sample_type``): an
:class:`parl_lite.core.samples.AdvantageBatch` (A3C) or :class:`parl_lite.core.samples.Trajectories`
(IMPALA's V-trace).

The actors are an :class:`parl_lite.remote.group.ActorGroup`: an actor that dies (its node was lost)
is replaced, on another node of a cluster, and training goes on with the others meanwhile; while
a cluster has free CPUs (a node joined), actors are added up to ``max_actors``, each used from the
next update on. Each such event is logged. When the actors' backend cannot be reached any more (the
cluster's master is gone), or no actor is left and none can be made for ``capacity_wait`` seconds,
the run stops with :class:`parl_lite.train.RunStopped` after writing its checkpoint.
"""
import concurrent.futures
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from parl_lite.core.agent import Agent
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.model import Model
from parl_lite.core.samples import AdvantageBatch, Trajectories
from parl_lite.remote.group import ActorGroup, ActorGroupError
from parl_lite.remote.work import WorkQueue
from parl_lite.train.base import RunStopped, Trainer
from parl_lite.train.remote_rollouts import RolloutActors

__all__ = ["AsyncTrainer"]

_WAIT = 0.5  # seconds between two looks at the actor group while no rollout arrives
_CLOSE_WAIT = 10.0  # seconds the rollouts in flight get to finish when the run ends
_log = logging.getLogger("parl_lite.train")


class AsyncTrainer(Trainer):
    """Learn from the rollouts of ``actors`` remote actors as they arrive.

    Args:
        agent: the agent or algorithm to train: it learns from ``AdvantageBatch`` samples (A3C: A2C)
            or ``Trajectories`` of ``sample_batch_steps = rollout_steps + 1`` rows (IMPALA), and has
            ``value(obs)``.
        env_id: a registered gymnasium id.
        actors: remote rollout actors to start with, kept by replacing those that die.
        max_actors: the most actors: more are added, up to this, while the actors' backend has room
            (a cluster's free CPUs; default: ``actors``).
        capacity_wait: seconds the run may have no actor while one is being made, before it stops.
        num_envs: environments per actor.
        rollout_steps: steps per environment in one rollout.
        gamma: the discount of the advantages or of the truncation bootstrap.
        gae_lambda: GAE's lambda of an ``AdvantageBatch`` (default 1: n-step returns, as A3C);
            ``Trajectories`` have none (V-trace's targets are the algorithm's).
        model_fn: builds the actors' paddle copy of the model when its policy has no ONNX translation
            (see :class:`parl_lite.train.remote_rollouts.RolloutActors`); default: the model's
            class with its recorded constructor arguments (:meth:`parl_lite.Model.constructor_args`).
        **options: the :class:`Trainer` options (seed, target, eval_every, save, ...).
    """

    def __init__(self, agent: Agent | Algorithm, env_id: str, *, actors: int = 2, max_actors: int | None = None,
                 capacity_wait: float = 60.0, num_envs: int = 8, rollout_steps: int = 5, gamma: float = 0.99,
                 gae_lambda: float | None = None, model_fn: Callable[[], Model] | None = None, **options) -> None:
        super().__init__(agent, env_id, **options)
        if actors <= 0:
            raise ValueError(f"actors must be positive, got {actors}")
        if max_actors is not None and max_actors < actors:
            raise ValueError(f"max_actors ({max_actors}) must be at least actors ({actors})")
        if not capacity_wait >= 0:
            raise ValueError(f"capacity_wait must be a number of seconds, 0 or more, got {capacity_wait}")
        self.num_actors, self.num_envs, self.rollout_steps = actors, num_envs, rollout_steps
        self.max_actors = actors if max_actors is None else max_actors
        self.capacity_wait = capacity_wait
        self.sample_type = self._sample_type(AdvantageBatch, Trajectories)
        self._value = self._value_function(self.sample_type)
        if self.sample_type is Trajectories:
            self._check_trajectories(rollout_steps, gae_lambda)
        self.gamma, self.gae_lambda = gamma, 1.0 if gae_lambda is None else gae_lambda
        self.actor_maker = RolloutActors(self.agent.alg.model, env_id, num_envs, self.seed, self.env_kwargs,
                                         model_fn, "AsyncTrainer")
        self._recent: deque = deque(maxlen=20)
        self.actor_group: ActorGroup | None = None
        self._rollouts: WorkQueue[None] | None = None

    def _check_trajectories(self, rollout_steps: int, gae_lambda: float | None) -> None:
        """The algorithm's trajectories are each actor's ``rollout_steps`` steps and the observation
        after them; no GAE lambda applies to them."""
        name = type(self.agent.alg).__name__
        if gae_lambda is not None:
            raise ValueError(f"AsyncTrainer: {name} learns from Trajectories (V-trace targets): gae_lambda does "
                             "not apply to them; leave it unset")
        steps = getattr(self.agent.alg, "sample_batch_steps", None)
        if steps != rollout_steps + 1:
            raise ValueError(f"AsyncTrainer: {name}'s sample_batch_steps ({steps}) must be rollout_steps + 1 = "
                             f"{rollout_steps + 1}: each actor's {rollout_steps} steps, then the observation "
                             "that bootstraps them")

    def _start_actors(self) -> None:
        self.actor_group = ActorGroup(self.actor_maker.make, self.num_actors, self.max_actors, name="rollout actor",
                                      capacity_wait=self.capacity_wait)
        self._rollouts = WorkQueue(self.actor_group.start(), self._collect, self.actor_group, source=lambda: None)

    def _collect(self, actor: Any, _: None) -> concurrent.futures.Future:
        """A rollout of ``actor`` with the latest weights (those of the update just made)."""
        return actor.collect(self.agent.get_weights(), self.rollout_steps)

    def _round(self, total_steps: int) -> None:
        """Learn from the first rollouts that arrive (waiting for one, while the group replaces
        lost actors and adds new ones); every actor free gets the new weights and plays on."""
        if self._rollouts is None:
            self._start_actors()
        assert self._rollouts is not None and self.actor_group is not None
        while True:
            try:
                finished = self._rollouts.next_finished(_WAIT)
            except ActorGroupError as error:
                raise RunStopped(str(error)) from error
            finally:
                for event in self.actor_group.drain_events():
                    _log.warning("%s: %s", self.name, event)
            rollouts = [done.result() for done in finished if done.lost is None]
            for rollout in rollouts:
                self._learn(rollout)
            if rollouts:
                return

    def _learn(self, rollout: dict[str, np.ndarray]) -> None:
        self._recent.extend(rollout.pop("episode_returns").tolist())
        sample: AdvantageBatch | Trajectories
        if self.sample_type is Trajectories:
            sample = Trajectories.from_rollout(rollout, self._value, self.gamma)
        else:
            sample = AdvantageBatch.from_rollout(rollout, self._value, self.gamma, self.gae_lambda)
        self.last_learned = self.agent.learn_from(sample)
        self.updates += 1
        self.steps += rollout["rewards"].size

    def train_return(self) -> float:
        return float(np.mean(self._recent)) if self._recent else float("nan")

    def _close(self) -> None:
        """Let the rollouts in flight finish (for a while: a lost node's never will), then close the
        actors."""
        if self._rollouts is not None:
            self._rollouts.wait_running(_CLOSE_WAIT)
        if self.actor_group is not None:
            self.actor_group.close()
        self.actor_group, self._rollouts = None, None

