"""``progress.csv``: one row per generation, written once the evaluation of its generation (if one
was requested) is known, so that row ``g`` holds the evaluation of the solution after generation
``g`` in both modes (in async mode it arrives one or more generations later). The rows still held
for their evaluation go into a checkpoint, so that a resumed run writes them.

Rows are appended whole or not at all (a half row would make the file unreadable to ``--resume``).
Rows that cannot be written (a full disk) stay held, go into the checkpoints like those awaiting
their evaluation, and are written with the next row once there is room."""
import csv
import io
import math
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from evokit_py.training.schedule import Batch
from evokit_py.training.totals import Totals
from parl_lite.common.atomic import write_bytes_atomically
from parl_lite.common.space import explain_write_error

__all__ = ["CSV_FIELDS", "ProgressLog"]

CSV_FIELDS = ["generation", "mean_return", "max_return", "min_return", "eval_return", "episodes", "steps",
              "train_seconds", "episodes_per_second"]
_INTEGER_FIELDS = ("generation", "episodes", "steps")


class ProgressLog:
    """progress.csv, rewritten atomically from ``earlier_rows`` (see the module docstring). Leaving
    the ``with`` block writes the rows still held (their evaluation stays ``nan``).

    Args:
        warn: told, once, why rows cannot be written.

    Attributes:
        failure: why the last rows could not be written (None once they all are).

    Raises:
        OSError: the file cannot be rewritten (the message names it; the earlier file stays).
    """

    def __init__(self, path: Path, earlier_rows: list[dict], warn: Callable[[str], None]):
        self.path, self._warn = path, warn
        write_bytes_atomically(path, _csv_text(earlier_rows, header=True).encode())
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._held: list[tuple[dict, bool]] = []  # (row, still awaiting its evaluation), oldest first
        self.failure: str | None = None
        self._warned = False

    def __enter__(self) -> "ProgressLog":
        return self

    def __exit__(self, *exc) -> None:
        self._held = [(row, False) for row, _ in self._held]
        self._write_ready()
        os.close(self._fd)

    @property
    def unwritten(self) -> int:
        """Rows held because they could not be written."""
        return sum(1 for _, awaiting in self._held if not awaiting) if self.failure else 0

    def hold(self, rows: list[dict], awaits: Callable[[int], bool]) -> None:
        """Take back the rows a checkpoint held (:meth:`held_from_extra`); ``awaits(g)``: whether the
        evaluation of the solution after generation ``g`` (the row of ``g + 1``) is still to come."""
        for row in rows:
            self._add(row, awaits(row["generation"] - 1))

    def add(self, batch: Batch, totals: Totals, episodes_per_candidate: int, awaiting: bool) -> dict:
        """The row of ``batch`` (``totals`` counting it already), held while ``awaiting`` its evaluation."""
        returns = batch.result["returns"]
        row = {"generation": batch.generation + 1, "mean_return": float(returns.mean()),
               "max_return": float(returns.max()), "min_return": float(returns.min()), "eval_return": math.nan,
               "episodes": totals.episodes, "steps": totals.steps, "train_seconds": round(totals.train_seconds, 4),
               "episodes_per_second": round(len(batch.infos) * episodes_per_candidate / batch.seconds, 1)}
        self._add(row, awaiting)
        return row

    def _add(self, row: dict, awaiting: bool) -> None:
        self._held.append((row, awaiting))
        self._write_ready()

    def evaluated(self, generation: int, value: float) -> None:
        """Fill in the evaluation of the row of ``generation`` (1-based, as in the CSV)."""
        for index, (row, _) in enumerate(self._held):
            if row["generation"] == generation:
                row["eval_return"] = value
                self._held[index] = (row, False)
        self._write_ready()

    def _write_ready(self) -> None:
        ready = 0
        while ready < len(self._held) and not self._held[ready][1]:
            ready += 1
        if not ready:
            return
        try:
            _append_whole(self._fd, _csv_text([row for row, _ in self._held[:ready]]).encode())
        except OSError as error:
            self.failure = str(explain_write_error(error, self.path))
            if not self._warned:
                self._warned = True
                self._warn(f"es-train: warning: {self.failure}; its rows are kept (in the checkpoint too) and "
                           f"written once there is room; training goes on")
            return
        del self._held[:ready]
        self.failure = None

    def to_extra(self) -> dict[str, np.ndarray]:
        """The rows not written yet, for a checkpoint (their evaluations apart: nan where none yet)."""
        rows = [row for row, _ in self._held]
        values = np.array([[row[key] for key in CSV_FIELDS if key != "eval_return"] for row in rows], dtype=np.float64)
        return {"log/held_rows": values.reshape(len(rows), len(CSV_FIELDS) - 1),
                "log/held_evals": np.array([row["eval_return"] for row in rows], dtype=np.float64)}

    @staticmethod
    def held_from_extra(extra: dict[str, np.ndarray]) -> list[dict]:
        """The rows :meth:`to_extra` saved (none in a checkpoint from before it)."""
        if "log/held_rows" not in extra:
            return []
        fields = [key for key in CSV_FIELDS if key != "eval_return"]
        rows = []
        for values, evaluation in zip(extra["log/held_rows"], extra["log/held_evals"], strict=True):
            row = {key: int(value) if key in _INTEGER_FIELDS else float(value)
                   for key, value in zip(fields, values, strict=True)}
            rows.append({**row, "eval_return": float(evaluation)})
        return rows



def _csv_text(rows: list[dict], header: bool = False) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, CSV_FIELDS)
    if header:
        writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def _append_whole(descriptor: int, data: bytes) -> None:
    """Append ``data`` to the file open at ``descriptor`` (``O_APPEND``), all of it or nothing: on a
    failure the file is cut back to its size before.

    Raises:
        OSError: as the system reports it.
    """
    size = os.fstat(descriptor).st_size
    written = 0
    try:
        while written < len(data):
            written += os.write(descriptor, data[written:])
    except OSError:
        if written:
            os.ftruncate(descriptor, size)
        raise
