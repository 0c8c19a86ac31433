"""Pool status that other processes can read (``parl-lite status``).

The pool is the one owner of its status: it creates a shared-memory-dict, rewrites it about twice a
second and unlinks it at shutdown (its resource tracker unlinks it if the pool's process dies). The
traps of shared-memory-dict (DESIGN.md §2) are avoided rather than patched over:
- readers never open it through ``SharedMemory``, whose resource tracker would unlink the segment
  when a reader exits; they read the file under ``/dev/shm`` directly;
- a read may race with a write (there is no cross-process lock), so the owner stores the JSON body
  with its CRC-32 and readers retry until the two agree;
- values are JSON, not pickles, so reading another process's status never unpickles anything.
"""
import glob
import json
import os
import zlib
from typing import Any, Dict, List

from shared_memory_dict import SharedMemoryDict
from shared_memory_dict.serializers import JSONSerializer
from shared_memory_dict.templates import MEMORY_NAME

from parl_lite.remote.shm import SHM_DIR

__all__ = ["StatusBoard", "read_status", "find_pools"]

_NAME = "parl_lite_status_{pid}"
_SIZE = 256 * 1024
_READ_ATTEMPTS = 100


class StatusBoard:
    """The owner's side: publish a JSON-able dict under this process's pid."""

    def __init__(self, pid: int) -> None:
        self.name = _NAME.format(pid=pid)
        self._dict = SharedMemoryDict(self.name, _SIZE, serializer=JSONSerializer())

    def publish(self, status: Dict[str, Any]) -> None:
        """Replace the published status."""
        body = json.dumps(status, sort_keys=True)
        self._dict.update(body=body, crc=zlib.crc32(body.encode()))

    def close(self) -> None:
        """Unlink the status (the owner does this once, at shutdown)."""
        segment = self._dict.shm
        self._dict.cleanup()
        segment.unlink()


def _segment_path(pid: int) -> str:
    return os.path.join(SHM_DIR, MEMORY_NAME.format(name=_NAME.format(pid=pid)))


def find_pools() -> List[int]:
    """Pids of the processes that publish a pool status on this machine."""
    pattern = _segment_path(0).replace("_0", "_*")
    pids = []
    for path in glob.glob(pattern):
        suffix = path.rsplit("_", 1)[-1]
        if suffix.isdigit():
            pids.append(int(suffix))
    return sorted(pids)


def read_status(pid: int) -> Dict[str, Any]:
    """Read the status published by the pool in process ``pid``.

    Raises:
        FileNotFoundError: no pool publishes under that pid.
        RuntimeError: the status kept changing under the reader (it never read a consistent copy).
    """
    path = _segment_path(pid)
    serializer = JSONSerializer()
    for _ in range(_READ_ATTEMPTS):
        with open(path, "rb") as segment:
            raw = segment.read()
        try:
            record = serializer.loads(raw)
            body = record["body"]
        except (ValueError, KeyError, TypeError):
            continue  # torn read, or the owner has not written yet
        if zlib.crc32(body.encode()) == record.get("crc"):
            return json.loads(body)
    raise RuntimeError(f"could not read a consistent status of pool {pid} from {path}")
