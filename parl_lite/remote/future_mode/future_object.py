"""PARL's ``parl.remote.future_mode.future_object.FutureObject``: :class:`parl_lite.Future`."""
from parl_lite.remote.futures import Future as FutureObject

__all__ = ["FutureObject"]
