"""PolicyGradient: returns, one update on fixed inputs, and the QuickStart script end to end."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import paddle
import pytest

from core_models import fixed_batch, make_agent
from parl_lite.utils.returns import discounted_returns

SCRIPT = Path(__file__).parents[1] / "scripts" / "quickstart_pg_cartpole.py"


def test_discounted_returns_by_hand():
    np.testing.assert_allclose(discounted_returns([1.0, 1.0, 1.0], 0.5), [1.75, 1.5, 1.0])
    np.testing.assert_allclose(discounted_returns([1.0, 2.0], 1.0), [3.0, 2.0])
    normalized = discounted_returns([1.0, 2.0, 3.0, 4.0], 0.9, normalize=True)
    assert abs(normalized.mean()) < 1e-6 and abs(normalized.std() - 1.0) < 1e-4
    assert discounted_returns([], 0.9).shape == (0,)
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns([1.0], 1.5)


def test_learn_moves_probability_towards_rewarded_action():
    agent = make_agent(0, lr=0.05)
    obs = np.ones((8, 4), "float32")
    before = agent.predict(obs)[0, 1]
    for _ in range(5):
        loss = agent.learn(obs, np.ones(8, "int64"), np.ones(8, "float32"))
        assert np.isfinite(loss)
    assert agent.predict(obs)[0, 1] > before


def test_sample_draws_valid_actions():
    agent = make_agent(0)
    actions = agent.alg.sample(paddle.to_tensor(fixed_batch()[0])).numpy()
    assert actions.shape == (16,) and set(actions.tolist()) <= {0, 1}


def test_rejects_non_positive_learning_rate():
    with pytest.raises(ValueError, match="lr"):
        make_agent(0, lr=0.0)


@pytest.mark.timeout(240)
def test_quickstart_script_runs_and_saves(tmp_path):
    checkpoint = tmp_path / "pg.h5"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--total-steps", "2000", "--eval-every", "1000", "--target", "1e9",
         "--save", str(checkpoint)],
        capture_output=True, text=True, timeout=220)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["algo"] == "PolicyGradient" and summary["steps"] >= 2000 and summary["updates"] > 0
    agent = make_agent(0, model_cls=__import__("core_models").CartpoleModel)
    agent.restore(checkpoint)
