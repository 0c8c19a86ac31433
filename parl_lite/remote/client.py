"""PARL's ``parl.remote.client`` path: ``disconnect()`` ends the connection ``connect()`` made.

parl_lite's name for it is :func:`parl_lite.shutdown`, which also stops the local pool.
"""
from parl_lite.remote.api import shutdown as disconnect

__all__ = ["disconnect"]
