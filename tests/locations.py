"""Where the tests find the repository: its root, this folder (the helper modules, which every process
a test starts finds on its PYTHONPATH: :data:`CHILD_ENV`), the example scripts and the benchmarks."""
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
EXAMPLES = ROOT / "scripts" / "examples"
BENCH = ROOT / "scripts" / "bench"
# the environment of a child process: this one's, with the repository, tests/ and this process's path first
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS), *sys.path])}
