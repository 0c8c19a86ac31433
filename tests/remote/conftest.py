"""Fixtures of the tests of parl_lite.remote."""
import pytest
from backends import local_backend


@pytest.fixture
def local_pool(tmp_path):
    """A fresh local pool of 2 workers, for the tests of the pool's own parts; afterwards no worker,
    zygote or shared-memory segment of it may be left."""
    with local_backend(tmp_path) as backend:
        yield backend
