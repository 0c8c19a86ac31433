"""PARL's ``parl.algorithms.paddle``: the same algorithms as :mod:`parl_lite.algorithms`."""
from parl_lite.algorithms import A2C, DDPG, DDQN, DQN, IMPALA, PPO, SAC, TD3, PolicyGradient

__all__ = ["A2C", "DDPG", "DDQN", "DQN", "IMPALA", "PPO", "PolicyGradient", "SAC", "TD3"]
