"""Training logs: TensorBoard event files (through tensorboardX) plus a CSV of every scalar.

PARL's ``parl.utils.summary``::

    from parl_lite.utils import summary
    summary.add_scalar("train/return", 500.0, 12_000)     # (tag, scalar_value, global_step)
    summary.add_histogram("policy/logits", logits, 12_000)

The module functions write to :func:`set_logdir`'s folder if given, else to the logger's folder
(:func:`parl_lite.utils.logger.set_dir`), else they set the logger's folder to
``./train_log/<script name>`` (``logger.auto_set_dir(action="k")``: kept, appended to; PARL
deletes it) and write there.

or with an explicit writer::

    with SummaryWriter("runs/x") as writer:
        writer.add_scalar("loss", 0.1, 1)

The CSV (``<logdir>/scalars.csv``, columns ``wall_time,step,tag,value``) is in long format, so a
tag added late needs no new column; rows are flushed as they are written, so a crashed run keeps
its log.
"""
import csv
import os
import time
from pathlib import Path

import numpy as np

from parl_lite.io.paths import open_to_write_in_place
from parl_lite.utils import logger

__all__ = ["SummaryWriter", "set_logdir", "get_logdir", "add_scalar", "add_histogram", "flush", "close"]

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


_writer: SummaryWriter | None = None
_logdir: Path | None = None


def set_logdir(logdir: "str | os.PathLike") -> None:
    """Direct the module-level functions to ``logdir`` (closes the previous writer)."""
    global _logdir
    close()
    _logdir = Path(logdir)


def get_logdir() -> Path:
    """The folder the module-level functions write (or will write) to."""
    if _logdir is not None:
        return _logdir
    return Path(logger.get_dir() or logger.auto_dir_name())


def _default_writer() -> SummaryWriter:
    global _writer
    if _writer is None:
        if _logdir is None and logger.get_dir() is None:
            logger.auto_set_dir(action="k")
        _writer = SummaryWriter(get_logdir())
    return _writer


def add_scalar(tag: str, scalar_value: float, global_step: int) -> None:
    """Record a scalar with the module's writer (see :meth:`SummaryWriter.add_scalar`)."""
    _default_writer().add_scalar(tag, scalar_value, global_step)


def add_histogram(tag: str, values: np.ndarray, global_step: int) -> None:
    """Record a histogram with the module's writer (see :meth:`SummaryWriter.add_histogram`)."""
    _default_writer().add_histogram(tag, values, global_step)


def flush() -> None:
    """Flush the module's writer, if any."""
    if _writer is not None:
        _writer.flush()


def close() -> None:
    """Close the module's writer, if any (the next call opens a new one)."""
    global _writer
    if _writer is not None:
        _writer.close()
        _writer = None
