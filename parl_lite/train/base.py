"""What every training loop shares: evaluation, reporting, callbacks, checkpoints, Ctrl-C and SIGTERM,
resume.

A loop (:class:`OnPolicyTrainer`, :class:`OffPolicyTrainer`, ...) only says how one *round* goes
(collect some experience, build the sample its algorithm learns from, ``agent.learn_from`` it) in
:meth:`Trainer._round`; :meth:`Trainer.learn` runs the rounds until the step budget, the target, a
callback, Ctrl-C or SIGTERM stops them. A loop knows its regime's sample types
(:mod:`parl_lite.core.samples`), never an algorithm.
"""
import contextlib
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple, TypeVar
from collections.abc import Callable, Iterable, Iterator

import gymnasium as gym
import h5py
import numpy as np

from parl_lite.core.agent import Agent
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.model import check_finite_state
from parl_lite.core.samples import Sample
from parl_lite.io import checkpoint
from parl_lite.train.callbacks import Callback, StopOnThreshold, as_callback
from parl_lite.train.evaluation import Evaluator
from parl_lite.common.progress import Reporter
from parl_lite.common.summary import RunSummary
from parl_lite.utils.envs import make_vector_env
from parl_lite.utils.normalization import ObsNormalizer, RewardScaler

__all__ = ["Trainer", "RunStopped", "EnvSpaces", "env_spaces", "spaces_of", "learn_stats"]

_Made = TypeVar("_Made", bound=Sample)
TRAINER_GROUP = "trainer"


class Terminated(KeyboardInterrupt):
    """SIGTERM (a job scheduler's, ``kill``'s) during :meth:`Trainer.learn`, which takes it as Ctrl-C:
    the run stops, writes its checkpoint and reports."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (elsewhere nothing
    changes: only the main thread can handle signals). Paddle's own handler would abort the process
    with a stack dump, losing the run; the handler before is put back after (the default action
    when it was not set from Python)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


class RunStopped(RuntimeError):
    """A run cannot go on (its remote actors are lost and none can be made, or their backend is
    gone). :meth:`Trainer.learn` writes the checkpoint (when ``save`` is given) and raises it again
    with the step reached and how to resume."""


class EnvSpaces(NamedTuple):
    """What a model needs to know about an environment."""

    obs_dim: int           # the observation's size (flattened)
    act_dim: int           # number of actions (discrete) or action dimensions (continuous)
    continuous: bool
    action_high: np.ndarray | None  # upper bound of a continuous action space
    obs_shape: tuple[int, ...] = ()  # the observation's shape: (obs_dim,), or (channels, height, width) for images

    @property
    def image(self) -> bool:
        """Whether the observations are images (channel first: a convolutional network's input)."""
        return len(self.obs_shape) == 3


def env_spaces(env_id: str, env_kwargs: dict[str, Any] | None = None) -> EnvSpaces:
    """Observation and action sizes of a gymnasium environment as the training loops make it (an
    Atari game: its preprocessed frames, see :mod:`parl_lite.env.atari`), with ``env_kwargs``
    as :func:`parl_lite.utils.envs.make_vector_env` takes them."""
    env, _ = make_vector_env(env_id, 1, seed=0, env_kwargs=env_kwargs)
    try:
        return spaces_of(env.single_observation_space, env.single_action_space, env_id)
    finally:
        env.close()


def spaces_of(observation_space: gym.Space, action_space: gym.Space, env_id: str) -> EnvSpaces:
    """Observation and action sizes of an environment of ``env_id`` (named in errors): a Box
    observation (a vector, or channel-first images), a Box or Discrete action space."""
    obs_shape = observation_space.shape
    if not isinstance(observation_space, gym.spaces.Box) or obs_shape is None:
        raise ValueError(f"{env_id}: the observation space {observation_space} is not a Box")
    obs_dim = int(np.prod(obs_shape))
    shape = tuple(int(size) for size in obs_shape)
    if isinstance(action_space, gym.spaces.Box):
        return EnvSpaces(obs_dim, int(action_space.shape[0]), True, action_space.high, shape)
    if isinstance(action_space, gym.spaces.Discrete):
        return EnvSpaces(obs_dim, int(action_space.n), False, None, shape)
    raise ValueError(f"{env_id}: the action space {action_space} is neither a Box nor Discrete")


def learn_stats(result: Any) -> dict[str, float]:
    """The statistics in what an algorithm's ``learn`` returned (PARL's return values), as floats.

    A single value (DQN's loss) is ``loss``; a named tuple (DDPG's ``(critic_loss, actor_loss)``,
    PPO's ``(value_loss, action_loss, entropy)``, ...) gives its fields, nested named tuples
    flattened; a plain tuple gives ``loss_0``, ``loss_1``, ...; values that are not scalars (arrays)
    are left out.
    """
    scalar = _scalar(result)
    if scalar is not None:
        return {"loss": scalar}
    if isinstance(result, tuple):
        fields = result._asdict().items() if hasattr(result, "_asdict") else \
            ((f"loss_{index}", value) for index, value in enumerate(result))
        stats: dict[str, float] = {}
        for name, value in fields:
            scalar = _scalar(value)
            if scalar is not None:
                stats[name] = scalar
            elif hasattr(value, "_asdict"):
                stats.update(learn_stats(value))
        return stats
    return {}


def _scalar(value: Any) -> float | None:
    """``value`` as a float when it is one number (a float, a 0-D or one-element tensor or array)."""
    if value is None or isinstance(value, (tuple, list, dict, str)):
        return None
    try:
        if int(getattr(value, "size", 1)) != 1:
            return None
        item = getattr(value, "item", None)  # a tensor or array of shape [1] has no float() of its own
        return float(item() if callable(item) else value)
    except (TypeError, ValueError):
        return None


class Trainer:
    """Base of the training loops.

    Args:
        agent: the :class:`parl_lite.Agent` to train (an :class:`Algorithm` is wrapped in a plain
            Agent).
        env_id: a registered gymnasium id.
        seed: seeds the environments, the exploration and the replay memory (seed paddle yourself,
            before building the model: ``paddle.seed(seed)``).
        target: stop once an evaluation's mean return reaches it (None: run the whole budget).
        eval_every: environment steps between evaluations.
        eval_episodes: greedy episodes per evaluation.
        eval_seed: reset seed of the first evaluation episode (default ``10_000 + 100 * seed``).
        logdir: TensorBoard events and ``scalars.csv`` go here.
        save: checkpoint path: written at the end, on Ctrl-C or SIGTERM and every ``checkpoint_every``
            steps.
        checkpoint_every: environment steps between checkpoints (None: only at the end).
        resume: a checkpoint written by a trainer: its weights, optimizer state and step count
            (and replay memory, off-policy) are loaded before training.
        name: the algorithm's name in the summary (default: the algorithm's class name).
        env_kwargs: keyword arguments for making the environments (``gymnasium.make``'s; an Atari
            game's preprocessing, e.g. ``{"screen_size": 42}``: see
            :func:`parl_lite.utils.envs.make_vector_env`).
    """

    def __init__(self, agent: Agent | Algorithm, env_id: str, *, seed: int = 0, target: float | None = None,
                 eval_every: int = 5_000, eval_episodes: int = 10, eval_seed: int | None = None,
                 logdir: str | None = None, save: str | None = None, checkpoint_every: int | None = None,
                 resume: str | None = None, name: str | None = None, env_kwargs: dict[str, Any] | None = None) -> None:
        self.agent = agent if isinstance(agent, Agent) else Agent(agent)
        if eval_every <= 0:
            raise ValueError(f"eval_every must be positive, got {eval_every}")
        if checkpoint_every is not None and checkpoint_every <= 0:
            raise ValueError(f"checkpoint_every must be positive, got {checkpoint_every}")
        self.env_id, self.seed, self.target = env_id, seed, target
        self.eval_every, self.eval_episodes = eval_every, eval_episodes
        self.eval_seed = 10_000 + 100 * seed if eval_seed is None else eval_seed
        self.logdir, self.save_path, self.checkpoint_every = logdir, save, checkpoint_every
        self.resume_path = resume
        self.env_kwargs = dict(env_kwargs or {})
        self.name = name or type(self.agent.alg).__name__
        self.reward_scaler: RewardScaler | None = None  # a loop that normalises rewards sets it
        self.steps = 0          # environment steps so far
        self.updates = 0        # learn calls so far
        self.stop_signal: signal.Signals | None = None  # what interrupted the last learn (SIGINT, SIGTERM)
        self.last_learned: Any = None  # what the last learn returned (PARL's values)
        self.last_eval_steps = 0
        self.eval_return = float("nan")
        self.best_eval_return = float("nan")  # the best evaluation so far
        self.train_seconds = 0.0
        self.train_cpu_seconds = 0.0
        self.solved_at: int | None = None

    # ------------------------------------------------------------------ the algorithm's sample
    def _sample_type(self, *made: type[_Made]) -> type[_Made]:
        """The sample type this loop builds for its algorithm: the algorithm's ``sample_type``,
        one of ``made``; the first of them for an algorithm that declares none.

        Raises:
            ValueError: the algorithm learns from another sample type (named, with the loop's).
        """
        alg = self.agent.alg
        declared = getattr(alg, "sample_type", None)
        if declared is None:
            return made[0]
        if declared not in made:
            raise ValueError(f"{type(self).__name__} builds {' or '.join(kind.__name__ for kind in made)} samples; "
                             f"{type(alg).__name__} learns from {getattr(declared, '__name__', declared)} (its "
                             "sample_type): train it with the loop that builds those")
        return declared

    def _value_function(self, sample_type: type[Sample]) -> Callable[[np.ndarray], Any]:
        """The algorithm's ``value(obs)``, which ``sample_type``'s values come from.

        Raises:
            ValueError: the algorithm has none.
        """
        value = getattr(self.agent.alg, "value", None)
        if not callable(value):
            raise ValueError(f"{type(self).__name__}: {type(self.agent.alg).__name__} learns from "
                             f"{sample_type.__name__} samples, built with the learner's value function, but it has "
                             "no value(obs) method")
        return value

    # ------------------------------------------------------------------ what a loop defines
    def _round(self, total_steps: int) -> None:
        """Collect experience and learn from it; advance ``self.steps`` and ``self.updates``."""
        raise NotImplementedError

    def _action_scale(self) -> np.ndarray | None:
        """Factor from the algorithm's actions to the environment's (None: the same)."""
        return None

    def train_return(self) -> float:
        """Mean return of the recent training episodes."""
        return float("nan")

    def _budget(self, total_steps: int) -> int:
        """The step budget a loop can actually reach (a multiple of its round, for some)."""
        return total_steps

    def _write_extra(self, file: h5py.File) -> None:
        """Add loop state (a replay memory) to a checkpoint."""

    def _read_extra(self, path: str) -> None:
        """Load what :meth:`_write_extra` wrote."""

    def _close(self) -> None:
        """Release environments and actors."""

    # ------------------------------------------------------------------ the loop
    def learn(self, total_timesteps: int, callback: Callback | Iterable[Callback] | None = None,
              progress_bar: bool | None = None) -> RunSummary:
        """Train until ``total_timesteps`` environment steps, the target, a callback, Ctrl-C or
        SIGTERM.

        Args:
            total_timesteps: the step budget (counting the steps of a resumed run).
            callback: a :class:`Callback` or a list of them.
            progress_bar: True: a tqdm bar; False: a log line per evaluation; None: a bar when
                stderr is a terminal.

        Returns:
            The run's :class:`RunSummary` (``interrupted`` is True after Ctrl-C or SIGTERM, and
            :attr:`stop_signal` says which).

        Raises:
            RunStopped: the run could not go on (its actors are lost); the checkpoint was written
                first, and the message says the step reached and how to resume.
        """
        if total_timesteps <= 0:
            raise ValueError(f"total_timesteps must be positive, got {total_timesteps}")
        total = self._budget(total_timesteps)
        if self.resume_path:
            self._resume(self.resume_path)
        stop: list[Callback] = [StopOnThreshold(self.target)] if self.target is not None else []
        callbacks = as_callback([*stop, as_callback(callback)])
        self.evaluator = Evaluator(self.env_id, self.eval_episodes, self.eval_seed, self._action_scale(),
                                   self.env_kwargs)
        reporter = Reporter(self.name, total, self.steps, progress_bar, self.logdir, start_seconds=self.train_seconds)
        stopped = None
        self.stop_signal = None
        callbacks.on_training_start(self)
        try:
            with _sigterm_as_interrupt():
                self._run(total, callbacks, reporter)
        except KeyboardInterrupt as interrupt:
            self.stop_signal = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
        except RunStopped as error:
            stopped = error
        finally:
            reporter.close()
            self.evaluator.close()
            self._close()
            callbacks.on_training_end(self)
        if self.save_path:
            self.save_checkpoint(self.save_path)
        if stopped is not None:
            resume = (f"the checkpoint {self.save_path} holds it: resume with resume={str(self.save_path)!r} "
                      "(--resume) once the actors can run again") if self.save_path else \
                "no checkpoint was written (save= keeps one)"
            raise RunStopped(f"{self.name} on {self.env_id} stopped at step {self.steps}: {stopped}; {resume}") \
                from stopped.__cause__
        return self.summary(self.stop_signal is not None)

    def _run(self, total: int, callbacks: Callback, reporter: Reporter) -> None:
        next_checkpoint = self._next_multiple(self.checkpoint_every)
        while self.steps < total:
            started, cpu_started = time.perf_counter(), time.process_time()
            self._round(total)
            self.train_seconds += time.perf_counter() - started
            self.train_cpu_seconds += time.process_time() - cpu_started
            reporter.advance(self.steps)
            keep_going = callbacks.on_step(self)
            if next_checkpoint is not None and self.steps >= next_checkpoint and self.save_path:
                self.save_checkpoint(self.save_path)
                next_checkpoint = self._next_multiple(self.checkpoint_every)
            if self.steps - self.last_eval_steps >= self.eval_every or self.steps >= total:
                self.last_eval_steps = self.steps
                self.eval_return = self.evaluate()
                if math.isnan(self.best_eval_return) or self.eval_return > self.best_eval_return:
                    self.best_eval_return = self.eval_return
                reporter.evaluation(self.steps, self.train_seconds, self.eval_return, self.train_return(),
                                    self.last_stats)
                if self.target is not None and self.eval_return >= self.target and self.solved_at is None:
                    self.solved_at = self.steps
                keep_going = callbacks.on_evaluation(self, self.eval_return) and keep_going
            if not keep_going:
                break

    @property
    def last_stats(self) -> dict[str, float]:
        """The last ``learn``'s statistics as floats (see :func:`learn_stats`), converted when
        asked for rather than on every update."""
        return learn_stats(self.last_learned)

    def _next_multiple(self, every: int | None) -> int | None:
        return None if every is None else (self.steps // every + 1) * every

    def evaluate(self) -> float:
        """Mean return of the greedy policy over the evaluation episodes."""
        return self.evaluator(self.agent.predict)

    def run(self, total_timesteps: int, callback: Callback | Iterable[Callback] | None = None,
            progress_bar: bool | None = None) -> RunSummary:
        """:meth:`learn`, then print the summary as one JSON line; after Ctrl-C or SIGTERM (the
        checkpoint written) exit with status 128 + the signal's number (130, 143), as a shell
        reports a process the signal ended; a run that stopped (:class:`RunStopped`, the
        checkpoint written) exits with status 1 and its message."""
        try:
            summary = self.learn(total_timesteps, callback, progress_bar)
        except RunStopped as stopped:  # said in one line, as a command's error, not as a traceback
            sys.exit(f"{type(stopped).__name__}: {stopped}")
        print(summary.to_json(), flush=True)
        if self.stop_signal is not None:
            sys.exit(128 + self.stop_signal)
        return summary

    def summary(self, interrupted: bool = False) -> RunSummary:
        """The run so far as a :class:`RunSummary`."""
        rate = self.updates / self.train_seconds if self.train_seconds > 0 else 0.0
        return RunSummary(algo=self.name, env=self.env_id, seed=self.seed, steps=self.steps, solved_at=self.solved_at,
                          eval_return=self.eval_return, best_eval_return=self.best_eval_return,
                          train_seconds=self.train_seconds, train_cpu_seconds=self.train_cpu_seconds,
                          updates=self.updates, updates_per_second=rate,
                          actors=getattr(self, "num_actors", None),
                          checkpoint=str(self.save_path) if self.save_path else None, interrupted=interrupted)

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path: "str | os.PathLike") -> None:
        """Write the models, the optimizers' state and the loop's state (step count, ...) to
        ``path`` atomically (an HDF5 checkpoint :meth:`parl_lite.Agent.restore` also reads).

        Raises:
            ValueError: a weight or optimizer accumulator is NaN or infinite (the run diverged; named):
                nothing is written, the previous checkpoint stays.
        """
        def extra(file: h5py.File) -> None:
            group = file.create_group(TRAINER_GROUP)
            for key, value in self._state().items():
                group.attrs[key] = value
            self._write_extra(file)

        alg = self.agent.alg
        check_finite_state(f"{self.name} checkpoint {os.fspath(path)!r}", alg.models(), alg.optimizers())
        checkpoint.save(path, models=alg.models(), optimizers=alg.optimizers(), owner=type(self.agent), extra=extra)

    def _state(self) -> dict[str, Any]:
        state = {"algo": self.name, "env": self.env_id, "steps": self.steps, "updates": self.updates,
                 "last_eval_steps": self.last_eval_steps, "train_seconds": self.train_seconds,
                 "train_cpu_seconds": self.train_cpu_seconds, "best_eval_return": self.best_eval_return}
        if self.reward_scaler is not None:
            state.update(self.reward_scaler.state())
        return state

    @property
    def obs_normalizer(self) -> ObsNormalizer | None:
        """The model's observation normaliser, which the loop feeds the observations it collects
        (None: the model has none)."""
        return getattr(self.agent.alg.model, "obs_normalizer", None)

    def _resume(self, path: str) -> None:
        with checkpoint.open_checkpoint(Path(path)) as file:
            if TRAINER_GROUP not in file:
                raise checkpoint.CheckpointError(f"{path} has no training state (/{TRAINER_GROUP}): it was not "
                                                 "written by a parl_lite.train loop; use Agent.restore for weights")
            state = dict(file[TRAINER_GROUP].attrs)
        if state.get("algo") != self.name:
            raise checkpoint.CheckpointError(f"{path} is a {state.get('algo')} run; this trainer runs {self.name}")
        self.agent.restore(path)
        self.steps, self.updates = int(state["steps"]), int(state["updates"])
        self.last_eval_steps = int(state["last_eval_steps"])
        self.train_seconds, self.train_cpu_seconds = float(state["train_seconds"]), float(state["train_cpu_seconds"])
        self.best_eval_return = float(state.get("best_eval_return", math.nan))  # none in older checkpoints
        if self.reward_scaler is not None:
            try:
                self.reward_scaler.load_state(state)
            except (KeyError, ValueError) as error:
                raise checkpoint.CheckpointError(f"{path}: its reward normalisation statistics cannot be used "
                                                 f"({error}); was the run made without normalize_reward?") from None
        self._read_extra(path)


