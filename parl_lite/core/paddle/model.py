"""PARL's ``parl.core.paddle.model``: :class:`parl_lite.Model`."""
from parl_lite.core.model import Model

__all__ = ["Model"]
