"""``progress.csv``: one row per generation, written once the evaluation of its generation (if one
was requested) is known, so that row ``g`` holds the evaluation of the solution after generation
``g`` in both modes (in async mode it arrives one or more generations later). The rows still held
for their evaluation go into a checkpoint, so that a resumed run writes them."""
import csv
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from evokit_py.training.schedule import Batch
from evokit_py.training.totals import Totals

__all__ = ["CSV_FIELDS", "ProgressLog"]

CSV_FIELDS = ["generation", "mean_return", "max_return", "min_return", "eval_return", "episodes", "steps",
              "train_seconds", "episodes_per_second"]
_INTEGER_FIELDS = ("generation", "episodes", "steps")


class ProgressLog:
    """progress.csv, rewritten from ``earlier_rows`` (see the module docstring). Leaving the
    ``with`` block writes the rows still held (their evaluation stays ``nan``).

    Raises:
        OSError: the file cannot be written.
    """

    def __init__(self, path: Path, earlier_rows: list[dict]):
        self._file = open(path, "w", newline="")
        self._writer = csv.DictWriter(self._file, CSV_FIELDS)
        self._writer.writeheader()
        self._writer.writerows(earlier_rows)
        self._held: list[tuple[dict, bool]] = []  # (row, still awaiting its evaluation), oldest first

    def __enter__(self) -> "ProgressLog":
        return self

    def __exit__(self, *exc) -> None:
        self._held = [(row, False) for row, _ in self._held]
        self._write_ready()
        self._file.close()

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
        while self._held and not self._held[0][1]:
            self._writer.writerow(self._held.pop(0)[0])
        self._file.flush()

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

