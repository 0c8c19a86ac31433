"""PARL's ``CSVLogger``: one CSV row per dict, the header from the first dict's keys.

    csv_logger = CSVLogger("result.csv")
    csv_logger.log_dict({"loss": 1, "reward": 2})
    csv_logger.log_dict({"loss": 3, "reward": 4})
    csv_logger.close()                         # result.csv: loss,reward / 1,2 / 3,4

Each row is flushed as it is written, so a run that crashes keeps its rows (PARL buffers them).
"""
import csv
import os
import threading
from typing import Any
from collections.abc import Mapping

from parl_lite.common.paths import open_to_write_in_place
from parl_lite.common.space import explain_write_error

__all__ = ["CSVLogger"]


class CSVLogger:
    """Writes dicts with the same keys as rows of a CSV file (created, or emptied if it exists).

    Thread-safe. Also a context manager (closes the file).

    Args:
        output_file: path of the CSV file (or a character device such as ``/dev/null``).

    Raises:
        FileExistsError: ``output_file`` is a FIFO, a socket or a block device (opening a FIFO
            would block until a reader comes); IsADirectoryError: it is a folder.
    """

    def __init__(self, output_file: "str | os.PathLike") -> None:
        self.path = os.fspath(output_file)
        self.output_file = open_to_write_in_place(output_file, append=False)
        self._writer: csv.DictWriter | None = None
        self._lock = threading.Lock()

    def log_dict(self, result: Mapping[str, Any]) -> None:
        """Write ``result`` as a row; the first call writes the header (its keys, in order).

        Raises:
            TypeError: ``result`` is not a mapping.
            ValueError: its keys differ from the first row's (PARL: AssertionError).
            OSError: the row cannot be written (no space left on device, ...), naming the file.
        """
        if not isinstance(result, Mapping):
            raise TypeError(f"CSVLogger.log_dict takes a dict, got {type(result).__name__}")
        with self._lock:
            writer, header = self._writer, self._writer is None
            if writer is None:
                writer = self._writer = csv.DictWriter(self.output_file, list(result))
            if set(result) != set(writer.fieldnames):
                raise ValueError(f"CSVLogger.log_dict: keys {sorted(result)} differ from the header's "
                                 f"{list(writer.fieldnames)}; every row needs the same keys")
            try:
                if header:
                    writer.writeheader()
                writer.writerow(result)
                self.output_file.flush()
            except OSError as error:
                raise explain_write_error(error, self.path) from error

    def flush(self) -> None:
        """Flush the file (rows are already flushed as they are written)."""
        with self._lock:
            if not self.output_file.closed:
                self.output_file.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            self.output_file.close()

    def __enter__(self) -> "CSVLogger":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        output_file = self.__dict__.get("output_file")
        if output_file is not None:
            output_file.close()
