"""The algorithm zoo: one module per algorithm, each readable top to bottom."""
from parl_lite.algorithms.pg import PolicyGradient

__all__ = ["PolicyGradient"]
