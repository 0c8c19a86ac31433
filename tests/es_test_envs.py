"""Environments for es-train's tests, registered when this module is imported (``env.id:
es_test_envs:<id>`` makes gymnasium import it, in the trainer and in every worker).

- ``BusyCartPole-v0``: CartPole whose every step burns ``busy_ms`` milliseconds of the process's CPU
  time: a known lower bound on the CPU a run's workers spend.
- ``SeedReturn-v0``: one step whose reward is ``(reset seed % 1000) / 1000``, whatever the action:
  an evaluation's mean depends only on its episode seeds, so a test knows which evaluations reach a
  target and which confirmations fail.
"""
import time

import gymnasium
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class BusyCartPole(CartPoleEnv):
    def __init__(self, busy_ms: float = 1.0):
        super().__init__()
        self.busy_seconds = busy_ms / 1000

    def step(self, action):
        until = time.process_time() + self.busy_seconds
        while time.process_time() < until:
            pass
        return super().step(action)


class SeedReturn(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.reward = 0.0 if seed is None else (seed % 1000) / 1000
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), self.reward, True, False, {}


def seed_return(seeds: list[list[int]]) -> float:
    """The mean return ``SeedReturn-v0`` gives for these episode seeds (one episode each)."""
    return float(np.mean([(episode[0] % 1000) / 1000 for episode in seeds]))


gymnasium.register(id="BusyCartPole-v0", entry_point=BusyCartPole, max_episode_steps=500)
gymnasium.register(id="SeedReturn-v0", entry_point=SeedReturn)
