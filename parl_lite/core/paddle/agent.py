"""PARL's ``parl.core.paddle.agent``: :class:`parl_lite.Agent`."""
from parl_lite.core.agent import Agent

__all__ = ["Agent"]
