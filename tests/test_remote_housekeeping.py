"""What the local pool's housekeeping costs a cluster node: how often it publishes its status, and
how it finds an ended worker's segments."""
import os
import secrets

import pytest

from parl_lite.remote.backend import ActorOptions
from parl_lite.remote.pool import LocalPool
from parl_lite.remote.shm import SHM_DIR, remove_session_segments, session_segments
from parl_lite.remote.status import read_status

pytestmark = pytest.mark.timeout(60)


class Idle:
    def ping(self) -> int:
        return 1


@pytest.mark.parametrize("bad", [0, -1.0, "2", None, True, float("nan")])
def test_a_status_period_that_is_not_a_positive_number_of_seconds_is_named(bad):
    with pytest.raises(ValueError, match="status_period"):
        LocalPool(num_workers=0, status_period=bad)


def test_a_pool_publishes_its_status_at_its_status_period_not_at_each_creation():
    pool = LocalPool(num_workers=0, shm_reserve_bytes=0, status_period=3600)
    try:
        worker = pool.create_actor(Idle, (), {}, ActorOptions())
        assert worker.call_sync("ping", (), {}) == 1
        # the status of the pool's start, not yet the actor's: the next publication is an hour away
        assert read_status(os.getpid())["workers"] == []
    finally:
        pool.shutdown()


def test_session_segments_are_the_names_under_the_prefix_taken_literally():
    prefix = f"parl_lite_test_{secrets.token_hex(4)}_[w]*?_"
    ours = [prefix + "a", prefix + "b"]
    others = [prefix[:-3] + "x_c", prefix.replace("[w]*?_", "wxy_") + "e"]  # what the prefix would match as a pattern
    for name in ours + others:
        with open(os.path.join(SHM_DIR, name), "w"):
            pass
    try:
        assert sorted(session_segments(prefix)) == ours
        remove_session_segments(prefix)
        assert session_segments(prefix) == []
        assert all(os.path.exists(os.path.join(SHM_DIR, name)) for name in others)
    finally:
        for name in ours + others:
            try:
                os.unlink(os.path.join(SHM_DIR, name))
            except FileNotFoundError:
                pass
