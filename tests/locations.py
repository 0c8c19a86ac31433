"""Where the tests find the repository: its root, this folder (the helper modules, which every process
a test starts finds on its PYTHONPATH), the example scripts and the benchmarks."""
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
EXAMPLES = ROOT / "scripts" / "examples"
BENCH = ROOT / "scripts" / "bench"
