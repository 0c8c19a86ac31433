"""PARL's ``parl.algorithms.paddle.impala``: :class:`IMPALA` and the ``vtrace`` module
(``vtrace.from_importance_weights``)."""
from parl_lite.algorithms import vtrace
from parl_lite.algorithms.impala import IMPALA

__all__ = ["IMPALA", "vtrace"]
