"""The cluster against strangers, token holders that send nonsense, stalls and killed clients
(issue 23): real masters and nodes started through ``parl-lite``, attackers as real sockets on
127.0.0.1, another local user played by ``nobody`` when the tests run as root."""
import math
import os
import subprocess
import sys

import pytest

import parl_lite

pytestmark = pytest.mark.timeout(180)


# --- minor: arguments and addresses that are wrong ---------------------------------------------
@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, "abc", True])
def test_placement_timeout_must_be_a_number_of_seconds(bad, monkeypatch):
    monkeypatch.setenv("PARL_LITE_TOKEN", "unused")
    parl_lite.shutdown()
    with pytest.raises((TypeError, ValueError), match=r"placement_timeout must be a .*number of seconds"):
        parl_lite.connect("127.0.0.1:1", placement_timeout=bad)


def test_es_train_with_nothing_listening_names_the_address(tmp_path):
    result = subprocess.run([sys.executable, "-m", "parl_lite.cli", "es-train", "--address", "127.0.0.1:1",
                             "--set", f"train.log_dir={tmp_path}", "--set", f"train.checkpoint_dir={tmp_path}/ck"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={**os.environ, "PARL_LITE_TOKEN": "unused"})
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert "cannot reach the parl_lite cluster at 127.0.0.1:1" in result.stderr
