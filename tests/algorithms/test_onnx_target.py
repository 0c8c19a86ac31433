"""DQN's target network in onnxruntime (``target_runtime="onnxruntime"``): the same updates as in
paddle, rebuilt whenever the target's weights are replaced (a sync, a checkpoint's restore), and clear
errors for what it cannot run."""
import pickle

import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite.algorithms import DDQN, DQN
from parl_lite.algorithms.onnx_target import OnnxTarget
from parl_lite.common.onnx_runtime import FixedWeightsModel
from parl_lite.io.onnx_export import OnnxExportError, forward_graph
from parl_lite.utils.models import CNNQNetwork, MLPQNetwork


def _batches(obs_shape, count, seed=0, dtype="float32"):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        if dtype == "uint8":
            obs, next_obs = (rng.integers(0, 255, (8, *obs_shape), dtype=np.uint8) for _ in range(2))
        else:
            obs, next_obs = (rng.normal(size=(8, *obs_shape)).astype("float32") for _ in range(2))
        yield (obs, rng.integers(0, 3, 8), rng.normal(size=8).astype("float32"), next_obs,
               (rng.random(8) < 0.2))


LR = 1e-3  # the learning rate of both runs of :func:`_pair`: about the largest move of one Adam step


def _pair(algorithm, model):
    """The same algorithm and weights, with the target network in paddle and in onnxruntime."""
    paddle.seed(0)
    in_paddle = algorithm(model, gamma=0.99, lr=LR, loss="huber", target_runtime="paddle")
    copy = type(model)(**model.constructor_args())
    copy.set_weights(model.get_weights())
    in_onnx = algorithm(copy, gamma=0.99, lr=LR, loss="huber", target_runtime="onnxruntime")
    return in_paddle, in_onnx


@pytest.mark.parametrize("algorithm", [DQN, DDQN])
@pytest.mark.parametrize("network", ["mlp", "cnn"])
def test_updates_equal_paddles_across_target_syncs(algorithm, network):
    model, obs_shape, dtype = ((MLPQNetwork(5, 3, 16), (5,), "float32") if network == "mlp"
                               else (CNNQNetwork((4, 36, 36), 3), (4, 36, 36), "uint8"))
    initial = {name: value.copy() for name, value in model.get_weights().items()}
    in_paddle, in_onnx = _pair(algorithm, model)
    for step, batch in enumerate(_batches(obs_shape, 6, dtype=dtype)):
        if step in (2, 4):  # the copy the target runs must follow each sync
            in_paddle.sync_target()
            in_onnx.sync_target()
        assert float(in_onnx.learn(*batch)) == pytest.approx(float(in_paddle.learn(*batch)), rel=1e-4, abs=1e-6)
    # Adam moves a weight by about lr * sign(gradient) where the gradient is near zero, so the two
    # runtimes' rounding (about 1e-7) can move such a weight by a part of one step: 1.7e-5 was the
    # worst of 20 runs (CI once failed a bound of 1e-5). A tenth of a step still tells a wrong target.
    for name, value in in_paddle.model.get_weights().items():
        assert np.abs(value - initial[name]).max() > LR / 2, f"{name} was not trained"
        np.testing.assert_allclose(in_onnx.model.get_weights()[name], value, rtol=1e-4, atol=LR / 10)


def test_target_follows_a_restored_checkpoint(tmp_path):
    """The onnxruntime copy is rebuilt after a restore replaces the target's weights (it kept the
    old target before ``Model.weights_version`` counted ``set_weights``)."""
    in_paddle, in_onnx = _pair(DQN, MLPQNetwork(5, 3, 16))
    batches = list(_batches((5,), 4, seed=1))
    in_onnx.learn(*batches[0])  # its onnxruntime session now holds the initial target
    other = DQN(MLPQNetwork(5, 3, 16), gamma=0.99, lr=1e-3, loss="huber")
    for batch in batches[:3]:
        other.learn(*batch)
    other.sync_target()
    path = tmp_path / "other.h5"
    parl_lite.Agent(other).save(path, with_optimizer=True)
    parl_lite.Agent(in_paddle).restore(path)
    parl_lite.Agent(in_onnx).restore(path)
    assert float(in_onnx.learn(*batches[3])) == pytest.approx(float(in_paddle.learn(*batches[3])), rel=1e-5)


def test_weights_version_counts_each_replacement():
    source, target = MLPQNetwork(5, 3, 16), MLPQNetwork(5, 3, 16)
    versions = [target.weights_version]
    source.sync_weights_to(target)
    versions.append(target.weights_version)
    source.sync_weights_to(target, decay=0.5)
    versions.append(target.weights_version)
    target.set_weights(source.get_weights())
    versions.append(target.weights_version)
    target.set_state_dict(source.state_dict())
    versions.append(target.weights_version)
    assert versions == [0, 1, 2, 3, 4]
    assert source.weights_version == 0  # reading a model's weights is no replacement


class CumulativeQ(parl_lite.Model):
    """A forward with an operator parl_lite's translation to ONNX does not know (cumsum)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(5, 3)

    def forward(self, obs):
        return paddle.cumsum(self.fc(obs), axis=-1)


def test_a_model_that_does_not_translate_is_named_with_the_way_out():
    algorithm = DQN(CumulativeQ(), gamma=0.99, lr=1e-3, target_runtime="onnxruntime")
    with pytest.raises(OnnxExportError, match=r"DQN\(target_runtime='onnxruntime'\).*CumulativeQ.*cumsum.*"
                                              r"target_runtime='paddle'"):
        algorithm.learn(*next(_batches((5,), 1)))


def test_onnx_target_pickles_without_its_session():
    model = MLPQNetwork(5, 3, 16)
    target = OnnxTarget(model, "DQN")
    obs = paddle.to_tensor(np.random.default_rng(0).normal(size=(4, 5)).astype("float32"))
    expected = target(obs).numpy()
    copy = pickle.loads(pickle.dumps(target))
    np.testing.assert_allclose(copy(obs).numpy(), expected, rtol=1e-5)


def test_fixed_weights_model_names_what_is_missing():
    model = MLPQNetwork(5, 3, 16)
    graph = FixedWeightsModel(forward_graph(model, paddle.static.InputSpec([None, 5], "float32")))
    obs = np.zeros((2, 5), "float32")
    with pytest.raises(RuntimeError, match="set_weights"):
        graph(obs)
    weights = model.get_weights()
    missing = sorted(weights)[0]
    del weights[missing]
    with pytest.raises(ValueError, match=missing.replace(".", r"\.")):
        graph.set_weights(weights)
    graph.set_weights(model.get_weights())
    with paddle.no_grad():
        np.testing.assert_allclose(graph(obs)[0], model(paddle.to_tensor(obs)).numpy(), rtol=1e-5, atol=1e-6)


def test_onnx_target_refuses_observations_unlike_those_it_was_traced_for():
    target = OnnxTarget(MLPQNetwork(5, 3, 16), "DQN")
    target(paddle.zeros([2, 5], "float32"))
    with pytest.raises(ValueError, match=r"traced for observations \[5\] of .*float32.*given \[5\] of .*float64"):
        target(paddle.zeros([2, 5], "float64"))
    with pytest.raises(ValueError, match=r"given \[6\]"):
        target(paddle.zeros([2, 6], "float32"))
