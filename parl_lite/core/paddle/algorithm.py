"""PARL's ``parl.core.paddle.algorithm``: :class:`parl_lite.Algorithm`."""
from parl_lite.core.algorithm import Algorithm

__all__ = ["Algorithm"]
