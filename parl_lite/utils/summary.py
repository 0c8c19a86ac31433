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

The writer is :class:`parl_lite.common.scalars.SummaryWriter` (the CSV, ``<logdir>/scalars.csv``,
is in long format: ``wall_time,step,tag,value``).
"""
import os
from pathlib import Path

import numpy as np

from parl_lite.common.scalars import SummaryWriter
from parl_lite.utils import logger

__all__ = ["SummaryWriter", "set_logdir", "get_logdir", "add_scalar", "add_histogram", "flush", "close"]

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
