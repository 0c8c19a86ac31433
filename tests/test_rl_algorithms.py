"""DQN, PPO and A2C updates on tiny fixed inputs, checked against values computed by hand."""
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
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, obs_dim)).astype("float32")
    actions = rng.normal(size=(n, 1)).astype("float32") if continuous else rng.integers(0, 2, n)
    return dict(obs=obs, actions=actions, log_probs=rng.normal(-0.7, 0.1, n).astype("float32"),
                advantages=rng.normal(size=n).astype("float32"), returns=rng.normal(size=n).astype("float32"),
                values=rng.normal(size=n).astype("float32"))


# ---------------------------------------------------------------- DQN
def _dqn_batch():
    obs = np.array([[1.0, 0.0], [0.0, 1.0]], "float32")
    next_obs = np.array([[0.0, 1.0], [1.0, 1.0]], "float32")
    values = (obs, np.array([0, 1]), np.array([1.0, 0.5], "float32"), next_obs, np.array([False, True]))
    return dict(zip(("obs", "action", "reward", "next_obs", "terminated"), map(paddle.to_tensor, values)))


@pytest.mark.parametrize("double", [False, True])
def test_dqn_loss_matches_hand_computed_targets(double):
    paddle.seed(0)
    algorithm = DQN(LinearQ(), gamma=0.9, lr=1e-3, double=double)
    # online Q(s) = s @ W + b; target network differs so that double and vanilla targets differ
    _set_linear_q(algorithm.model, [[1.0, 2.0], [3.0, 0.0]], [0.0, 0.0])
    _set_linear_q(algorithm.target_model, [[0.5, 0.0], [0.0, 4.0]], [0.0, 0.0])
    # sample 0: Q(s0)=[1, 2], a=0 -> q=1; next s=[0,1]: online [3, 0] -> a*=0, target [0, 4]
    #   vanilla: 1 + 0.9 * max(0, 4) = 4.6; double: 1 + 0.9 * target[a*=0] = 1.0
    # sample 1: Q(s1)=[3, 0], a=1 -> q=0; terminal -> target 0.5
    q, targets = np.array([1.0, 0.0]), np.array([1.0 if double else 4.6, 0.5])
    diff = np.abs(q - targets)
    huber = np.where(diff < 1.0, 0.5 * diff**2, diff - 0.5).mean()
    target_before = _weights(algorithm.target_model)
    loss = algorithm.learn(_dqn_batch())["loss"]
    assert loss == pytest.approx(huber, rel=1e-6)
    assert not _moved(target_before, _weights(algorithm.target_model))  # learn never touches the target
    assert _moved({"fc.weight": np.array([[1.0, 2.0], [3.0, 0.0]])}, {"fc.weight": algorithm.model.get_weights()["fc.weight"]})


def test_dqn_sync_target_copies_and_blends():
    paddle.seed(0)
    algorithm = DDQN(LinearQ(), gamma=0.99, lr=1e-2)
    assert algorithm.double
    for _ in range(3):
        algorithm.learn(_dqn_batch())
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


# ---------------------------------------------------------------- PPO
@pytest.mark.parametrize("continuous,shared", [(False, True), (False, False), (True, False), (True, True)])
def test_ppo_learn_moves_parameters_with_shared_or_separate_models(continuous, shared):
    paddle.seed(0)
    model = MLPActorCritic(4, 1 if continuous else 2, hidden=16, continuous=continuous, shared=shared)
    algorithm = PPO(model, clip_param=0.2, epochs=2, batch_size=8, value_clip_param=0.2, seed=0)
    before = _weights(model)
    stats = algorithm.learn(_rollout_batch(continuous=continuous))
    assert all(np.isfinite(v) for v in stats.values())
    after = model.get_weights()
    assert _moved(before, after)
    if continuous:
        assert not np.allclose(before["log_std"], after["log_std"])


def test_ppo_with_a_separate_critic_model_trains_both_and_checkpoints_both(tmp_path):
    paddle.seed(0)
    policy, critic = PolicyOnly(), Critic()
    algorithm = PPO(policy, critic=critic, epochs=1, batch_size=32)
    assert set(algorithm.models()) == {"model", "critic"}
    policy_before, critic_before = _weights(policy), _weights(critic)
    algorithm.learn(_rollout_batch())
    assert _moved(policy_before, policy.get_weights()) and _moved(critic_before, critic.get_weights())
    with pytest.raises(ValueError, match="value function"):
        PPO(PolicyOnly())


def test_ppo_losses_match_the_clipped_objective_by_hand():
    paddle.seed(0)
    policy, critic = PolicyOnly(), Critic()
    algorithm = PPO(policy, critic=critic, clip_param=0.2, value_clip_param=0.1, epochs=1, batch_size=32,
                    normalize_advantages=False)
    batch = _rollout_batch()
    with paddle.no_grad():
        obs = paddle.to_tensor(batch["obs"])
        log_probs = algorithm.distribution(obs).log_prob(paddle.to_tensor(batch["actions"])).numpy()
        values = algorithm.value(obs).numpy()
    ratio, adv = np.exp(log_probs - batch["log_probs"]), batch["advantages"]
    expected_policy = -np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv).mean()
    clipped_values = batch["values"] + np.clip(values - batch["values"], -0.1, 0.1)
    expected_value = np.maximum((values - batch["returns"]) ** 2, (clipped_values - batch["returns"]) ** 2).mean()
    stats = algorithm.learn(batch)  # one epoch, one minibatch: the stats are the pre-update losses
    assert stats["policy_loss"] == pytest.approx(expected_policy, rel=1e-5)
    assert stats["value_loss"] == pytest.approx(expected_value, rel=1e-5)
    assert stats["clip_fraction"] == pytest.approx(np.mean(np.abs(ratio - 1) > 0.2), abs=1e-6)


def test_ppo_adaptive_kl_coefficient_doubles_and_halves():
    paddle.seed(0)
    batch = _rollout_batch()
    tight = PPO(MLPActorCritic(4, 2, 16), clip_param=None, lr=1e-2, kl_coef=1.0, kl_target=1e-9, epochs=3, batch_size=8)
    stats = tight.learn(batch)
    assert stats["kl"] > 1.5e-9 and stats["kl_coef"] == 2.0 == tight.kl_coef
    loose = PPO(MLPActorCritic(4, 2, 16), kl_coef=1.0, kl_target=1e3, epochs=1, batch_size=32)
    assert loose.learn(batch)["kl_coef"] == 0.5
    with pytest.raises(ValueError, match="KL penalty"):
        PPO(MLPActorCritic(4, 2, 16), clip_param=None)
    with pytest.raises(ValueError, match="kl_target"):
        PPO(MLPActorCritic(4, 2, 16), kl_target=0.01)


def test_ppo_minibatch_shuffling_is_seeded():
    results = []
    for _ in range(2):
        paddle.seed(3)
        model = MLPActorCritic(4, 2, 16)
        PPO(model, epochs=2, batch_size=8, seed=5).learn(_rollout_batch())
        results.append(model.get_weights())
    for name in results[0]:
        np.testing.assert_array_equal(results[0][name], results[1][name])


# ---------------------------------------------------------------- A2C
@pytest.mark.parametrize("optimizer", ["rmsprop", "adam"])
def test_a2c_loss_by_hand_and_parameters_move(optimizer):
    paddle.seed(0)
    model = MLPActorCritic(4, 2, 16)
    algorithm = A2C(model, lr=1e-3, optimizer=optimizer, entropy_coef=0.01)
    batch = _rollout_batch()
    with paddle.no_grad():
        obs = paddle.to_tensor(batch["obs"])
        log_probs = algorithm.distribution(obs).log_prob(paddle.to_tensor(batch["actions"])).numpy()
        values = algorithm.value(obs).numpy()
    before = _weights(model)
    stats = algorithm.learn({key: batch[key] for key in ("obs", "actions", "advantages", "returns")})
    assert stats["policy_loss"] == pytest.approx(-(log_probs * batch["advantages"]).mean(), rel=1e-5)
    assert stats["value_loss"] == pytest.approx(((values - batch["returns"]) ** 2).mean(), rel=1e-5)
    assert _moved(before, model.get_weights())
    with pytest.raises(ValueError, match="optimizer"):
        A2C(model, optimizer="sgd")


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
    batch = {key: _rollout_batch()[key] for key in ("obs", "actions", "advantages", "returns")}
    trained = parl_lite.Agent(A2C(MLPActorCritic(4, 2, 16)))
    trained.learn(batch)
    trained.save(tmp_path / "a2c.h5", with_optimizer=True)
    restored = parl_lite.Agent(A2C(MLPActorCritic(4, 2, 16)))
    restored.restore(tmp_path / "a2c.h5")
    trained.learn(batch)
    restored.learn(batch)
    for name, value in trained.alg.model.get_weights().items():
        np.testing.assert_array_equal(restored.alg.model.get_weights()[name], value)


def test_a2c_step_raises_probability_of_advantageous_action():
    paddle.seed(0)
    algorithm = A2C(MLPActorCritic(4, 2, 16), lr=1e-2, optimizer="adam")
    obs = np.ones((8, 4), "float32")
    prob = lambda: float(algorithm.distribution(paddle.to_tensor(obs)).probs.numpy()[0, 1])
    before = prob()
    for _ in range(5):
        algorithm.learn(dict(obs=obs, actions=np.ones(8, "int64"), advantages=np.ones(8, "float32"),
                             returns=np.zeros(8, "float32")))
    assert prob() > before


# ---------------------------------------------------------------- IMPALA
def _trajectories(T=6, B=3, seed=0):
    rng = np.random.default_rng(seed)
    terminated = np.zeros((T, B), bool)
    ends = np.zeros((T, B), bool)
    terminated[2, 0] = ends[2, 0] = True   # a termination
    ends[4, 1] = True                      # a time-limit truncation
    return dict(obs=rng.normal(size=(T, B, 4)).astype("float32"), actions=rng.integers(0, 2, (T, B)),
                log_probs=np.log(rng.uniform(0.2, 0.8, (T, B))).astype("float32"),
                rewards=np.ones((T, B), "float32"), terminated=terminated, ends=ends,
                next_obs=rng.normal(size=(T, B, 4)).astype("float32"))


def test_impala_losses_match_vtrace_by_hand():
    from parl_lite.algorithms import IMPALA, vtrace

    paddle.seed(0)
    algorithm = IMPALA(MLPActorCritic(4, 2, 16), gamma=0.9, lr=1e-3, clip_rho_threshold=1.0, clip_c_threshold=0.9)
    batch = _trajectories()
    T, B = batch["rewards"].shape
    with paddle.no_grad():
        obs = paddle.to_tensor(batch["obs"].reshape(T * B, 4))
        log_probs = algorithm.distribution(obs).log_prob(paddle.to_tensor(batch["actions"].reshape(-1))).numpy().reshape(T, B)
        values = algorithm.value(obs).numpy().reshape(T, B)
        next_values = algorithm.value(paddle.to_tensor(batch["next_obs"].reshape(T * B, 4))).numpy().reshape(T, B)
    # truncation at (4, 1): bootstrap from V(final obs) inside the reward, and cut the trace
    rewards = batch["rewards"] + 0.9 * next_values * (batch["ends"] & ~batch["terminated"])
    expected = vtrace(batch["log_probs"], log_probs, rewards, 0.9 * (1 - batch["ends"]), values,
                      next_values[-1], clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0, clip_c_threshold=0.9)
    before = _weights(algorithm.model)
    stats = algorithm.learn(batch)
    assert stats["policy_loss"] == pytest.approx(-(log_probs * expected.pg_advantages).mean(), rel=1e-4, abs=1e-6)
    assert stats["value_loss"] == pytest.approx(0.5 * ((expected.vs - values) ** 2).mean(), rel=1e-4)
    assert stats["mean_rho"] == pytest.approx(np.exp(log_probs - batch["log_probs"]).mean(), rel=1e-5)
    assert _moved(before, algorithm.model.get_weights())


def test_impala_rejects_bad_hyperparameters():
    from parl_lite.algorithms import IMPALA

    with pytest.raises(ValueError, match="gamma"):
        IMPALA(MLPActorCritic(4, 2, 16), gamma=-0.1)
    with pytest.raises(ValueError, match="value function"):
        IMPALA(PolicyOnly())


# ---------------------------------------------------------------- gradient clipping
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_global_norm_clip_gives_paddles_gradients_to_the_bit(dtype):
    from parl_lite.algorithms.common import GlobalNormClip

    grads = {}
    for clip_cls in (paddle.nn.ClipGradByGlobalNorm, GlobalNormClip):
        paddle.seed(0)
        layer = paddle.nn.Linear(4, 3)
        layer.to(dtype=dtype)
        x = paddle.to_tensor(np.random.default_rng(0).normal(size=(8, 4)) * 100, dtype=dtype)
        (layer(x) ** 2).mean().backward()
        clipped = clip_cls(0.1)([(p, p.grad) for p in layer.parameters()])
        grads[clip_cls] = [g.numpy().copy() for _, g in clipped]
    norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads[GlobalNormClip]))
    assert norm == pytest.approx(0.1, rel=1e-4)  # clipping was active
    for ours, theirs in zip(grads[GlobalNormClip], grads[paddle.nn.ClipGradByGlobalNorm]):
        np.testing.assert_array_equal(ours, theirs)
