"""Fixtures of the tests of parl_lite.io and of the other writers of files: a real small disk."""
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from locations import CHILD_ENV

SMALL_DISK_PRELUDE = """
import os, sys
from pathlib import Path
DISK = Path(sys.argv[1])

def leave_free(size):
    \"\"\"Fill DISK (with DISK/.filler) until only ``size`` bytes are free.\"\"\"
    info = os.statvfs(DISK)
    with open(DISK / ".filler", "ab") as filler:
        filler.write(bytes(max(info.f_bfree * info.f_frsize - size, 0)))
"""


@pytest.fixture(scope="session")
def small_disk() -> Callable[..., subprocess.CompletedProcess]:
    """``small_disk(folder, script, size=65536, timeout=120)`` runs the Python ``script`` with a
    fresh tmpfs of ``size`` bytes mounted at ``folder`` (created), in a mount namespace of its own,
    so that the tmpfs goes with the process: a real full disk, nothing left mounted. The script
    starts with :data:`SMALL_DISK_PRELUDE` (``DISK``, ``leave_free(size)``); stdout and stderr are
    captured as text. As root the namespace is made with ``unshare -m``, otherwise in a user
    namespace (``unshare -rm``); where neither can mount a tmpfs the test is skipped, saying why."""
    mount = ["sh", "-c", 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"', "sh"]
    command = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    with tempfile.TemporaryDirectory() as probe_folder:
        try:
            probe = subprocess.run([*command, *mount, "4096", probe_folder, "true"], capture_output=True, text=True,
                                   timeout=30)
            reason = None if probe.returncode == 0 else probe.stderr.strip()
        except (OSError, subprocess.TimeoutExpired) as error:
            reason = str(error)
    if reason is not None:
        pytest.skip(f"no small tmpfs can be mounted here (neither as root nor in a user namespace): {reason}")

    def run(folder: Path, script: str, size: int = 64 * 1024, timeout: float = 120) -> subprocess.CompletedProcess:
        folder.mkdir(parents=True, exist_ok=True)
        return subprocess.run([*command, *mount, str(size), str(folder), sys.executable, "-c",
                               SMALL_DISK_PRELUDE + script, str(folder)], capture_output=True, text=True, env=CHILD_ENV,
                              timeout=timeout)

    return run
