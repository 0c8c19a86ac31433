"""Shared RL math and logging: distributions, GAE, V-trace, schedulers, the summary writer."""
import csv
import math
import struct

import numpy as np
import paddle
import pytest

from parl_lite.algorithms.vtrace import vtrace
from parl_lite.utils import summary
from parl_lite.core.distributions import Categorical, DiagGaussian, make_distribution
from parl_lite.utils.gae import gae
from parl_lite.utils.returns import discounted_returns
from parl_lite.utils.scheduler import LinearDecayScheduler, PiecewiseScheduler


# ---------------------------------------------------------------- distributions
def _np_log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_categorical_matches_numpy():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, -3.0]], "float32")
    other = np.array([[0.3, -1.0, 2.0], [1.0, 1.0, 1.0]], "float32")
    actions = np.array([1, 2])
    dist, other_dist = Categorical(paddle.to_tensor(logits)), Categorical(paddle.to_tensor(other))
    logp, logq = _np_log_softmax(logits.astype(np.float64)), _np_log_softmax(other.astype(np.float64))
    np.testing.assert_allclose(dist.log_prob(paddle.to_tensor(actions)).numpy(), logp[[0, 1], actions], rtol=1e-5)
    np.testing.assert_allclose(dist.entropy().numpy(), -(np.exp(logp) * logp).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(dist.kl(other_dist).numpy(), (np.exp(logp) * (logp - logq)).sum(-1), rtol=1e-5)
    np.testing.assert_array_equal(dist.mode().numpy(), [1, 0])
    assert abs(float(dist.kl(dist).sum())) < 1e-6


def test_categorical_sample_frequencies_and_seeding():
    probs = np.array([0.1, 0.6, 0.3], "float32")
    dist = Categorical(paddle.to_tensor(np.log(np.tile(probs, (20000, 1)))))
    paddle.seed(7)
    first = dist.sample().numpy()
    paddle.seed(7)
    np.testing.assert_array_equal(first, dist.sample().numpy())
    np.testing.assert_allclose(np.bincount(first, minlength=3) / len(first), probs, atol=0.015)


def test_gaussian_matches_closed_forms_and_monte_carlo():
    mean = np.array([[0.5, -1.0], [2.0, 0.0]], "float32")
    log_std = np.array([-0.5, 0.3], "float32")
    actions = np.array([[0.0, 0.0], [1.0, 1.0]], "float32")
    dist = DiagGaussian(paddle.to_tensor(mean), paddle.to_tensor(log_std))
    std = np.exp(log_std.astype(np.float64))
    density = np.prod(np.exp(-((actions - mean) ** 2) / (2 * std**2)) / (np.sqrt(2 * np.pi) * std), axis=-1)
    np.testing.assert_allclose(dist.log_prob(paddle.to_tensor(actions)).numpy(), np.log(density), rtol=1e-5)
    # entropy and KL against Monte-Carlo estimates from the distribution's own samples
    other = DiagGaussian(paddle.to_tensor(mean + 0.5), paddle.to_tensor(log_std - 0.2))
    big_mean = paddle.to_tensor(np.repeat(mean[:1], 200_000, axis=0))
    big, big_other = DiagGaussian(big_mean, paddle.to_tensor(log_std)), DiagGaussian(big_mean + 0.5, paddle.to_tensor(log_std - 0.2))
    paddle.seed(0)
    samples = big.sample()
    np.testing.assert_allclose(samples.numpy().mean(0), mean[0], atol=0.01)
    np.testing.assert_allclose(samples.numpy().std(0), std, rtol=0.01)
    logp = big.log_prob(samples).numpy()
    np.testing.assert_allclose(-logp.mean(), dist.entropy().numpy()[0], atol=0.02)
    np.testing.assert_allclose((logp - big_other.log_prob(samples).numpy()).mean(), dist.kl(other).numpy()[0], atol=0.02)
    np.testing.assert_array_equal(dist.mode().numpy(), mean)


def test_gaussian_log_prob_has_gradients_for_mean_and_log_std():
    mean = paddle.to_tensor(np.zeros((3, 2), "float32"), stop_gradient=False)
    log_std = paddle.create_parameter([2], "float32", default_initializer=paddle.nn.initializer.Constant(0.0))
    DiagGaussian(mean, log_std).log_prob(paddle.ones([3, 2])).sum().backward()
    np.testing.assert_allclose(mean.grad.numpy(), np.ones((3, 2)), rtol=1e-6)  # d/dmu = (a - mu) / var
    np.testing.assert_allclose(log_std.grad.numpy(), [0.0, 0.0], atol=1e-6)    # 3 * (z^2 - 1) with z = 1


def test_make_distribution_picks_by_shape_and_rejects_others():
    assert isinstance(make_distribution(paddle.zeros([2, 3])), Categorical)
    gaussian = make_distribution((paddle.zeros([2, 3]), paddle.full([3], 2.0)))  # (mean, std): PARL's PPO's
    assert isinstance(gaussian, DiagGaussian)
    np.testing.assert_allclose(gaussian.std.numpy(), np.full((2, 3), 2.0), rtol=1e-6)
    with pytest.raises(TypeError, match="logits tensor or a \\(mean, std\\) pair"):
        make_distribution(np.zeros(3))
    with pytest.raises(TypeError, match="Categorical"):
        Categorical(paddle.zeros([1, 2])).kl(DiagGaussian(paddle.zeros([1, 2]), paddle.zeros([2])))


# ---------------------------------------------------------------- GAE
def test_gae_by_hand_termination_and_truncation():
    rewards, values = [1.0, 1.0, 1.0], [0.5, 0.4, 0.3]
    adv, ret = gae(rewards, values, [0.4, 0.3, 0.2], [0, 0, 1], [0, 0, 1], gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv, [1.84928, 1.374, 0.7], rtol=1e-6)
    np.testing.assert_allclose(ret, np.array([1.84928, 1.374, 0.7]) + values, rtol=1e-6)
    # truncated after step 1: bootstrap from the final observation's value (0.9) but cut the trace
    adv, _ = gae(rewards, values, [0.4, 0.9, 0.2], [0, 0, 0], [0, 1, 0], gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv, [1.8752, 1.41, 0.88], rtol=1e-6)


def test_gae_lambda_one_with_zero_values_is_the_discounted_return():
    rewards = np.random.default_rng(0).normal(size=(6, 2))
    zeros = np.zeros_like(rewards)
    ends = np.zeros_like(rewards)
    ends[-1] = 1
    adv, _ = gae(rewards, zeros, zeros, ends, ends, gamma=0.95, lam=1.0)
    for env in range(2):
        np.testing.assert_allclose(adv[:, env], discounted_returns(rewards[:, env], 0.95), rtol=1e-5)


def test_gae_rejects_bad_arguments():
    with pytest.raises(ValueError, match="lam"):
        gae([1.0], [0.0], [0.0], [0], [0], gamma=0.9, lam=1.5)
    with pytest.raises(ValueError, match="shapes differ"):
        gae([1.0, 2.0], [0.0], [0.0], [0], [0], gamma=0.9, lam=0.9)


# ---------------------------------------------------------------- V-trace
def _vtrace_from_definition(mu_logp, pi_logp, rewards, discounts, values, bootstrap, rho_bar, c_bar):
    """The paper's sum, term by term (O(T^2)), for one column."""
    T = len(rewards)
    ratio = np.exp(pi_logp - mu_logp)
    rho, c = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio)
    v_next = np.append(values[1:], bootstrap)
    vs = np.zeros(T)
    for s in range(T):
        total, weight = values[s], 1.0  # weight = (prod_{i<t} gamma_i) * (prod_{i<t} c_i)
        for t in range(s, T):
            total += weight * rho[t] * (rewards[t] + discounts[t] * v_next[t] - values[t])
            weight *= discounts[t] * c[t]
        vs[s] = total
    return vs


def test_vtrace_by_hand():
    out = vtrace(
        behaviour_log_probs=[[0.0], [0.0]], target_log_probs=[[np.log(2.0)], [np.log(0.5)]],
        rewards=[[1.0], [1.0]], discounts=[[0.5], [0.5]], values=[[1.0], [2.0]], bootstrap_value=[3.0])
    np.testing.assert_allclose(out.vs[:, 0], [2.125, 2.25], rtol=1e-6)
    np.testing.assert_allclose(out.pg_advantages[:, 0], [1.125, 0.25], rtol=1e-6)


def _trajectories(seed, T, B, log_prob_std):
    """Random ``(mu, pi, rewards, values, bootstrap, discounts)`` of ``B`` trajectories of ``T`` steps,
    about a fifth of the steps terminal."""
    rng = np.random.default_rng(seed)
    mu, pi = rng.normal(-1, log_prob_std, (T, B)), rng.normal(-1, log_prob_std, (T, B))
    rewards, values, bootstrap = rng.normal(size=(T, B)), rng.normal(size=(T, B)), rng.normal(size=B)
    return mu, pi, rewards, values, bootstrap, np.where(rng.random((T, B)) < 0.2, 0.0, 0.9)


@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (2.0, 0.5), (100.0, 100.0)])
def test_vtrace_matches_the_papers_definition(rho_bar, c_bar):
    B = 4
    mu, pi, rewards, values, bootstrap, discounts = _trajectories(3, 7, B, 0.5)
    out = vtrace(mu, pi, rewards, discounts, values, bootstrap, clip_rho_threshold=rho_bar,
                 clip_pg_rho_threshold=rho_bar, clip_c_threshold=c_bar)
    for b in range(B):
        expected = _vtrace_from_definition(mu[:, b], pi[:, b], rewards[:, b], discounts[:, b], values[:, b],
                                           bootstrap[b], rho_bar, c_bar)
        np.testing.assert_allclose(out.vs[:, b], expected, rtol=1e-5, atol=1e-5)
        next_vs = np.append(out.vs[1:, b], bootstrap[b])
        rho_pg = np.minimum(rho_bar, np.exp(pi[:, b] - mu[:, b]))
        np.testing.assert_allclose(out.pg_advantages[:, b],
                                   rho_pg * (rewards[:, b] + discounts[:, b] * next_vs - values[:, b]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rho_bar,pg_rho_bar", [(3.7, 2.2), (None, None)])
def test_from_importance_weights_is_parls_vtrace_on_tensors(rho_bar, pg_rho_bar):
    """PARL's entry point: paddle tensors in and out, c_bar fixed at 1, None turns a clip off."""
    from parl_lite.algorithms.vtrace import from_importance_weights

    T, B = 6, 3
    mu, pi, rewards, values, bootstrap, discounts = _trajectories(5, T, B, 0.8)
    tensor = lambda x: paddle.to_tensor(x.astype("float32"))  # noqa: E731
    out = from_importance_weights(tensor(mu), tensor(pi), tensor(discounts), tensor(rewards), tensor(values),
                                  tensor(bootstrap), clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar)
    assert isinstance(out.vs, paddle.Tensor) and out.vs.shape == [T, B] and out.vs.stop_gradient
    for b in range(B):
        expected = _vtrace_from_definition(mu[:, b], pi[:, b], rewards[:, b], discounts[:, b], values[:, b],
                                           bootstrap[b], rho_bar if rho_bar else np.inf, 1.0)
        np.testing.assert_allclose(out.vs.numpy()[:, b], expected, rtol=1e-4, atol=1e-4)
        next_vs = np.append(expected[1:], bootstrap[b])
        ratio = np.exp(pi[:, b] - mu[:, b])
        rho_pg = ratio if pg_rho_bar is None else np.minimum(pg_rho_bar, ratio)
        np.testing.assert_allclose(out.pg_advantages.numpy()[:, b],
                                   rho_pg * (rewards[:, b] + discounts[:, b] * next_vs - values[:, b]), rtol=1e-4,
                                   atol=1e-4)


def test_vtrace_on_policy_is_the_n_step_return():
    rng = np.random.default_rng(4)
    logp, rewards, values = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    discounts = np.full((5, 3), 0.9)
    bootstrap = rng.normal(size=3)
    out = vtrace(logp, logp, rewards, discounts, values, bootstrap)
    next_values = np.concatenate([values[1:], bootstrap[None]])
    _, returns = gae(rewards, values, next_values, np.zeros((5, 3)), np.zeros((5, 3)), gamma=0.9, lam=1.0)
    np.testing.assert_allclose(out.vs, returns, rtol=1e-5, atol=1e-5)


def test_vtrace_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="bootstrap_value"):
        vtrace(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="must all be"):
        vtrace(np.zeros((3, 2)), np.zeros((3, 1)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(2))


# ---------------------------------------------------------------- schedulers
def test_linear_decay_scheduler():
    scheduler = LinearDecayScheduler(1.0, max_steps=100, end_value=0.1)
    assert scheduler.value == 1.0
    assert scheduler.step(50) == pytest.approx(0.55)
    assert scheduler.step(100) == pytest.approx(0.1)
    assert scheduler.value_at(25) == pytest.approx(0.775)
    with pytest.raises(ValueError, match="max_steps"):
        LinearDecayScheduler(1.0, 0)


def test_piecewise_scheduler():
    scheduler = PiecewiseScheduler([(0, 1e-3), (10, 5e-4), (20, 1e-4)])
    assert scheduler.value == 1e-3
    assert scheduler.step(9) == 1e-3
    assert scheduler.step(1) == 5e-4
    assert scheduler.step(100) == 1e-4
    late_start = PiecewiseScheduler([(5, 1.0), (8, 2.0)])  # PARL's: the first value before its step
    assert [late_start.step() for _ in range(8)] == [1.0] * 7 + [2.0]
    with pytest.raises(ValueError, match="empty"):
        PiecewiseScheduler([])
    with pytest.raises(ValueError, match="increase strictly"):
        PiecewiseScheduler([(0, 1.0), (10, 2.0), (10, 3.0)])


# ---------------------------------------------------------------- summary
def _read_events(path):
    """Parse a TFRecord event file: [uint64 length][uint32 crc][data][uint32 crc] per record."""
    from tensorboardX.proto import event_pb2

    events, data = [], path.read_bytes()
    offset = 0
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset:offset + 8])
        offset += 12
        events.append(event_pb2.Event.FromString(data[offset:offset + length]))
        offset += length + 4
    assert offset == len(data)
    return events


def test_summary_writes_readable_event_file_and_csv(tmp_path):
    values = np.random.default_rng(0).normal(size=1000)
    with summary.SummaryWriter(tmp_path / "run") as writer:
        for step in range(3):
            writer.add_scalar("train/return", 10.0 * step + 0.5, step)
        writer.add_histogram("weights", values, global_step=2)
    (event_file,) = (tmp_path / "run").glob("events.out.tfevents.*")
    events = _read_events(event_file)
    scalars = [(e.step, v.tag, v.simple_value) for e in events for v in e.summary.value if v.HasField("simple_value")]
    assert scalars == [(0, "train/return", 0.5), (1, "train/return", 10.5), (2, "train/return", 20.5)]
    (histo,) = [v.histo for e in events for v in e.summary.value if v.HasField("histo")]
    assert histo.num == 1000 and math.isclose(histo.sum, values.sum(), rel_tol=1e-9)
    assert histo.min == values.min() and histo.max == values.max()
    with open(tmp_path / "run" / "scalars.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["step"]), r["tag"], float(r["value"])) for r in rows] == [(s, t, v) for s, t, v in scalars]


def test_summary_module_functions_use_set_logdir(tmp_path):
    summary.set_logdir(tmp_path / "module")
    try:
        summary.add_scalar("loss", 1.25, global_step=7)
        summary.flush()
        assert summary.get_logdir() == tmp_path / "module"
        with open(tmp_path / "module" / "scalars.csv") as f:
            assert list(csv.reader(f))[1][1:] == ["7", "loss", "1.25"]
    finally:
        summary.close()
    with pytest.raises(ValueError, match="empty"):
        with summary.SummaryWriter(tmp_path / "x") as writer:
            writer.add_histogram("h", [], global_step=0)


# ---------------------------------------------------------------- rollouts
def test_vector_rollout_time_major_batches_and_episode_bookkeeping():
    from parl_lite.utils.rollout import VectorRollout

    rollout = VectorRollout("CartPole-v1", num_envs=3, seed=0)
    rng = np.random.default_rng(0)
    policy = lambda obs: (rng.integers(0, 2, len(obs)), {"log_probs": np.full(len(obs), np.log(0.5), "float32")})
    first = rollout.collect(policy, 40)
    second = rollout.collect(policy, 40)
    assert first["obs"].shape == (40, 3, 4) and first["actions"].shape == (40, 3) and rollout.steps == 240
    assert first["log_probs"].shape == (40, 3)  # what the policy recorded, stacked
    for batch in (first, second):
        ends = batch["ends"]
        assert ends.any() and not (batch["terminated"] & ~ends).any()
        # within an episode the next observation is the following step's observation
        continuing = ~ends[:-1]
        np.testing.assert_array_equal(batch["next_obs"][:-1][continuing], batch["obs"][1:][continuing])
        # at an end the stored next observation is the final one, not the reset one
        assert not np.array_equal(batch["next_obs"][:-1][ends[:-1]], batch["obs"][1:][ends[:-1]])
    # the rollout continues across calls: the second batch starts where the first stopped
    np.testing.assert_array_equal(second["obs"][0][~first["ends"][-1]], first["next_obs"][-1][~first["ends"][-1]])
    # CartPole pays 1 per step: the finished episodes' returns are their lengths
    assert len(first["episode_returns"]) == first["ends"].sum()
    assert first["episode_returns"].sum() <= first["rewards"].sum()
