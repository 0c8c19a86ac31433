"""Fixtures of the tests of the web monitor (parl_lite.ext.monitor)."""
import pytest
from devtools import Chromium
from monitor_helpers import CHROMIUM


@pytest.fixture
def browser():
    """A headless Chromium with a fresh profile (skipped where there is none, outside CI)."""
    if CHROMIUM is None:
        pytest.skip("no Chromium on PATH (apt-get install chromium)")
    with Chromium(CHROMIUM, width=1280, height=900) as chromium:
        yield chromium
