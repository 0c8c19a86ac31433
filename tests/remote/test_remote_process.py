"""The pool seen from other processes: a user's script, ``parl-lite status``, a killed caller."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from parl_lite.remote.status import find_pools, read_status
from remote_helpers import assert_nothing_left, wait_for_exit

pytestmark = pytest.mark.timeout(90)

# The issue's example, at module level with no __main__ guard, as users write it.
USER_SCRIPT = textwrap.dedent("""
    import json, sys, threading
    import numpy as np
    import parl_lite
    from parl_lite import remote_class

    @remote_class
    class Actor:
        def __init__(self, scale): self.scale = scale
        def run(self, n):
            s = 0
            for i in range(n): s += i
            return s
        def mul(self, x): return x * self.scale

    parl_lite.connect()
    actors = [Actor(2) for _ in range(5)]
    threads = [threading.Thread(target=a.run, args=(10**5,)) for a in actors]
    for t in threads: t.start()
    for t in threads: t.join()
    y = actors[0].mul(np.ones(16 * 2**20, np.float32))
    assert float(y.sum()) == 2 * 16 * 2**20
    assert actors[0].scale == 2
    actors[0].scale = 3
    assert actors[0].scale == 3
    backend = parl_lite.connect()
    status = backend.status()
    print(json.dumps({"prefix": backend.session_prefix, "zygote": status["zygote_pid"],
                      "workers": [w["pid"] for w in status["workers"]]}), flush=True)
    if sys.argv[1] == "wait":
        sys.stdin.readline()
    parl_lite.shutdown()
    print("clean exit", flush=True)
""")


def _start(tmp_path, mode: str) -> subprocess.Popen:
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    return subprocess.Popen([sys.executable, str(script), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=tmp_path)


def test_the_issue_example_as_a_script_without_main_guard(tmp_path):
    process = _start(tmp_path, "exit")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    info = json.loads(out.splitlines()[0])
    assert out.splitlines()[-1] == "clean exit"
    assert_nothing_left(info["workers"] + [info["zygote"]], info["prefix"])


def test_status_is_readable_from_other_processes_and_survives_them(tmp_path):
    process = _start(tmp_path, "wait")
    try:
        info = json.loads(process.stdout.readline())
        assert process.pid in find_pools()
        deadline = time.monotonic() + 10
        # 5 constructors, 5 runs, then on actors[0]: mul, two attribute reads and one write
        expected_calls = 5 + 5 + 4
        while True:  # the pool republishes twice a second: wait until it has published them all
            command = [sys.executable, "-m", "parl_lite.cli", "status", "--pid", str(process.pid), "--json"]
            pools = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)["pools"]
            actors = [w for w in pools[0]["workers"] if w["actor"] == "Actor"]
            served = sum(w["calls_served"] for w in actors)
            if served >= expected_calls or time.monotonic() > deadline:
                break
        assert len(actors) == 5
        assert served == expected_calls
        assert all(w["rss_mb"] > 0 for w in actors)
        table = subprocess.run([sys.executable, "-m", "parl_lite.cli", "status"], capture_output=True,
                               text=True, check=True).stdout
        assert f"pool of process {process.pid}" in table and "Actor" in table
        # a reader that exited did not take the segment with it
        assert read_status(process.pid)["pid"] == process.pid
    finally:
        process.stdin.write("\n")
        process.stdin.flush()
        out, _ = process.communicate(timeout=30)
    assert out.splitlines()[-1] == "clean exit"
    assert process.pid not in find_pools()
    assert_nothing_left(info["workers"] + [info["zygote"]], info["prefix"])


def test_killing_the_caller_takes_the_pool_down(tmp_path):
    process = _start(tmp_path, "wait")
    try:
        info = json.loads(process.stdout.readline())
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        assert_nothing_left(info["workers"] + [info["zygote"]], info["prefix"])
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stdin.close()


def test_status_command_without_pools_and_with_a_wrong_pid():
    result = subprocess.run([sys.executable, "-m", "parl_lite.cli", "status", "--pid", "999999999"],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "no parl_lite pool runs in process 999999999" in result.stderr
