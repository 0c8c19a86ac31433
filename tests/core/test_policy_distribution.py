"""PARL's policy distributions (``parl_lite.core.paddle.policy_distribution``): PARL's names,
constructors and ``logp``, checked against numpy."""
import math

import numpy as np
import paddle
import pytest

from parl_lite.core.paddle.policy_distribution import (CategoricalDistribution, DiagGaussianDistribution,
                                                       PolicyDistribution, SoftCategoricalDistribution,
                                                       SoftMultiCategoricalDistribution)


def _tensor(values):
    return paddle.to_tensor(np.asarray(values, dtype="float32"))


def test_categorical_logp_entropy_kl_and_sample_against_numpy():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, -3.0]])
    other = np.array([[0.3, -1.0, 2.0], [1.0, 1.0, 1.0]])
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    other_probs = np.exp(other) / np.exp(other).sum(-1, keepdims=True)
    dist = CategoricalDistribution(_tensor(logits))
    assert isinstance(dist, PolicyDistribution)
    actions = paddle.to_tensor([1, 2])
    np.testing.assert_allclose(dist.logp(actions).numpy(), np.log(probs[[0, 1], [1, 2]] + 1e-6), rtol=1e-5)
    np.testing.assert_allclose(dist.logp(actions, eps=0.0).numpy(), np.log(probs[[0, 1], [1, 2]]), rtol=1e-5)
    np.testing.assert_allclose(dist.entropy().numpy(), -(probs * np.log(probs)).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(dist.kl(CategoricalDistribution(_tensor(other))).numpy(),
                               (probs * np.log(probs / other_probs)).sum(-1), rtol=1e-5)
    certain = CategoricalDistribution(_tensor([[50.0, 0.0, 0.0]] * 4))
    assert certain.sample().shape == [4] and certain.sample().numpy().tolist() == [0, 0, 0, 0]


def test_soft_categorical_sample_is_a_relaxed_one_hot():
    dist = SoftCategoricalDistribution(_tensor([[0.0, 0.0], [30.0, 0.0]]))
    sample = dist.sample().numpy()
    assert sample.shape == (2, 2)
    np.testing.assert_allclose(sample.sum(-1), 1.0, rtol=1e-5)
    assert sample[1, 0] > 0.99  # a near-certain action stays near one-hot


def test_diag_gaussian_takes_mean_and_logstd_as_one_pair():
    mean, logstd = np.array([[0.5, -1.0], [2.0, 0.0]]), np.array([[0.0, -0.5], [0.3, 0.1]])
    dist = DiagGaussianDistribution((_tensor(mean), _tensor(logstd)))
    np.testing.assert_allclose(dist.logstd.numpy(), logstd, rtol=1e-6)
    np.testing.assert_allclose(dist.std.numpy(), np.exp(logstd), rtol=1e-6)
    np.testing.assert_allclose(dist.logp(_tensor(mean)).numpy(), (-logstd - 0.5 * math.log(2 * math.pi)).sum(-1),
                               rtol=1e-5)
    np.testing.assert_allclose(dist.entropy().numpy(), (logstd + 0.5 * math.log(2 * math.pi * math.e)).sum(-1),
                               rtol=1e-5)
    halved = DiagGaussianDistribution((_tensor(mean), _tensor(logstd - math.log(2.0))))
    np.testing.assert_allclose(halved.kl(dist).numpy(), [2 * (math.log(2) - 3 / 8)] * 2, rtol=1e-4)
    paddle.seed(12)
    noise = paddle.randn([2, 2])
    paddle.seed(12)
    np.testing.assert_allclose(dist.sample().numpy(), mean + np.exp(logstd) * noise.numpy(), rtol=1e-5)


def test_soft_multi_categorical_splits_its_logits_per_sub_action():
    logits = _tensor([[0.0, 40.0, 0.0, 0.0, 0.0], [40.0, 0.0, 0.0, 0.0, 40.0]])
    dist = SoftMultiCategoricalDistribution(logits, low=[0, 1], high=[1, 3])  # sub-actions of 2 and 3 values
    sample = dist.sample().numpy()
    assert sample.shape == (2, 5)
    np.testing.assert_allclose(sample[0, :2], [0.0, 1.0], atol=1e-3)  # a relaxed one-hot, offset by low 0
    np.testing.assert_allclose(sample[0, 2:], 1.0 + np.full(3, 1 / 3), atol=0.35)  # offset by low 1
    parts = [CategoricalDistribution(part) for part in paddle.split(logits, [2, 3], axis=-1)]
    np.testing.assert_allclose(dist.entropy().numpy(), sum(p.entropy().numpy() for p in parts), rtol=1e-5)
    np.testing.assert_allclose(dist.kl(dist).numpy(), [0.0, 0.0], atol=1e-6)


@pytest.mark.parametrize("make, message", [
    (lambda: CategoricalDistribution(paddle.zeros([2, 1, 3])), "logits must be a 2-D tensor"),
    (lambda: SoftCategoricalDistribution(paddle.zeros([3])), "logits must be a 2-D tensor"),
    (lambda: DiagGaussianDistribution(paddle.zeros([2, 3])), r"logits must be a \(mean, logstd\) pair"),
    (lambda: DiagGaussianDistribution((paddle.zeros([2, 3]), paddle.zeros([3]))), "logstd must be a 2-D tensor"),
])
def test_wrong_shapes_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()
