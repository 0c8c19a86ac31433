"""The off-policy loop (DQN, DDPG, TD3, SAC): one environment, a replay memory, updates on its
minibatches (:class:`parl_lite.core.samples.Transitions`)."""

from typing import Any

import dataclasses
import numbers
from pathlib import Path

import h5py
import numpy as np

from parl_lite.core.agent import Agent
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.samples import Transitions
from parl_lite.io import checkpoint
from parl_lite.train.base import EnvSpaces, Trainer, spaces_of
from parl_lite.train.exploration import ContinuousExploration, EpsilonGreedy, Exploration
from parl_lite.utils.envs import EpisodeReturns, final_observations, make_vector_env
from parl_lite.utils.frame_replay import FrameReplayMemory
from parl_lite.utils.normalization import RewardScaler
from parl_lite.utils.replay_memory import GROUP as REPLAY_GROUP, ReplayMemory, ReplayMemoryError

__all__ = ["OffPolicyTrainer"]


class OffPolicyTrainer(Trainer):
    """Step one environment with the exploration policy, store every transition, and every
    ``train_every`` steps (after ``learning_starts``) take ``gradient_steps`` updates on uniform
    minibatches of the replay memory.

    Continuous algorithms act in [-1, 1]; the loop scales their actions to the action space's
    bounds (``high``), in training and in evaluation.

    Args:
        agent: the agent or algorithm to train: it learns from
            :class:`parl_lite.core.samples.Transitions` (``obs``, ``action``, ``reward``,
            ``next_obs``, ``terminal``: a true termination, not a time-limit truncation), through
            ``agent.learn_from``.
        env_id: a registered gymnasium id.
        exploration: how actions are chosen; default: epsilon-greedy (1.0 -> 0.05 over 10k steps)
            for discrete actions, Gaussian noise 0.1 after ``learning_starts`` random steps for
            continuous ones.
        learning_starts: no update before this many steps.
        train_every: environment steps between rounds of updates.
        gradient_steps: updates per round.
        batch_size: minibatch size.
        memory_size: replay capacity (default: the step budget).
        target_every: call ``algorithm.sync_target()`` every this many steps (DQN's hard copy);
            None: the algorithm updates its target itself (DDPG, TD3, SAC).
        normalize_reward: divide the rewards the algorithm learns from by the running standard
            deviation of the discounted return (SB3's ``VecNormalize(norm_reward=True)``: the memory
            keeps raw rewards, scaled when sampled); the model's observation normaliser, if it has
            one, is fed every observation either way.
        gamma: the discount of that return (the algorithm's).
        **options: the :class:`Trainer` options (seed, target, eval_every, save, ...).
    """

    def __init__(self, agent: Agent | Algorithm, env_id: str, *, exploration: Exploration | None = None,
                 learning_starts: int = 1_000, train_every: int = 1, gradient_steps: int = 1, batch_size: int = 256,
                 memory_size: int | None = None, target_every: int | None = None, normalize_reward: bool = False,
                 gamma: float = 0.99, **options) -> None:
        super().__init__(agent, env_id, **options)
        self._sample_type(Transitions)
        for name, value in (("train_every", train_every), ("gradient_steps", gradient_steps),
                            ("batch_size", batch_size)):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.env, first_obs = make_vector_env(env_id, 1, self.seed, env_kwargs=self.env_kwargs)
        self.spaces = spaces_of(self.env.single_observation_space, self.env.single_action_space, env_id)
        self.obs_dim, self.act_dim, self.continuous, self.action_high = self.spaces[:4]
        if exploration is None:
            exploration = (ContinuousExploration(self.act_dim, 0.1, learning_starts, seed=self.seed) if self.continuous
                           else EpsilonGreedy(self.act_dim, seed=self.seed))
        self.exploration = exploration
        self.learning_starts, self.train_every, self.gradient_steps = learning_starts, train_every, gradient_steps
        self.batch_size, self.memory_size, self.target_every = batch_size, memory_size, target_every
        self.memory: ReplayMemory | FrameReplayMemory | None = None
        self.returns = EpisodeReturns(1)
        self.obs: np.ndarray = first_obs
        self.reward_scaler = RewardScaler(1, gamma) if normalize_reward else None

    def _action_scale(self) -> np.ndarray | None:
        return self.action_high

    def _round(self, total_steps: int) -> None:
        if self.memory is None:
            self.memory = _replay_memory(self.spaces, self.memory_size or total_steps, self.seed)
        memory = self.memory
        normalizer = self.obs_normalizer
        if normalizer is not None and self.steps == 0:
            normalizer.update(self.obs)
        step = self.steps + 1
        action = self.exploration.act(self.agent, self.obs[0], step)
        env_action = action * self.action_high if self.action_high is not None else action
        next_obs, reward, terminated, truncated, info = self.env.step(np.asarray([env_action]))
        ends = terminated | truncated
        memory.append(self.obs[0], action, float(reward[0]), final_observations(next_obs, ends, info)[0],
                      bool(terminated[0]))
        self.returns.update(reward, ends, info)
        if ends[0]:
            self.exploration.episode_ended()
        if normalizer is not None:
            normalizer.update(next_obs)
        if self.reward_scaler is not None:
            self.reward_scaler.observe(reward, ends)
        self.obs = next_obs
        self.steps = step

        if step > self.learning_starts and step % self.train_every == 0:
            for _ in range(self.gradient_steps):
                sample = Transitions(*memory.sample_batch(self.batch_size))
                if self.reward_scaler is not None:
                    sample = dataclasses.replace(sample, reward=self.reward_scaler.scale(sample.reward))
                self.last_learned = self.agent.learn_from(sample)
                self.updates += 1
        if self.target_every is not None and step % self.target_every == 0:
            target_holder: Any = self.agent.alg  # DQN, DDPG, TD3, SAC: sync_target()
            target_holder.sync_target()

    def train_return(self) -> float:
        return self.returns.recent_mean

    def _write_extra(self, file: h5py.File) -> None:
        if self.memory is not None:
            self.memory.write_group(file)

    def _read_extra(self, path: str) -> None:
        with checkpoint.open_checkpoint(Path(path)) as file:
            if REPLAY_GROUP not in file:
                return
            capacity = file[REPLAY_GROUP].attrs.get("max_size")
        # load() checks the stored transitions against the capacity; the capacity itself is checked
        # here, where it is allocated
        if isinstance(capacity, bool) or not isinstance(capacity, numbers.Integral) or capacity <= 0:
            raise checkpoint.CheckpointError(f"{path}: its replay memory's max_size {capacity!r} is not a positive "
                                             "integer")
        try:
            self.memory = _replay_memory(self.spaces, int(capacity), self.seed)
        except (MemoryError, ValueError):  # numpy: ValueError past the address space
            raise checkpoint.CheckpointError(f"{path}: its replay memory's max_size {capacity} transitions do not fit "
                                             "in this machine's memory") from None
        try:
            self.memory.load(path)
        except ReplayMemoryError as error:
            raise checkpoint.CheckpointError(str(error)) from error

    def _close(self) -> None:
        self.env.close()


def _replay_memory(spaces: EnvSpaces, capacity: int, seed: int) -> ReplayMemory | FrameReplayMemory:
    """The replay memory for an environment's observations: stacked frames kept once each for
    images, whole transitions for vectors."""
    if spaces.image:
        return FrameReplayMemory(capacity, spaces.obs_shape[1:], spaces.obs_shape[0], seed=seed)
    return ReplayMemory(capacity, spaces.obs_dim, spaces.act_dim if spaces.continuous else 0, seed=seed)
