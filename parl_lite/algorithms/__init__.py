"""The algorithm zoo: one module per algorithm, each readable top to bottom."""
from parl_lite.algorithms.pg import PolicyGradient
from parl_lite.algorithms.ppo import PPO

__all__ = ["PolicyGradient", "PPO"]
