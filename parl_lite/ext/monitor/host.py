"""This machine as a node of the monitor: CPUs in use, memory, and a history of its load."""
import collections
import os
import socket
import threading
import time
from typing import Any

from parl_lite.utils.machine_info import memory_mb

__all__ = ["HostSampler"]

_LOAD_PERIOD = 5.0  # seconds between two points of the load history
_LOAD_HISTORY = 600.0  # seconds of load history kept
_CPU_MIN_INTERVAL = 1.0  # CPU use is measured over at least this many seconds


class HostSampler:
    """Measures this machine each time it is asked, no more often than the periods above.

    CPUs used is the busy time of all CPUs over the last interval (``/proc/stat``), in CPUs; the
    load history holds the 1-minute load average every 5 s over the last 10 minutes.
    """

    def __init__(self) -> None:
        self.host = socket.gethostname()
        self._lock = threading.Lock()
        self._load: collections.deque[tuple[float, float]] = collections.deque(maxlen=int(_LOAD_HISTORY / _LOAD_PERIOD))
        self._cpu_times: tuple[float, float, float] | None = None  # (when, busy, total) ticks
        self._cpus_used = 0.0
        self._measure_cpus(time.time())  # the first request then gets the use since now

    def start(self) -> "HostSampler":
        """Keep sampling in a background thread, so the load history covers the time before the
        first page was opened; returns self."""
        def sample_forever() -> None:
            while True:
                self.node()
                time.sleep(_LOAD_PERIOD)

        threading.Thread(target=sample_forever, name="parl_lite-monitor-host", daemon=True).start()
        return self

    def node(self) -> dict[str, Any]:
        """The status entry of this machine (a node of the status dict: ``docs/monitor.md``, "JSON API")."""
        now = time.time()
        with self._lock:
            if not self._load or now - self._load[-1][0] >= _LOAD_PERIOD:
                self._load.append((round(now, 1), round(os.getloadavg()[0], 2)))
            self._measure_cpus(now)
            load: list[list[float]] = [list(point) for point in self._load]
            cpus_used = self._cpus_used
        mem_used, mem_total = memory_mb()
        return {
            "id": self.host, "host": self.host, "alive": True,
            "cpus_total": os.cpu_count() or 1, "cpus_used": round(cpus_used, 2),
            "mem_used_mb": mem_used, "mem_total_mb": mem_total,
            "load": load,
        }

    def _measure_cpus(self, now: float) -> None:
        if self._cpu_times is not None and now - self._cpu_times[0] < _CPU_MIN_INTERVAL:
            return
        busy, total = _cpu_ticks()
        if self._cpu_times is not None and total > self._cpu_times[2]:
            share = (busy - self._cpu_times[1]) / (total - self._cpu_times[2])
            self._cpus_used = share * (os.cpu_count() or 1)
        self._cpu_times = (now, busy, total)


def _cpu_ticks() -> tuple[float, float]:
    """(busy, total) CPU ticks of all CPUs since boot."""
    with open("/proc/stat") as stat:
        fields = [float(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user time
    return total - idle, total

