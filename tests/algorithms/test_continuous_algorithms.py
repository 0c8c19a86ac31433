"""DDPG, TD3 and SAC updates on tiny fixed inputs: PARL's learn arguments and return values, finite
losses, moving parameters, exact soft target updates, seeding, hyperparameter validation and
checkpoints."""
import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite.algorithms import DDPG, SAC, TD3
from parl_lite.algorithms.common import frozen

OBS_DIM, ACT_DIM, BATCH = 3, 2, 16


def _mlp(in_dim: int, out_dim: int) -> paddle.nn.Sequential:
    return paddle.nn.Sequential(paddle.nn.Linear(in_dim, 8), paddle.nn.ReLU(), paddle.nn.Linear(8, out_dim))


class SingleQModel(parl_lite.Model):
    def __init__(self) -> None:
        super().__init__()
        self.actor = _mlp(OBS_DIM, ACT_DIM)
        self.critic = _mlp(OBS_DIM + ACT_DIM, 1)

    def policy(self, obs):
        return paddle.tanh(self.actor(obs))

    def value(self, obs, action):
        return self.critic(paddle.concat([obs, action], axis=-1))

    def get_actor_params(self):
        return self.actor.parameters()

    def get_critic_params(self):
        return self.critic.parameters()


class TwinQModel(parl_lite.Model):
    def __init__(self, gaussian: bool) -> None:
        super().__init__()
        self.gaussian = gaussian
        self.actor = _mlp(OBS_DIM, 2 * ACT_DIM if gaussian else ACT_DIM)
        self.critic1 = _mlp(OBS_DIM + ACT_DIM, 1)
        self.critic2 = _mlp(OBS_DIM + ACT_DIM, 1)

    def policy(self, obs):
        out = self.actor(obs)
        return tuple(out.chunk(2, axis=-1)) if self.gaussian else paddle.tanh(out)

    def value(self, obs, action):
        obs_action = paddle.concat([obs, action], axis=-1)
        return self.critic1(obs_action), self.critic2(obs_action)

    def Q1(self, obs, action):  # noqa: N802 - PARL's name
        return self.critic1(paddle.concat([obs, action], axis=-1))

    def get_actor_params(self):
        return self.actor.parameters()

    def get_critic_params(self):
        return self.critic1.parameters() + self.critic2.parameters()


def make(name: str, seed: int = 0, **kwargs):
    paddle.seed(seed)
    if name == "DDPG":
        return DDPG(SingleQModel(), gamma=0.9, tau=0.1, actor_lr=1e-2, critic_lr=1e-2, **kwargs)
    if name == "TD3":
        return TD3(TwinQModel(gaussian=False), gamma=0.9, tau=0.1, actor_lr=1e-2, critic_lr=1e-2, **kwargs)
    return SAC(TwinQModel(gaussian=True), gamma=0.9, tau=0.1, actor_lr=1e-2, critic_lr=1e-2, **kwargs)


def batch(seed: int = 0):
    """A replay batch as PARL's agents pass it: float32 tensors, reward and terminal ``[batch, 1]``."""
    rng = np.random.default_rng(seed)
    arrays = (rng.standard_normal((BATCH, OBS_DIM)), rng.uniform(-1, 1, (BATCH, ACT_DIM)),
              rng.standard_normal((BATCH, 1)), rng.standard_normal((BATCH, OBS_DIM)),
              (rng.uniform(size=(BATCH, 1)) < 0.2))
    keys = ("obs", "action", "reward", "next_obs", "terminal")
    return {key: paddle.to_tensor(np.asarray(a, dtype=np.float32)) for key, a in zip(keys, arrays)}


def weights(model: parl_lite.Model, prefix: str = "") -> dict:
    return {name: value for name, value in model.get_weights().items() if name.startswith(prefix)}


ALGORITHMS = ["DDPG", "TD3", "SAC"]


@pytest.mark.parametrize("name", ALGORITHMS)
def test_learn_gives_finite_losses_and_moves_actor_and_critic(name):
    algorithm = make(name)
    before = weights(algorithm.model)
    for step in range(2):  # TD3 moves its actor on the second call
        result = algorithm.learn(**batch(step))
    if name == "TD3":  # PARL's TD3 returns the critic loss only
        assert isinstance(result, paddle.Tensor) and np.isfinite(float(result))
    else:
        critic_loss, actor_loss = result
        assert np.isfinite(float(critic_loss)) and np.isfinite(float(actor_loss))
        assert result.critic_loss is critic_loss and result.actor_loss is actor_loss
    after = weights(algorithm.model)
    for name_ in before:
        assert not np.allclose(before[name_], after[name_]), f"{name_} did not move"


@pytest.mark.parametrize("name", ALGORITHMS)
def test_soft_target_update_equals_the_hand_computed_blend(name):
    algorithm = make(name)
    if name == "TD3":
        algorithm.learn(**batch(5))  # the next call is the delayed actor + target step
    target_before = weights(algorithm.target_model)
    algorithm.learn(**batch(0))
    model_after, target_after = weights(algorithm.model), weights(algorithm.target_model)
    for key in target_before:
        expected = 0.9 * target_before[key] + 0.1 * model_after[key]
        np.testing.assert_allclose(target_after[key], expected, rtol=1e-5, atol=1e-6, err_msg=key)


def test_td3_delays_the_actor_and_the_target():
    algorithm = make("TD3", policy_freq=3)
    actor, target = weights(algorithm.model, "actor"), weights(algorithm.target_model)
    for step in range(2):
        algorithm.learn(**batch(step))
    for key, value in weights(algorithm.model, "actor").items():
        np.testing.assert_array_equal(value, actor[key])
    for key, value in weights(algorithm.target_model).items():
        np.testing.assert_array_equal(value, target[key])
    algorithm.learn(**batch(2))
    assert algorithm.total_it == 3
    assert not np.allclose(weights(algorithm.model, "actor")["actor.0.weight"], actor["actor.0.weight"])


def test_ddpg_target_q_is_reward_plus_discounted_target_value():
    """With critic_lr tiny the critic loss equals mean((Q - y)^2) for the hand-computed y."""
    algorithm = make("DDPG")
    obs, action, reward, next_obs, terminal = batch(0).values()
    with paddle.no_grad():
        next_q = algorithm.target_model.value(next_obs, algorithm.target_model.policy(next_obs)).numpy()
        q = algorithm.model.value(obs, action).numpy()
    y = reward.numpy() + 0.9 * (1.0 - terminal.numpy()) * next_q
    critic_loss, _ = algorithm.learn(obs, action, reward, next_obs, terminal)
    np.testing.assert_allclose(float(critic_loss), np.mean((q - y) ** 2), rtol=1e-5)


def test_frozen_parameters_get_no_gradient_but_pass_it_on():
    critic = paddle.nn.Linear(2, 1)
    action = paddle.to_tensor(np.ones((4, 2), np.float32), stop_gradient=False)
    with frozen(critic.parameters()):
        loss = critic(action).mean()
    loss.backward()
    assert critic.weight.grad is None
    assert action.grad is not None and float(action.grad.abs().sum()) > 0
    assert not critic.weight.stop_gradient  # restored


def test_sac_actions_are_squashed_and_log_probs_finite():
    algorithm = make("SAC")
    obs = batch(0)["obs"] * 100.0
    action, log_prob = algorithm.sample(obs)
    assert action.shape == [BATCH, ACT_DIM] and log_prob.shape == [BATCH, 1]
    assert float(action.abs().max()) <= 1.0
    assert np.all(np.isfinite(log_prob.numpy()))
    assert float(algorithm.predict(obs).abs().max()) <= 1.0


def test_sac_log_prob_matches_the_tanh_gaussian_density():
    algorithm = make("SAC")
    obs = batch(0)["obs"]
    paddle.seed(3)
    action, log_prob = algorithm.sample(obs)
    mean, log_std = (t.numpy() for t in algorithm.model.policy(obs))
    u = np.arctanh(np.clip(action.numpy(), -1 + 1e-7, 1 - 1e-7))
    std = np.exp(np.clip(log_std, -5, 2))
    gaussian = -0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    expected = (gaussian - np.log(1 - action.numpy() ** 2 + 1e-6)).sum(-1, keepdims=True)
    np.testing.assert_allclose(log_prob.numpy(), expected, rtol=1e-3, atol=1e-3)


def test_sac_tunes_alpha_only_when_asked():
    tuned, fixed = make("SAC", alpha=0.5, alpha_lr=0.1), make("SAC", alpha=0.5)  # PARL's: a fixed alpha
    tuned.learn(**batch(0))
    fixed.learn(**batch(0))
    assert tuned.alpha != pytest.approx(0.5)
    assert fixed.alpha == pytest.approx(0.5)
    fixed.alpha = 0.2  # a float attribute in PARL
    assert fixed.alpha == pytest.approx(0.2)
    with pytest.raises(ValueError, match="alpha"):
        fixed.alpha = 0.0


def test_sac_takes_parls_positional_order():
    """PARL's SAC(model, gamma, tau, alpha, actor_lr, critic_lr)."""
    paddle.seed(0)
    sac = SAC(TwinQModel(gaussian=True), 0.9, 0.1, 0.3, 1e-2, 2e-2)
    assert (sac.gamma, sac.tau, sac.alpha) == (0.9, 0.1, pytest.approx(0.3))
    assert sac.actor_optimizer.get_lr() == pytest.approx(1e-2) and sac.critic_optimizer.get_lr() == pytest.approx(2e-2)
    assert sac.alpha_optimizer is None
    action, log_prob = sac.sample_actions(batch(0)["obs"].numpy())
    assert action.shape == (BATCH, ACT_DIM) and log_prob.shape == (BATCH,)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_same_seed_same_updates(name):
    """paddle.seed fixes initial weights and the update noise (TD3 smoothing, SAC sampling)."""
    runs = []
    for _ in range(2):
        algorithm = make(name, seed=4)  # re-seeds paddle's global generator
        for step in range(3):
            algorithm.learn(**batch(step))
        runs.append(weights(algorithm.model))
    for key, value in runs[0].items():
        np.testing.assert_array_equal(value, runs[1][key], err_msg=key)


@pytest.mark.parametrize("name, kwargs, message", [
    ("DDPG", dict(gamma=1.5), "gamma"),
    ("DDPG", dict(tau=0.0), "tau"),
    ("TD3", dict(policy_freq=0), "policy_freq"),
    ("TD3", dict(noise_clip=-1.0), "noise_clip"),
    ("SAC", dict(alpha=0.0), "alpha"),
    ("SAC", dict(actor_lr=-1.0), "actor_lr"),
])
def test_bad_hyperparameters_are_named(name, kwargs, message):
    algorithm_cls = {"DDPG": DDPG, "TD3": TD3, "SAC": SAC}[name]
    model = SingleQModel() if name == "DDPG" else TwinQModel(gaussian=name == "SAC")
    with pytest.raises(ValueError, match=message):
        algorithm_cls(model, **kwargs)


def test_td3_trains_a_model_without_q1_through_its_value():
    class ValueOnly(TwinQModel):
        Q1 = None

    paddle.seed(0)
    algorithm = TD3(ValueOnly(gaussian=False), gamma=0.9, tau=0.1, actor_lr=1e-2, critic_lr=1e-2, policy_freq=1)
    before = weights(algorithm.model)
    algorithm.learn(**batch(0))
    assert any(not np.array_equal(value, weights(algorithm.model)[key]) for key, value in before.items()
               if key.startswith("actor"))


def test_td3_actor_step_evaluates_the_first_critic_alone():
    """As PARL's TD3 (``model.Q1``): the actor step does not run the second critic."""
    algorithm = make("TD3", policy_freq=1)
    calls = []
    algorithm.model.critic2.register_forward_post_hook(lambda layer, inputs, output: calls.append(output.shape))
    algorithm.learn(**batch(0))
    assert len(calls) == 1  # the critic step's Q2 only


def test_sac_checkpoint_carries_models_target_and_temperature(tmp_path):
    class Agent(parl_lite.Agent):
        pass

    trained = make("SAC", alpha_lr=0.1)
    for step in range(3):
        trained.learn(**batch(step))
    Agent(trained).save(tmp_path / "sac.h5", with_optimizer=True)
    fresh = make("SAC", seed=9, alpha_lr=0.1)
    Agent(fresh).restore(tmp_path / "sac.h5")
    assert fresh.alpha == pytest.approx(trained.alpha)
    for role in ("model", "target_model"):
        for key, value in weights(getattr(trained, role)).items():
            np.testing.assert_array_equal(weights(getattr(fresh, role))[key], value, err_msg=f"{role} {key}")
