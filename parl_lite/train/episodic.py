"""The Monte-Carlo loop (REINFORCE, PARL's QuickStart): whole episodes, normalised discounted
returns (:class:`parl_lite.core.samples.Episode`), one ``learn`` per episode."""

import gymnasium as gym
import numpy as np

from parl_lite.core.agent import Agent
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.samples import Episode
from parl_lite.train.base import Trainer
from parl_lite.utils.envs import EpisodeReturns

__all__ = ["EpisodicTrainer"]


class EpisodicTrainer(Trainer):
    """Play one episode with ``agent.sample``, then learn from it: ``agent.learn_from`` an
    :class:`parl_lite.core.samples.Episode` (its normalised discounted returns; PolicyGradient's
    ``learn`` takes them as ``reward``, PARL's name).

    Args:
        agent: the agent or algorithm to train.
        env_id: a registered gymnasium id.
        gamma: discount of the returns.
        **options: the :class:`Trainer` options (seed, target, eval_every, save, ...).
    """

    def __init__(self, agent: Agent | Algorithm, env_id: str, *, gamma: float = 0.99, **options) -> None:
        super().__init__(agent, env_id, **options)
        self._sample_type(Episode)
        self.env = gym.make(env_id)
        self.gamma = gamma
        self.episodes = 0
        self.returns = EpisodeReturns(1)

    def _round(self, total_steps: int) -> None:
        observations, actions, rewards = [], [], []
        obs, _ = self.env.reset(seed=self.seed * 100_000 + self.episodes + 1)
        done = False
        while not done:
            sampled, _ = self.agent.sample(obs[None])
            action = sampled[0]
            observations.append(obs)
            actions.append(action)
            obs, reward, terminated, truncated, _ = self.env.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        self.episodes += 1
        self.returns.update(np.array([sum(rewards)]), np.array([True]))
        self.last_learned = self.agent.learn_from(Episode.from_steps(observations, actions, rewards, self.gamma))
        self.updates += 1
        self.steps += len(rewards)

    def train_return(self) -> float:
        return self.returns.recent_mean

    def _close(self) -> None:
        self.env.close()
