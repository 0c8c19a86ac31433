"""The environment's spaces: the one check make_env runs before anything is built on them."""
import gymnasium as gym
import numpy as np
import pytest

from evokit_py.config import EnvConfig
from evokit_py.envs import make_env


class _Spaces(gym.Env):
    """An environment that only has the spaces it is given."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space):
        self.observation_space, self.action_space = observation_space, action_space


gym.register(id="EvokitSpaces-v0", entry_point=_Spaces)

FLAT = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


@pytest.mark.parametrize("observation_space, action_space, message", [
    (FLAT, gym.spaces.Discrete(2), None),
    (FLAT, gym.spaces.Box(-2.0, 2.0, (1,), np.float32), None),
    (gym.spaces.Box(0, 255, (4, 4), np.uint8), gym.spaces.Discrete(2),
     r"has the observation space Box\(0, 255, \(4, 4\), uint8\); evokit_py needs a flat Box"),
    (gym.spaces.Discrete(16), gym.spaces.Discrete(2), r"has the observation space Discrete\(16\)"),
    (FLAT, gym.spaces.MultiDiscrete([2, 3]), r"has the action space MultiDiscrete\(\[2 3\]\); evokit_py needs "
                                             r"Discrete or a flat Box"),
    (FLAT, gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32), r"has the action space Box\(-1.0, 1.0, \(2, 2\)"),
])
def test_an_env_whose_spaces_evokit_cannot_take_is_refused_naming_env_id_and_space(observation_space, action_space,
                                                                                   message):
    config = EnvConfig(id="EvokitSpaces-v0", kwargs={"observation_space": observation_space,
                                                     "action_space": action_space})
    if message is None:  # a flat Box of observations, Discrete or flat Box actions
        make_env(config).close()
        return
    with pytest.raises(ValueError, match="^env.id: EvokitSpaces-v0 " + message):
        make_env(config)


@pytest.mark.parametrize("env_id, max_steps", [("CartPole-v1", 3), ("Pendulum-v1", 250)])
def test_env_max_steps_is_the_horizon_shorter_or_longer_than_the_envs_own_limit(env_id, max_steps):
    env = make_env(EnvConfig(id=env_id, max_steps=max_steps))
    try:
        env.reset(seed=0)
        steps, ended = 0, False
        while not ended:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample() * 0)
            steps += 1
            ended = terminated or truncated
        assert steps == max_steps and truncated and not terminated
    finally:
        env.close()
