"""Utilities, under PARL's names (``from parl.utils import logger, summary, ReplayMemory``):
the logger, the summary writer, ``CSVLogger``, the replay memory, the schedulers, time and window
statistics, discounted sums and GAE (``rl_utils``) and this machine's ports, IP address and GPUs.

``ReplayMemory`` is loaded on first use (it imports h5py).
"""
import sys

from parl_lite.lazy import lazy_exports
from parl_lite.utils import logger, machine_info, rl_utils, scheduler, summary, time_stat, window_stat
from parl_lite.utils.csv_logger import CSVLogger
from parl_lite.utils.machine_info import (get_free_tcp_port, get_gpu_count, get_ip_address, get_port_from_range,
                                          is_gpu_available, is_port_available)
from parl_lite.utils.rl_utils import calc_discount_sum_rewards, calc_gae
from parl_lite.utils.scheduler import LinearDecayScheduler, PiecewiseScheduler
from parl_lite.utils.time_stat import TimeStat
from parl_lite.utils.window_stat import WindowStat

_LAZY = {"ReplayMemory": "parl_lite.utils.replay_memory"}

_IS_WINDOWS = sys.platform == "win32"  # PARL's flag, which its file-shipping tests import from here

__all__ = [
    "logger", "summary", "machine_info", "rl_utils", "scheduler", "time_stat", "window_stat", "CSVLogger",
    "get_free_tcp_port", "is_port_available", "get_port_from_range", "get_ip_address", "get_gpu_count",
    "is_gpu_available", "calc_discount_sum_rewards", "calc_gae", "LinearDecayScheduler", "PiecewiseScheduler",
    "TimeStat", "WindowStat", *_LAZY,
]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
