"""Rollout actors that run the policy in onnxruntime: the graph computes the model's policy, the
draws are recorded as the paddle actor records them, the actor's process never imports paddle,
and a model whose policy has no ONNX translation gets paddle actors instead."""
import logging

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import parl_lite
from parl_lite.core.distributions import policy_distribution
from parl_lite.io.onnx_export import policy_graph
from parl_lite.train.remote_rollouts import RolloutActors
from parl_lite.utils.models import CNNActorCritic, MLPActorCritic
from parl_lite.utils.rollout import OnnxRolloutWorker

from remote_actors import PaddleProbe

pytestmark = pytest.mark.timeout(180)


def _graph(model, shape, dtype="float32"):
    return policy_graph(model, paddle.static.InputSpec([None, *shape], dtype, "obs"))


@pytest.mark.parametrize("continuous", [False, True])
def test_the_onnx_actor_records_what_the_paddle_policy_gives(continuous):
    paddle.seed(0)
    model = MLPActorCritic(3 if continuous else 4, 2, 16, continuous=continuous, normalize_obs=True)
    model.obs_normalizer.update(np.random.default_rng(1).normal(2.0, 3.0, (50, model.obs_normalizer.mean.shape[0])))
    env = "Pendulum-v1" if continuous else "CartPole-v1"
    worker = OnnxRolloutWorker(_graph(model, [3 if continuous else 4]), env, num_envs=3, seed=5)
    rollout = worker.collect(model.get_weights(), steps=6)
    worker.rollout.close()
    obs = rollout["obs"].reshape(18, -1).astype(np.float32)
    actions = rollout["actions"].reshape(18, *rollout["actions"].shape[2:])
    with paddle.no_grad():
        dist = policy_distribution(model, paddle.to_tensor(obs))
        expected = dist.log_prob(paddle.to_tensor(actions)).numpy()
    np.testing.assert_allclose(rollout["log_probs"].reshape(-1), expected, rtol=1e-4, atol=1e-5)
    if not continuous:
        np.testing.assert_allclose(rollout["behaviour_logits"].reshape(18, -1), dist.logits.numpy(), atol=1e-5)
        assert set(np.unique(actions)) <= {0, 1}


def test_the_graph_takes_frames_as_bytes_and_the_named_weights():
    paddle.seed(0)
    model = CNNActorCritic((4, 42, 42), 6, torso="compact")
    graph = _graph(model, [4, 42, 42], "uint8")
    from parl_lite.common.onnx_runtime import WeightedModel

    runner = WeightedModel(graph)
    assert runner.obs_dtype == np.uint8 and set(runner.weight_names) <= set(model.get_weights())
    frames = np.random.default_rng(0).integers(0, 256, (5, 4, 42, 42), dtype=np.uint8)
    runner.set_weights(model.get_weights())
    with paddle.no_grad():
        np.testing.assert_allclose(runner(frames)[0], model.policy(paddle.to_tensor(frames)).numpy(), atol=1e-4)
    with pytest.raises(ValueError, match="takes weights .* that were not given"):
        runner.set_weights({})


def test_an_onnx_rollout_actor_never_imports_paddle():
    parl_lite.shutdown()
    parl_lite.connect(num_workers=1)
    try:
        probe = parl_lite.remote_class(PaddleProbe)(_graph(MLPActorCritic(4, 2, 8), [4]), "CartPole-v1", 2, 0)
        rollout = probe.collect(MLPActorCritic(4, 2, 8).get_weights(), 5)
        assert rollout["obs"].shape == (5, 2, 4) and probe.paddle_modules() == []
    finally:
        parl_lite.shutdown()


class GeluPolicy(parl_lite.Model):
    """A policy with an operator parl_lite's ONNX translation does not know (gelu)."""

    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 2)

    def policy(self, obs):
        return self.fc(F.gelu(obs))

    def value(self, obs):
        return self.fc(obs)[:, :1]


def test_a_policy_without_an_onnx_translation_gets_paddle_actors(caplog):
    with caplog.at_level(logging.INFO, logger="parl_lite.train"):
        maker = RolloutActors(GeluPolicy(), "CartPole-v1", 2, 0, None, model_fn=GeluPolicy, who="test")
    assert maker.graph is None and maker.model_fn is GeluPolicy
    assert any("the rollout actors run paddle" in record.getMessage() and "gelu" in record.getMessage()
               for record in caplog.records)
    assert RolloutActors(MLPActorCritic(4, 2, 8), "CartPole-v1", 2, 0, None).graph is not None
