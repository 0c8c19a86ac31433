"""PolicyGradient: returns, one update on fixed inputs, and the QuickStart script end to end."""
import json
import subprocess
import sys

import numpy as np
import paddle
import pytest

import parl_lite
from core_models import fixed_batch, make_agent
from parl_lite.utils.returns import discounted_returns
from locations import EXAMPLES

SCRIPT = EXAMPLES / "quickstart_pg_cartpole.py"


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


def test_predict_gives_the_probabilities_as_parls():
    agent = make_agent(0)
    obs = fixed_batch()[0]
    probs = agent.alg.predict(obs)
    assert probs.shape == (16, 2)
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-6)
    with paddle.no_grad():
        np.testing.assert_array_equal(probs, agent.alg.model(paddle.to_tensor(obs)).numpy())
    one = agent.alg.predict(paddle.to_tensor(obs[0]))  # PARL's QuickStart agent: one observation, a tensor
    assert isinstance(one, paddle.Tensor) and one.shape == [2]
    np.testing.assert_array_equal(parl_lite.Agent(agent.alg).predict(obs), probs.argmax(axis=-1))


def test_sample_actions_draws_valid_actions_with_their_log_probabilities():
    agent = make_agent(0)
    obs = fixed_batch()[0]
    actions, log_probs = agent.alg.sample_actions(paddle.to_tensor(obs))
    actions, log_probs = actions.numpy(), log_probs.numpy()
    assert actions.shape == log_probs.shape == (16,) and set(actions.tolist()) <= {0, 1}
    probs = agent.alg.predict(obs)
    np.testing.assert_allclose(log_probs, np.log(probs[np.arange(16), actions]), rtol=1e-6)


@pytest.mark.parametrize("shape", [(8,), (8, 1)])
def test_learn_takes_actions_and_returns_as_rows_or_columns(shape):
    """PARL's QuickStart agent passes int32 ``[N, 1]`` columns; our loop ``[N]`` int64 rows."""
    obs, action, returns = fixed_batch(size=8)
    losses = []
    for dtype in ("int32", "int64"):
        agent = make_agent(0)
        losses.append(float(agent.alg.learn(paddle.to_tensor(obs), paddle.to_tensor(action.reshape(shape), dtype),
                                             paddle.to_tensor(returns.reshape(shape)))))
    probs = make_agent(0).alg.predict(obs)
    expected = -(np.log(probs[np.arange(8), action]) * returns).mean()
    np.testing.assert_allclose(losses, [expected, expected], rtol=1e-5)


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
