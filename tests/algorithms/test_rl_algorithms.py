"""DQN, PPO, A2C and IMPALA updates on tiny fixed inputs, checked against values computed by hand, with
PARL's constructors, argument names and return values."""
import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import parl_lite
from parl_lite.algorithms import A2C, DDQN, DQN, PPO
from parl_lite.algorithms.optimizers import RMSprop
from parl_lite.utils.models import MLPActorCritic


class LinearQ(parl_lite.Model):
    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(2, 2)

    def forward(self, obs):
        return self.fc(obs)


class Critic(parl_lite.Model):
    def __init__(self, obs_dim: int = 4) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(obs_dim, 16)
        self.fc2 = paddle.nn.Linear(16, 1)

    def forward(self, obs):
        return self.fc2(F.tanh(self.fc1(obs)))


class PolicyOnly(parl_lite.Model):
    def __init__(self, obs_dim: int = 4, act_dim: int = 2) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(obs_dim, act_dim)

    def forward(self, obs):
        return self.fc(obs)


def _weights(model):
    return {name: value.copy() for name, value in model.get_weights().items()}


def _moved(before, after):
    return any(not np.allclose(before[name], after[name]) for name in before)


def _set_linear_q(model, weight, bias):
    model.set_weights({"fc.weight": np.asarray(weight, "float32"), "fc.bias": np.asarray(bias, "float32")})


def _rollout_batch(n=32, obs_dim=4, continuous=False, seed=0):
    """A PPO minibatch under PARL's names."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, obs_dim)).astype("float32")
    actions = rng.normal(size=(n, 1)).astype("float32") if continuous else rng.integers(0, 2, n)
    return dict(batch_obs=obs, batch_action=actions, batch_value=rng.normal(size=n).astype("float32"),
                batch_return=rng.normal(size=n).astype("float32"),
                batch_logprob=rng.normal(-0.7, 0.1, n).astype("float32"),
                batch_adv=rng.normal(size=n).astype("float32"))


def _a2c_batch(n=32, seed=0):
    ppo = _rollout_batch(n, seed=seed)
    return dict(obs=ppo["batch_obs"], actions=ppo["batch_action"], advantages=ppo["batch_adv"],
                target_values=ppo["batch_return"])


# ---------------------------------------------------------------- DQN
def _dqn_batch():
    obs = np.array([[1.0, 0.0], [0.0, 1.0]], "float32")
    next_obs = np.array([[0.0, 1.0], [1.0, 1.0]], "float32")
    return (obs, np.array([0, 1]), np.array([1.0, 0.5], "float32"), next_obs, np.array([False, True]))


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("loss", ["mse", "huber"])
@pytest.mark.parametrize("target_runtime", ["paddle", "onnxruntime"])
def test_dqn_loss_matches_hand_computed_targets(double, loss, target_runtime):
    paddle.seed(0)
    algorithm = (DDQN if double else DQN)(LinearQ(), gamma=0.9, lr=1e-3, loss=loss, target_runtime=target_runtime)
    # online Q(s) = s @ W + b; target network differs so that double and vanilla targets differ
    _set_linear_q(algorithm.model, [[1.0, 2.0], [3.0, 0.0]], [0.0, 0.0])
    _set_linear_q(algorithm.target_model, [[0.5, 0.0], [0.0, 4.0]], [0.0, 0.0])
    # sample 0: Q(s0)=[1, 2], a=0 -> q=1; next s=[0,1]: online [3, 0] -> a*=0, target [0, 4]
    #   vanilla: 1 + 0.9 * max(0, 4) = 4.6; double: 1 + 0.9 * target[a*=0] = 1.0
    # sample 1: Q(s1)=[3, 0], a=1 -> q=0; terminal -> target 0.5
    q, targets = np.array([1.0, 0.0]), np.array([1.0 if double else 4.6, 0.5])
    diff = np.abs(q - targets)
    expected = (diff ** 2).mean() if loss == "mse" else np.where(diff < 1.0, 0.5 * diff**2, diff - 0.5).mean()
    target_before = _weights(algorithm.target_model)
    result = algorithm.learn(*_dqn_batch())
    assert isinstance(result, paddle.Tensor) and float(result) == pytest.approx(expected, rel=1e-6)
    assert not _moved(target_before, _weights(algorithm.target_model))  # learn never touches the target
    assert _moved({"fc.weight": np.array([[1.0, 2.0], [3.0, 0.0]])}, {"fc.weight": algorithm.model.get_weights()["fc.weight"]})


def test_dqn_predict_gives_q_values_and_greedy_actions_their_argmax():
    algorithm = DQN(LinearQ(), gamma=0.9, lr=1e-3)
    _set_linear_q(algorithm.model, [[1.0, 2.0], [3.0, 0.0]], [0.0, 0.0])
    obs = np.array([[1.0, 0.0], [0.0, 1.0]], "float32")
    np.testing.assert_allclose(algorithm.predict(obs), [[1.0, 2.0], [3.0, 0.0]])
    np.testing.assert_array_equal(parl_lite.Agent(algorithm).predict(obs), [1, 0])
    q_tensor = algorithm.predict(paddle.to_tensor(obs[0]))  # PARL's agents pass one observation as a tensor
    assert isinstance(q_tensor, paddle.Tensor) and int(q_tensor.argmax()) == 1


def test_dqn_sync_target_copies_and_blends():
    paddle.seed(0)
    algorithm = DDQN(LinearQ(), gamma=0.99, lr=1e-2)
    for _ in range(3):
        algorithm.learn(*_dqn_batch())
    online, target = _weights(algorithm.model), _weights(algorithm.target_model)
    assert _moved(online, target)
    algorithm.sync_target(decay=0.75)
    for name in online:
        np.testing.assert_allclose(algorithm.target_model.get_weights()[name], 0.75 * target[name] + 0.25 * online[name], rtol=1e-6)
    algorithm.sync_target()
    for name in online:
        np.testing.assert_array_equal(algorithm.target_model.get_weights()[name], online[name])


def test_dqn_rejects_bad_hyperparameters():
    with pytest.raises(ValueError, match="gamma"):
        DQN(LinearQ(), gamma=1.5, lr=1e-3)
    with pytest.raises(ValueError, match="lr"):
        DQN(LinearQ(), gamma=0.9, lr=0.0)
    with pytest.raises(ValueError, match="gamma"):
        DQN(LinearQ(), gamma=None, lr=1e-3)  # PARL's default, which PARL itself refuses
    with pytest.raises(ValueError, match="loss"):
        DQN(LinearQ(), gamma=0.9, lr=1e-3, loss="l1")
    with pytest.raises(ValueError, match="target_runtime"):
        DQN(LinearQ(), gamma=0.9, lr=1e-3, target_runtime="tensorrt")


# ---------------------------------------------------------------- PPO
@pytest.mark.parametrize("continuous,shared", [(False, True), (False, False), (True, False), (True, True)])
def test_ppo_learn_moves_parameters_with_shared_or_separate_models(continuous, shared):
    paddle.seed(0)
    model = MLPActorCritic(4, 1 if continuous else 2, hidden=16, continuous=continuous, shared=shared)
    algorithm = PPO(model, clip_param=0.2, continuous_action=continuous)
    before = _weights(model)
    losses = algorithm.learn(**_rollout_batch(continuous=continuous))
    assert isinstance(losses, tuple) and len(losses) == 3
    assert all(isinstance(value, float) and np.isfinite(value) for value in losses)
    after = model.get_weights()
    assert _moved(before, after)
    if continuous:
        assert not np.allclose(before["log_std"], after["log_std"])


def test_ppo_with_a_separate_critic_model_trains_both_and_checkpoints_both():
    paddle.seed(0)
    policy, critic = PolicyOnly(), Critic()
    algorithm = PPO(policy, critic=critic)
    assert set(algorithm.models()) == {"model", "critic"}
    policy_before, critic_before = _weights(policy), _weights(critic)
    algorithm.learn(**_rollout_batch())
    assert _moved(policy_before, policy.get_weights()) and _moved(critic_before, critic.get_weights())
    with pytest.raises(ValueError, match="value function"):
        PPO(PolicyOnly())


@pytest.mark.parametrize("clipped_value", [False, True])
def test_ppo_losses_match_the_clipped_objective_by_hand(clipped_value):
    paddle.seed(0)
    policy, critic = PolicyOnly(), Critic()
    algorithm = PPO(policy, 0.2, 0.5, 0.01, 1e-3, 1e-5, 0.5, clipped_value, False, False, critic=critic)
    batch = _rollout_batch()
    with paddle.no_grad():
        obs = paddle.to_tensor(batch["batch_obs"])
        dist = algorithm.distribution(obs)
        log_probs = dist.log_prob(paddle.to_tensor(batch["batch_action"])).numpy()
        entropy = dist.entropy().numpy().mean()
        values = algorithm.value(obs).numpy().reshape(-1)
    ratio, adv = np.exp(log_probs - batch["batch_logprob"]), batch["batch_adv"]
    expected_action = -np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv).mean()
    value_losses = (values - batch["batch_return"]) ** 2
    if clipped_value:
        clipped = batch["batch_value"] + np.clip(values - batch["batch_value"], -0.2, 0.2)
        value_losses = np.maximum(value_losses, (clipped - batch["batch_return"]) ** 2)
    value_loss, action_loss, entropy_out = algorithm.learn(**batch)  # the losses before the step
    assert value_loss == pytest.approx(0.5 * value_losses.mean(), rel=1e-5)
    assert action_loss == pytest.approx(expected_action, rel=1e-5)
    assert entropy_out == pytest.approx(entropy, rel=1e-5)


def test_ppo_learn_sets_the_learning_rate_it_is_given():
    algorithm = PPO(MLPActorCritic(4, 2, 16))
    assert algorithm.optimizer.get_lr() == pytest.approx(2.5e-4)  # PARL's initial_lr
    algorithm.learn(**_rollout_batch(), lr=1e-3)
    assert algorithm.optimizer.get_lr() == pytest.approx(1e-3)


def test_ppo_normalises_a_batch_given_again_once_and_notices_an_in_place_change():
    """A batch reused over the epochs is normalised once; changing it in place, or another tensor,
    normalises anew: the same results as a fresh PPO given fresh tensors of the same values."""
    batch = _rollout_batch()
    runs = []
    for fresh in (False, True):
        paddle.seed(0)
        algorithm = PPO(MLPActorCritic(4, 2, 16))
        tensors = {key: paddle.to_tensor(value) for key, value in batch.items()}
        losses = [algorithm.learn(**tensors), algorithm.learn(**tensors)]
        tensors["batch_adv"][0] = 25.0  # an in-place change of the advantages
        if fresh:
            tensors = {key: paddle.to_tensor(value.numpy()) for key, value in tensors.items()}
        losses.append(algorithm.learn(**tensors))
        runs.append(losses)
    for cached, fresh in zip(*runs):
        np.testing.assert_allclose(cached, fresh, rtol=1e-6)
    assert runs[0][2].action_loss != pytest.approx(runs[0][1].action_loss, rel=1e-3)


def test_ppo_learns_from_a_minibatch_of_one_row_without_nan():
    """Before, norm_adv divided by the std of one advantage (NaN) and every weight became NaN."""
    paddle.seed(0)
    ppo = PPO(MLPActorCritic(4, 2, 16))
    batch = {key: value[:1] for key, value in _rollout_batch().items()}
    before = _weights(ppo.model)
    losses = ppo.learn(**batch)
    assert all(np.isfinite(losses))
    assert all(np.isfinite(value).all() for value in ppo.model.get_weights().values())
    assert _moved(before, _weights(ppo.model))


def test_ppo_sample_predict_and_value_have_parls_shapes():
    paddle.seed(0)
    discrete = PPO(MLPActorCritic(4, 2, 16))
    obs = np.zeros((5, 4), "float32")
    value, action, log_probs, entropy = discrete.sample(obs)
    assert value.shape == (5, 1) and action.shape == (1, 5) and log_probs.shape == (1, 5) and entropy.shape == (5,)
    assert discrete.predict(obs).shape == (5,) and discrete.value(obs).shape == (5, 1)
    continuous = PPO(MLPActorCritic(4, 3, 16, continuous=True), continuous_action=True)
    value, action, log_probs, entropy = continuous.sample(obs)
    assert action.shape == (1, 5, 3) and log_probs.shape == (1, 5) and entropy.shape == ()
    assert continuous.predict(obs).shape == (5, 3)


def test_ppo_names_continuous_action_when_the_policy_does_not_match():
    with pytest.raises(ValueError, match="continuous_action=True"):
        PPO(MLPActorCritic(4, 2, 16), continuous_action=True).predict(np.zeros((1, 4), "float32"))
    with pytest.raises(ValueError, match="continuous_action=False"):
        PPO(MLPActorCritic(4, 2, 16, continuous=True)).predict(np.zeros((1, 4), "float32"))


def test_ppo_rejects_bad_hyperparameters_by_name():
    for name, value in (("clip_param", 0.0), ("initial_lr", -1.0), ("eps", 0.0), ("value_loss_coef", -1.0)):
        with pytest.raises(ValueError, match=name):
            PPO(MLPActorCritic(4, 2, 16), **{name: value})


# ---------------------------------------------------------------- A2C
@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("optimizer", ["rmsprop", "adam"])
def test_a2c_loss_by_hand_and_parameters_move(optimizer, reduction):
    paddle.seed(0)
    model = MLPActorCritic(4, 2, 16)
    algorithm = A2C(model, 0.5, lr=1e-3, optimizer=optimizer, reduction=reduction)
    batch = _a2c_batch()
    reduce = np.sum if reduction == "sum" else np.mean
    with paddle.no_grad():
        obs = paddle.to_tensor(batch["obs"])
        dist = algorithm.distribution(obs)
        log_probs = dist.log_prob(paddle.to_tensor(batch["actions"])).numpy()
        entropy = reduce(dist.entropy().numpy())
        values = algorithm.value(obs).numpy().reshape(-1)
    before = _weights(model)
    total, pi_loss, vf_loss, entropy_out = algorithm.learn(**batch, learning_rate=1e-3, entropy_coeff=-0.01)
    assert float(pi_loss) == pytest.approx(-reduce(log_probs * batch["advantages"]), rel=1e-5)
    assert float(vf_loss) == pytest.approx(0.5 * reduce((values - batch["target_values"]) ** 2), rel=1e-5)
    assert float(entropy_out) == pytest.approx(entropy, rel=1e-5)
    assert float(total) == pytest.approx(float(pi_loss) + 0.5 * float(vf_loss) - 0.01 * entropy, rel=1e-5)
    assert _moved(before, model.get_weights())
    with pytest.raises(ValueError, match="optimizer"):
        A2C(model, optimizer="sgd")
    with pytest.raises(ValueError, match="reduction"):
        A2C(model, reduction="max")


def test_a2c_entropy_coeff_defaults_to_the_constructors_and_learning_rate_is_set():
    paddle.seed(0)
    algorithm = A2C(MLPActorCritic(4, 2, 16), 0.5, entropy_coeff=-0.5)
    total, pi_loss, vf_loss, entropy = algorithm.learn(**_a2c_batch())
    assert float(total) == pytest.approx(float(pi_loss) + 0.5 * float(vf_loss) - 0.5 * float(entropy), rel=1e-5)
    assert algorithm.optimizer.get_lr() == pytest.approx(1e-3)  # PARL's A2C starts at 0.001
    algorithm.learn(**_a2c_batch(), learning_rate=5e-4)
    assert algorithm.optimizer.get_lr() == pytest.approx(5e-4)


def test_a2c_prob_and_value_predict_and_value():
    algorithm = A2C(MLPActorCritic(4, 2, 16))
    obs = np.zeros((3, 4), "float32")
    probs, values = (value.numpy() for value in algorithm.prob_and_value(paddle.to_tensor(obs)))
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-6)
    assert values.shape == (3, 1) and algorithm.value(obs).shape == (3, 1)
    np.testing.assert_array_equal(algorithm.predict(obs), probs.argmax(axis=-1))


def test_rmsprop_is_torchs_rmsprop_with_epsilon_outside_the_root():
    """p -= lr * g / (sqrt(v) + eps), v = rho v + (1 - rho) g^2, on gradients from 1e-7 to 1, where
    paddle's RMSProp (epsilon inside the root) would take other steps."""
    rng = np.random.default_rng(0)
    start = rng.normal(size=(5, 3)).astype(np.float32)
    parameter = paddle.create_parameter([5, 3], "float32")
    parameter.set_value(start)
    optimizer = RMSprop(7e-4, rho=0.99, epsilon=1e-5, parameters=[parameter])
    expected, mean_square = start.astype(np.float64), np.zeros((5, 3))
    for _ in range(30):
        grad = rng.normal(size=(5, 3)) * 10.0 ** rng.integers(-7, 1)
        (parameter * paddle.to_tensor(grad.astype(np.float32))).sum().backward()
        optimizer.step()
        optimizer.clear_grad()
        grad = grad.astype(np.float32).astype(np.float64)
        mean_square = 0.99 * mean_square + 0.01 * grad ** 2
        expected -= 7e-4 * grad / (np.sqrt(mean_square) + 1e-5)
    np.testing.assert_allclose(parameter.numpy(), expected, rtol=0, atol=2e-6)
    assert np.abs(expected - start).max() > 1e-2  # the steps were not negligible


def test_a2c_rmsprop_state_survives_a_checkpoint(tmp_path):
    paddle.seed(0)
    batch = _a2c_batch()
    trained = parl_lite.Agent(A2C(MLPActorCritic(4, 2, 16), optimizer="rmsprop"))
    trained.learn(**batch)
    trained.save(tmp_path / "a2c.h5", with_optimizer=True)
    restored = parl_lite.Agent(A2C(MLPActorCritic(4, 2, 16), optimizer="rmsprop"))
    restored.restore(tmp_path / "a2c.h5")
    trained.learn(**batch)
    restored.learn(**batch)
    for name, value in trained.alg.model.get_weights().items():
        np.testing.assert_array_equal(restored.alg.model.get_weights()[name], value)


def test_a2c_step_raises_probability_of_advantageous_action():
    paddle.seed(0)
    algorithm = A2C(MLPActorCritic(4, 2, 16), lr=1e-2, reduction="mean")
    obs = np.ones((8, 4), "float32")
    prob = lambda: float(algorithm.distribution(paddle.to_tensor(obs)).probs.numpy()[0, 1])
    before = prob()
    for _ in range(5):
        algorithm.learn(obs, np.ones(8, "int64"), np.ones(8, "float32"), np.zeros(8, "float32"))
    assert prob() > before


# ---------------------------------------------------------------- IMPALA
def _impala_batch(T=6, B=3, seed=0):
    """B trajectories of T steps in PARL's layout (trajectory b, step t at row b * T + t)."""
    rng = np.random.default_rng(seed)
    dones = np.zeros((B, T), bool)
    dones[0, 2] = True
    return dict(obs=rng.normal(size=(B * T, 4)).astype("float32"), actions=rng.integers(0, 2, B * T),
                behaviour_logits=rng.normal(size=(B * T, 2)).astype("float32"),
                rewards=rng.uniform(0, 1, B * T).astype("float32"), dones=dones.reshape(-1))


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_impala_losses_match_vtrace_by_hand(reduction):
    from parl_lite.algorithms import IMPALA
    from parl_lite.algorithms.vtrace import vtrace

    paddle.seed(0)
    T, B = 6, 3
    algorithm = IMPALA(MLPActorCritic(4, 2, 16), T, 0.9, 0.5, 1.0, 0.8, clip_c_threshold=0.9, reduction=reduction)
    batch = _impala_batch(T, B)
    with paddle.no_grad():
        obs = paddle.to_tensor(batch["obs"])
        dist = algorithm.distribution(obs)
        actions = paddle.to_tensor(batch["actions"])
        log_probs = dist.log_prob(actions).numpy().reshape(B, T).T
        entropy = dist.entropy().numpy().reshape(B, T).T
        values = algorithm.value(obs).numpy().reshape(B, T).T
        behaviour_logits = batch["behaviour_logits"]
        behaviour = behaviour_logits - np.log(np.exp(behaviour_logits).sum(-1, keepdims=True))
        behaviour_log_probs = behaviour[np.arange(B * T), batch["actions"]].reshape(B, T).T
        probs = np.exp(dist.logits.numpy())
        kl = (probs * (dist.logits.numpy() - behaviour)).sum(-1).mean()
    time_major = lambda x: x.reshape(B, T).T  # noqa: E731
    expected = vtrace(behaviour_log_probs[:-1], log_probs[:-1], time_major(batch["rewards"])[:-1],
                      0.9 * (1.0 - time_major(batch["dones"])[:-1]), values[:-1], values[-1],
                      clip_rho_threshold=1.0, clip_pg_rho_threshold=0.8, clip_c_threshold=0.9)
    reduce = np.sum if reduction == "sum" else np.mean
    before = _weights(algorithm.model)
    vtrace_loss, kl_out = algorithm.learn(**batch, learning_rate=1e-3, entropy_coeff=-0.01)
    assert float(vtrace_loss.pi_loss) == pytest.approx(-reduce(log_probs[:-1] * expected.pg_advantages), rel=1e-4)
    assert float(vtrace_loss.vf_loss) == pytest.approx(0.5 * reduce((expected.vs - values[:-1]) ** 2), rel=1e-4)
    assert float(vtrace_loss.entropy) == pytest.approx(reduce(entropy[:-1]), rel=1e-5)
    assert float(vtrace_loss.total_loss) == pytest.approx(
        float(vtrace_loss.pi_loss) + 0.5 * float(vtrace_loss.vf_loss) - 0.01 * float(vtrace_loss.entropy), rel=1e-5)
    np.testing.assert_allclose(vtrace_loss.vtrace_returns.vs.numpy(), expected.vs, rtol=1e-5)
    assert float(kl_out) == pytest.approx(kl, rel=1e-4)
    assert _moved(before, algorithm.model.get_weights())


def test_impala_sample_gives_probabilities_and_logits():
    from parl_lite.algorithms import IMPALA

    probs, logits = IMPALA(MLPActorCritic(4, 2, 16), 5).sample(np.zeros((3, 4), "float32"))
    assert probs.shape == logits.shape == (3, 2)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)


def test_impala_rejects_bad_hyperparameters_and_broken_trajectories():
    from parl_lite.algorithms import IMPALA

    with pytest.raises(ValueError, match="sample_batch_steps"):
        IMPALA(MLPActorCritic(4, 2, 16))  # PARL's default None
    with pytest.raises(ValueError, match="gamma"):
        IMPALA(MLPActorCritic(4, 2, 16), 5, gamma=-0.1)
    with pytest.raises(ValueError, match="value function"):
        IMPALA(PolicyOnly(), 5)
    with pytest.raises(ValueError, match="sample_batch_steps=4"):
        IMPALA(MLPActorCritic(4, 2, 16), 4).learn(**_impala_batch(T=6, B=3))  # 18 rows: not whole trajectories


# ---------------------------------------------------------------- gradient clipping
@pytest.mark.parametrize("clip_norm", [0.1, 1e6], ids=["clipped", "within-the-limit"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_global_norm_clip_gives_paddles_gradients_to_the_bit(dtype, clip_norm):
    from parl_lite.algorithms.common import GlobalNormClip

    grads, unclipped = {}, None
    for clip_cls in (paddle.nn.ClipGradByGlobalNorm, GlobalNormClip):
        paddle.seed(0)
        layer = paddle.nn.Linear(4, 3)
        layer.to(dtype=dtype)
        x = paddle.to_tensor(np.random.default_rng(0).normal(size=(8, 4)) * 100, dtype=dtype)
        (layer(x) ** 2).mean().backward()
        unclipped = [p.grad.numpy().copy() for p in layer.parameters()]
        clipped = clip_cls(clip_norm)([(p, p.grad) for p in layer.parameters()])
        grads[clip_cls] = [g.numpy().copy() for _, g in clipped]
    norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads[GlobalNormClip]))
    if clip_norm < 1:
        assert norm == pytest.approx(clip_norm, rel=1e-4)  # clipping was active
    else:
        for ours, before in zip(grads[GlobalNormClip], unclipped, strict=True):
            np.testing.assert_array_equal(ours, before)
    for ours, theirs in zip(grads[GlobalNormClip], grads[paddle.nn.ClipGradByGlobalNorm], strict=True):
        np.testing.assert_array_equal(ours, theirs)
