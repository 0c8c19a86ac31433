"""parl_lite.Model: sync, get/set weights, stable names, deepcopy, parameter reuse, shared models."""
import copy

import numpy as np
import paddle
import pytest

import parl_lite
from core_models import CartpoleModel, NormModel, SharedActorCritic


def _run_bn_in_training(model: NormModel, seed: int) -> None:
    model.train()
    model(paddle.to_tensor(np.random.default_rng(seed).standard_normal((8, 3)).astype("float32")))


def test_sync_copies_with_zero_decay():
    source, target = CartpoleModel(), CartpoleModel()
    source.sync_weights_to(target)
    for name, value in source.get_weights().items():
        np.testing.assert_array_equal(target.get_weights()[name], value)


def test_sync_blends_parameters_and_copies_batchnorm_buffers_by_hand():
    source, target = NormModel(), NormModel()
    _run_bn_in_training(source, 1)  # moves source's running statistics away from the defaults
    before_source, before_target = source.get_weights(), target.get_weights()
    assert not np.allclose(before_source["bn._mean"], before_target["bn._mean"])
    source.sync_weights_to(target, decay=0.9)
    after = target.get_weights()
    assert set(after) == {"fc.weight", "fc.bias", "bn.weight", "bn.bias", "bn._mean", "bn._variance"}
    for name in after:
        expected = before_source[name] if name in ("bn._mean", "bn._variance") else \
            0.9 * before_target[name] + 0.1 * before_source[name]
        np.testing.assert_allclose(after[name], expected, rtol=1e-6, atol=1e-7, err_msg=name)
    np.testing.assert_array_equal(source.get_weights()["fc.weight"], before_source["fc.weight"])


def test_sync_to_other_architecture_names_first_mismatch():
    with pytest.raises(ValueError, match="fc1.weight"):
        CartpoleModel(4, 2).sync_weights_to(CartpoleModel(5, 2))
    with pytest.raises(ValueError, match="no parameter 'fc1.weight'"):
        CartpoleModel().sync_weights_to(SharedActorCritic())


@pytest.mark.parametrize("decay", [-0.1, 1.5])
def test_sync_rejects_decay_out_of_range(decay):
    with pytest.raises(ValueError, match="decay"):
        CartpoleModel().sync_weights_to(CartpoleModel(), decay=decay)


def test_get_weights_returns_copies():
    model = CartpoleModel()
    weights = model.get_weights()
    weights["fc1.weight"][:] = 123.0
    assert not np.any(model.get_weights()["fc1.weight"] == 123.0)


def test_set_weights_round_trip():
    source, target = CartpoleModel(), CartpoleModel()
    target.set_weights(source.get_weights())
    obs = paddle.ones([2, 4])
    np.testing.assert_array_equal(source(obs).numpy(), target(obs).numpy())


def test_set_weights_names_every_offending_parameter_and_changes_nothing():
    model = CartpoleModel()
    original = model.get_weights()
    bad = dict(original)
    del bad["fc1.bias"]
    bad["fc9.weight"] = np.zeros(3, "float32")
    bad["fc2.weight"] = np.zeros((3, 3), "float32")
    bad["fc2.bias"] = original["fc2.bias"].astype("float64")
    with pytest.raises(ValueError) as info:
        model.set_weights(bad)
    message = str(info.value)
    for name in ("fc1.bias", "fc9.weight", "fc2.weight", "fc2.bias"):
        assert name in message
    for name, value in model.get_weights().items():
        np.testing.assert_array_equal(value, original[name])


def test_names_are_stable_across_instances_and_deepcopy():
    first, second = CartpoleModel(), CartpoleModel()
    clone = copy.deepcopy(first)
    names = [name for name, _ in first.named_parameters()]
    assert names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert names == [name for name, _ in second.named_parameters()]
    assert names == [name for name, _ in clone.named_parameters()]


def test_deepcopy_gives_independent_parameters():
    model = CartpoleModel()
    clone = copy.deepcopy(model)
    for (_, original), (_, copied) in zip(model.named_parameters(), clone.named_parameters()):
        np.testing.assert_array_equal(original.numpy(), copied.numpy())
    with paddle.no_grad():
        model.fc1.weight.set_value(np.full([4, 20], 7.0, "float32"))
    assert not np.any(clone.get_weights()["fc1.weight"] == 7.0)


def test_layer_called_twice_reuses_its_parameters():
    class Twice(parl_lite.Model):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(paddle.tanh(self.fc(x)))

    model = Twice()
    assert len(model.parameters()) == 2
    model(paddle.ones([1, 3])).sum().backward()
    manual = paddle.ones([1, 3])
    weight, bias = model.fc.weight.detach(), model.fc.bias.detach()
    expected = paddle.matmul(paddle.tanh(paddle.matmul(manual, weight) + bias), weight) + bias
    np.testing.assert_allclose(model(manual).numpy(), expected.numpy(), rtol=1e-6)
    assert model.fc.weight.grad is not None


def test_shared_model_covers_every_head():
    source, target = SharedActorCritic(), SharedActorCritic()
    obs = paddle.to_tensor(np.random.default_rng(0).standard_normal((3, 4)).astype("float32"))
    assert set(source.get_weights()) == {
        "trunk.weight", "trunk.bias", "policy_head.weight", "policy_head.bias",
        "value_head.weight", "value_head.bias"}
    source.sync_weights_to(target)
    np.testing.assert_array_equal(source.policy(obs).numpy(), target.policy(obs).numpy())
    np.testing.assert_array_equal(source.value(obs).numpy(), target.value(obs).numpy())
    fresh = SharedActorCritic()
    fresh.set_weights(source.get_weights())
    np.testing.assert_array_equal(source.value(obs).numpy(), fresh.value(obs).numpy())
