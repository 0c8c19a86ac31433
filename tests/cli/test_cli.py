"""The parl-lite command line: the group itself."""
import subprocess
import sys

import parl_lite


def test_version_and_help():
    version = subprocess.run([sys.executable, "-m", "parl_lite.cli", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and parl_lite.__version__ in version.stdout
    help_text = subprocess.run([sys.executable, "-m", "parl_lite.cli", "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0 and "Usage" in help_text.stdout


def test_importing_parl_lite_does_not_import_paddle():
    code = "import sys, parl_lite; parl_lite.__version__; assert 'paddle' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
