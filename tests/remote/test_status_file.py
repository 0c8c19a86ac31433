"""``parl-lite status`` against pool status files of this user that are not what a pool writes
(issue 23, item 11): it reports them and goes on, as the web monitor does."""
import json
import os
import secrets
import subprocess
import sys

import pytest

from parl_lite.remote.status import StatusError, process_start_time, read_status

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def live_pid():
    """A live process of this user that runs no pool: its status entry is whatever the test writes."""
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def _forge(pid: int, body: str) -> str:
    path = f"/dev/shm/parl_lite_status_{pid}_{secrets.token_hex(8)}"
    with open(path, "w") as entry:
        entry.write(body)
    return path


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("where", ["everywhere", "in a worker"])
def test_status_survives_deeply_nested_json(live_pid, where, tmp_path):
    if where == "everywhere":
        body = _deep(200_000)  # the JSON parser itself runs out of stack
    else:  # a pool's fields, and a worker entry that is no worker (nested, but within what JSON parses)
        body = json.dumps({"pid": live_pid, "started_at": 1.0, "process_start": process_start_time(live_pid),
                           "workers": ["WORKER"], "ended": []}).replace('"WORKER"', _deep(100))
    path = _forge(live_pid, body)
    alone = {**os.environ, "PARL_LITE_HOME": str(tmp_path / "home")}  # no cluster to ask
    try:
        with pytest.raises(StatusError, match=path):
            read_status(live_pid)
        for arguments in (["status"], ["status", "--json"]):
            result = subprocess.run([sys.executable, "-m", "parl_lite.cli", *arguments], capture_output=True,
                                    text=True, timeout=30, env=alone)
            assert "Traceback" not in result.stderr, result.stderr
            assert f"skipped pool {live_pid}" in result.stderr
        result = subprocess.run([sys.executable, "-m", "parl_lite.cli", "status", "--pid", str(live_pid)],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode != 0 and "Traceback" not in result.stderr and path in result.stderr
    finally:
        os.unlink(path)
