"""A run's scalars: TensorBoard event files (through tensorboardX) and a CSV of every scalar
(:class:`SummaryWriter`; :mod:`parl_lite.utils.summary` gives it PARL's module functions).

The CSV (``<logdir>/scalars.csv``, columns ``wall_time,step,tag,value``) is in long format, so a
tag added late needs no new column; rows are flushed as they are written, so a crashed run keeps
its log.
"""
import csv
import os
import time
from pathlib import Path

import numpy as np

from parl_lite.common.paths import open_to_write_in_place

__all__ = ["SummaryWriter", "CSV_NAME", "CSV_HEADER"]

CSV_NAME = "scalars.csv"
CSV_HEADER = ("wall_time", "step", "tag", "value")


class SummaryWriter:
    """Writes scalars and histograms to a TensorBoard event file and scalars to a CSV file.

    Args:
        logdir: folder of the event file and ``scalars.csv`` (created if missing).
        flush_secs: how often tensorboardX flushes its event file.
    """

    def __init__(self, logdir: "str | os.PathLike", flush_secs: int = 10) -> None:
        from tensorboardX import SummaryWriter as _TBXWriter  # lazy: pulls in protobuf

        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        csv_path = self.logdir / CSV_NAME
        is_new = not csv_path.exists() or csv_path.stat().st_size == 0
        self._csv_file = open_to_write_in_place(csv_path, append=True)  # a FIFO there is refused, not waited on
        self._csv = csv.writer(self._csv_file)
        if is_new:
            self._csv.writerow(CSV_HEADER)
            self._csv_file.flush()
        self._events = _TBXWriter(logdir=str(self.logdir), flush_secs=flush_secs)

    def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> None:
        """Record ``scalar_value`` under ``tag`` at ``global_step`` (event file and CSV)."""
        value = float(scalar_value)
        wall_time = time.time()
        self._events.add_scalar(tag, value, global_step=int(global_step), walltime=wall_time)
        self._csv.writerow((f"{wall_time:.3f}", int(global_step), tag, repr(value)))
        self._csv_file.flush()

    def add_histogram(self, tag: str, values: np.ndarray, global_step: int, bins: str = "tensorflow") -> None:
        """Record the distribution of ``values`` (any shape) under ``tag`` at ``global_step``."""
        values = np.asarray(values, dtype=np.float64).ravel()
        if values.size == 0:
            raise ValueError(f"add_histogram {tag!r}: values is empty")
        self._events.add_histogram(tag, values, global_step=int(global_step), bins=bins)

    def flush(self) -> None:
        """Write buffered events and rows to disk."""
        self._events.flush()
        self._csv_file.flush()

    def close(self) -> None:
        """Flush and close both files."""
        if not self._csv_file.closed:
            self._events.close()
            self._csv_file.close()

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
