"""The web monitor: one read-only page and a JSON API over a status source.

A source is the local pools of this machine (:class:`~parl_lite.ext.monitor.local.LocalPools`, for
``parl-lite monitor``) or a cluster master; either gives the status dict described in
``docs/monitor.md`` ("JSON API") and each actor's last output lines.
"""
from parl_lite.ext.monitor.server import MonitorServer, StatusSource

__all__ = ["MonitorServer", "StatusSource"]
