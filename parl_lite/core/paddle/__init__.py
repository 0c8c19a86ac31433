"""PARL's ``parl.core.paddle``: the paddle implementation of Model, Algorithm and Agent (the same
classes as ``parl_lite.Model``, ``parl_lite.Algorithm`` and ``parl_lite.Agent``)."""
from parl_lite.core.agent import Agent
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.model import Model

__all__ = ["Agent", "Algorithm", "Model"]
