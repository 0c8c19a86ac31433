"""parl_lite.Algorithm and parl_lite.Agent: modes, weights, type checks."""
import numpy as np
import paddle
import pytest

import parl_lite
from core_models import NormModel, make_agent


def test_agent_requires_an_algorithm():
    with pytest.raises(TypeError, match="parl_lite.Algorithm"):
        parl_lite.Agent(object())


def test_algorithm_requires_a_model():
    with pytest.raises(TypeError, match="parl_lite.Model"):
        parl_lite.Algorithm(paddle.nn.Linear(2, 2))


def test_base_methods_say_what_is_missing():
    agent = parl_lite.Agent(parl_lite.Algorithm(NormModel()))
    for method in ("learn", "predict", "sample"):
        with pytest.raises(NotImplementedError, match=method):
            getattr(agent, method)({})
        with pytest.raises(NotImplementedError, match=method):
            getattr(agent.alg, method)({})


def test_train_and_eval_switch_every_model():
    algorithm = parl_lite.Algorithm(NormModel())
    algorithm.target_model = NormModel()
    agent = parl_lite.Agent(algorithm)
    assert set(algorithm.models()) == {"model", "target_model"}
    agent.eval()
    assert not agent.training and not algorithm.model.training and not algorithm.target_model.training
    x = paddle.ones([4, 3])
    np.testing.assert_array_equal(algorithm.model(x).numpy(), algorithm.model(x).numpy())  # no dropout
    agent.train()
    assert agent.training and algorithm.model.training and algorithm.target_model.training


def test_agent_weights_pass_through_to_the_model():
    first, second = make_agent(0), make_agent(1)
    second.set_weights(first.get_weights())
    for name, value in first.get_weights().items():
        np.testing.assert_array_equal(second.alg.model.get_weights()[name], value)


def test_optimizers_are_discovered():
    assert list(make_agent(0).alg.optimizers()) == ["optimizer"]
