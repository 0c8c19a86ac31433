"""The algorithm zoo: one module per algorithm, each readable top to bottom."""
from parl_lite.algorithms.ddpg import DDPG
from parl_lite.algorithms.pg import PolicyGradient
from parl_lite.algorithms.sac import SAC
from parl_lite.algorithms.td3 import TD3

__all__ = ["DDPG", "PolicyGradient", "SAC", "TD3"]
