"""PARL's module path of the future a ``wait=False`` actor's call returns: ``FutureObject`` is
:class:`parl_lite.Future`."""
from parl_lite.remote.future_mode.future_object import FutureObject

__all__ = ["FutureObject"]
