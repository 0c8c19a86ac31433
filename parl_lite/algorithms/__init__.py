"""The algorithm zoo: one module per algorithm, each readable top to bottom, with PARL's
constructors and ``learn`` / ``predict`` / ``sample`` signatures (``parl.algorithms``).

``vtrace`` is the V-trace module (:func:`parl_lite.algorithms.vtrace.vtrace`,
:func:`parl_lite.algorithms.vtrace.from_importance_weights`).
"""
from parl_lite.algorithms import vtrace
from parl_lite.algorithms.a2c import A2C
from parl_lite.algorithms.ddpg import DDPG
from parl_lite.algorithms.dqn import DDQN, DQN
from parl_lite.algorithms.impala import IMPALA
from parl_lite.algorithms.pg import PolicyGradient
from parl_lite.algorithms.ppo import PPO
from parl_lite.algorithms.sac import SAC
from parl_lite.algorithms.td3 import TD3

__all__ = ["A2C", "DDPG", "DDQN", "DQN", "IMPALA", "PPO", "PolicyGradient", "SAC", "TD3", "vtrace"]
