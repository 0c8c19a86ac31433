"""PARL 2.2.1's public API of the core and the algorithms, as a PARL program calls it: one learning
contract (arrays by PARL's names, positionally or by keyword, numpy or paddle), PARL's constructors
and defaults, the import paths PARL's examples and tests use, the base classes, and Agent's
save / restore / save_inference_model."""
import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite.algorithms import A2C, DDPG, DDQN, DQN, IMPALA, PPO, SAC, TD3, PolicyGradient
from parl_lite.utils.models import MLPActorCritic, MLPActorQ, MLPQNetwork

N = 12  # rows of the batches below
RNG_SEED = 0


def _discrete_policy_model():
    from core_models import CartpoleModel

    return CartpoleModel()


def _replay(act_dim: int):
    rng = np.random.default_rng(RNG_SEED)
    action = rng.integers(0, 2, N) if act_dim == 0 else rng.uniform(-1, 1, (N, act_dim)).astype("float32")
    obs_dim = 4 if act_dim == 0 else 3
    return dict(obs=rng.normal(size=(N, obs_dim)).astype("float32"), action=action,
                reward=rng.normal(size=N).astype("float32"), next_obs=rng.normal(size=(N, obs_dim)).astype("float32"),
                terminal=rng.uniform(size=N) < 0.2)


def _on_policy(names: dict):
    rng = np.random.default_rng(RNG_SEED)
    arrays = dict(obs=rng.normal(size=(N, 4)).astype("float32"), actions=rng.integers(0, 2, N),
                  values=rng.normal(size=N).astype("float32"), returns=rng.normal(size=N).astype("float32"),
                  log_probs=rng.normal(-0.7, 0.1, N).astype("float32"), advantages=rng.normal(size=N).astype("float32"))
    return {parl_name: arrays[ours] for ours, parl_name in names.items()}


def _impala():
    rng = np.random.default_rng(RNG_SEED)
    return dict(obs=rng.normal(size=(N, 4)).astype("float32"), actions=rng.integers(0, 2, N),
                behaviour_logits=rng.normal(size=(N, 2)).astype("float32"), rewards=rng.normal(size=N).astype("float32"),
                dones=rng.uniform(size=N) < 0.2)


# name -> (build the algorithm, its learn arguments in PARL's order, by PARL's names)
CASES = {
    "PolicyGradient": (lambda: PolicyGradient(_discrete_policy_model(), 1e-2),
                       lambda: {key: value for key, value in _replay(0).items() if key in ("obs", "action", "reward")}),
    "DQN": (lambda: DQN(MLPQNetwork(4, 2, 16), 0.99, 1e-2), lambda: _replay(0)),
    "DDQN": (lambda: DDQN(MLPQNetwork(4, 2, 16), 0.99, 1e-2), lambda: _replay(0)),
    "DDPG": (lambda: DDPG(MLPActorQ(3, 2, 16), 0.99, 0.1, 1e-2, 1e-2), lambda: _replay(2)),
    "TD3": (lambda: TD3(MLPActorQ(3, 2, 16, twin_q=True), 0.99, 0.1, 1e-2, 1e-2, 0.2, 0.5, 1), lambda: _replay(2)),
    "SAC": (lambda: SAC(MLPActorQ(3, 2, 16, twin_q=True, gaussian=True), 0.99, 0.1, 0.2, 1e-2, 1e-2),
            lambda: _replay(2)),
    "PPO": (lambda: PPO(MLPActorCritic(4, 2, 16)),
            lambda: _on_policy({"obs": "batch_obs", "actions": "batch_action", "values": "batch_value",
                                "returns": "batch_return", "log_probs": "batch_logprob", "advantages": "batch_adv"})),
    "A2C": (lambda: A2C(MLPActorCritic(4, 2, 16), 0.5),
            lambda: _on_policy({"obs": "obs", "actions": "actions", "advantages": "advantages",
                                "returns": "target_values"})),
    "IMPALA": (lambda: IMPALA(MLPActorCritic(4, 2, 16), 4, 0.99, 0.5, 1.0, 1.0), _impala),
}


def _as_tensors(batch: dict) -> dict:
    """The batch as PARL's agents pass it: float32 tensors, int64 actions of a discrete policy."""
    return {key: paddle.to_tensor(value.astype("int64") if value.dtype.kind in "iu" else value.astype("float32"))
            for key, value in batch.items()}


def _learn_once(name: str, call: str):
    make, batch_of = CASES[name]
    paddle.seed(1)
    algorithm = make()
    batch = batch_of()
    paddle.seed(2)  # the noise inside an update (TD3's smoothing, SAC's sampling) repeats
    if call == "positional numpy":
        result = algorithm.learn(*batch.values())
    elif call == "keyword numpy":
        result = algorithm.learn(**dict(reversed(batch.items())))
    elif call == "positional paddle":
        result = algorithm.learn(*_as_tensors(batch).values())
    else:
        result = algorithm.learn(**_as_tensors(batch))
    return result, algorithm.model.get_weights()


def _floats(result):
    if isinstance(result, tuple):
        return [value for item in result for value in _floats(item)]
    return [float(result)] if getattr(result, "size", 1) == 1 else []


@pytest.mark.parametrize("name", sorted(CASES))
def test_learn_takes_parls_arrays_positionally_or_by_keyword_as_numpy_or_paddle(name):
    runs = {call: _learn_once(name, call)
            for call in ("positional numpy", "keyword numpy", "positional paddle", "keyword paddle")}
    reference_result, reference_weights = runs["positional numpy"]
    assert _floats(reference_result) and all(np.isfinite(_floats(reference_result)))
    for call, (result, weights) in runs.items():
        np.testing.assert_allclose(_floats(result), _floats(reference_result), rtol=1e-6, err_msg=call)
        for key, value in weights.items():
            np.testing.assert_allclose(value, reference_weights[key], rtol=1e-6, atol=1e-7, err_msg=f"{call}: {key}")


# ---------------------------------------------------------------- learn refuses what does not fit, naming it
DISCRETE = ("A2C", "DDQN", "DQN", "IMPALA", "PPO", "PolicyGradient")
CONTINUOUS = ("DDPG", "SAC", "TD3")
ACTION_KEY = {"PPO": "batch_action", "A2C": "actions", "IMPALA": "actions"}  # the others: "action"
TERMINAL_KEY = {"IMPALA": "dones"}  # the others: "terminal"
OBS_KEYS = ("obs", "next_obs", "batch_obs")


def _weights_of(algorithm):
    return {role: model.get_weights() for role, model in algorithm.models().items()}


def _assert_refused(name: str, change, error: type, match: str, tensors: bool = False):
    """``learn`` on the case's batch, changed by ``change(batch)``, raises ``error`` matching ``match``
    and updates nothing."""
    make, batch_of = CASES[name]
    algorithm = make()
    batch = batch_of()
    change(batch)
    before = _weights_of(algorithm)
    with pytest.raises(error, match=match):
        algorithm.learn(**(_as_tensors(batch) if tensors else batch))
    for role, weights in _weights_of(algorithm).items():
        for key, value in weights.items():
            np.testing.assert_array_equal(value, before[role][key], err_msg=f"{role}.{key} changed")


def _learned(name: str, batch: dict):
    """(the floats ``learn`` returned, the weights after it) for a fresh algorithm of the case."""
    paddle.seed(1)
    algorithm = CASES[name][0]()
    paddle.seed(2)
    return _floats(algorithm.learn(**batch)), algorithm.model.get_weights()


def _assert_same_update(first, second):
    np.testing.assert_allclose(first[0], second[0], rtol=1e-6)
    for key, value in first[1].items():
        np.testing.assert_allclose(value, second[1][key], rtol=1e-6, atol=1e-7, err_msg=key)


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy", "paddle"])
@pytest.mark.parametrize("bad,message", [(0.5, "must be whole numbers"), (-1, "must be in \\[0, 1\\]"),
                                         (2, "must be in \\[0, 1\\]")])
@pytest.mark.parametrize("name", DISCRETE)
def test_learn_refuses_discrete_actions_that_are_not_action_indices(name, bad, message, tensors):
    """Before, a float action was truncated, -1 meant the last action and 2 failed inside paddle."""
    key = ACTION_KEY.get(name, "action")

    def change(batch):
        batch[key] = batch[key].astype("float64" if isinstance(bad, float) else "int64")
        batch[key][3] = bad

    _assert_refused(name, change, ValueError, f"{name}.learn: {key} holds {bad}.* \\(row 3\\).*{message}", tensors)


@pytest.mark.parametrize("name", DISCRETE)
def test_learn_takes_discrete_actions_as_whole_floats(name):
    """PARL's PPO storage keeps discrete actions as float32: whole floats are action indices."""
    key = ACTION_KEY.get(name, "action")
    batch = CASES[name][1]()
    as_floats = dict(batch, **{key: batch[key].astype("float32")})
    _assert_same_update(_learned(name, batch), _learned(name, as_floats))


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy", "paddle"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_learn_refuses_arrays_of_another_batch_size(name, tensors):
    """Before, next_obs of one row was broadcast over a batch of 3."""
    for key in CASES[name][1]():
        def change(batch, key=key):
            batch[key] = batch[key][:1]

        _assert_refused(name, change, ValueError, f"{name}.learn: .* has (1|{N}) rows but .* has (1|{N}): every "
                        "array of a batch must have the same leading size", tensors)


@pytest.mark.parametrize("name", ("DDPG", "DDQN", "DQN", "IMPALA", "SAC", "TD3"))
def test_learn_refuses_terminal_flags_other_than_0_or_1(name):
    """Before, a terminal of 5.0 scaled the bootstrap term."""
    key = TERMINAL_KEY.get(name, "terminal")

    def change(batch):
        batch[key] = batch[key].astype("float32")
        batch[key][2] = 5.0

    _assert_refused(name, change, ValueError, f"{name}.learn: {key} holds 5.0 \\(row 2\\); terminal flags must "
                    "be 0 or 1")
    _assert_refused(name, change, ValueError, f"{key} holds 5.0", tensors=True)
    batch = CASES[name][1]()
    as_floats = dict(batch, **{key: batch[key].astype("float32")})
    _assert_same_update(_learned(name, batch), _learned(name, as_floats))  # 0.0 and 1.0 are flags


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("name", sorted(CASES))
def test_learn_refuses_values_that_are_not_finite_naming_the_array(name, bad):
    """Before, a NaN reward made every weight NaN without a word."""
    for key, value in CASES[name][1]().items():
        if value.dtype.kind != "f":
            continue

        def change(batch, key=key):
            batch[key] = batch[key].copy()
            batch[key].flat[batch[key].size - 1] = bad

        _assert_refused(name, change, ValueError, f"{name}.learn: {key} holds {bad} \\(row {N - 1}\\); learn "
                        "refuses values that are not finite")
        _assert_refused(name, change, ValueError, f"{key} holds {bad}", tensors=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_learn_names_an_empty_batch_a_batch_without_rows_and_what_is_not_an_array(name):
    """Before, these failed deep inside paddle."""
    def empty(batch):
        batch.update({key: value[:0] for key, value in batch.items()})

    def one_observation(batch):
        key = next(key for key in batch if key in OBS_KEYS)
        batch[key] = batch[key][0]

    def listed(batch):
        key = next(key for key in batch if key in OBS_KEYS)
        batch[key] = batch[key].tolist()

    _assert_refused(name, empty, ValueError, f"{name}.learn: .* is empty \\(0 rows\\)")
    _assert_refused(name, one_observation, ValueError, "obs has shape \\[[34]\\]; observations must be "
                    "\\[N, ...\\], N the batch size")
    _assert_refused(name, listed, TypeError, "obs must be a numpy array or a paddle tensor of observations, got list")


@pytest.mark.parametrize("name", sorted(CASES))
def test_learn_takes_integer_observations_as_float32(name):
    """Before, integer observations failed inside paddle's first layer."""
    batch = CASES[name][1]()
    integers = dict(batch, **{key: np.round(value * 3).astype("int64") for key, value in batch.items()
                              if key in OBS_KEYS})
    floats = dict(batch, **{key: value.astype("float32") for key, value in integers.items() if key in OBS_KEYS})
    _assert_same_update(_learned(name, integers), _learned(name, floats))


@pytest.mark.parametrize("name,key", [("PPO", "batch_adv"), ("PPO", "batch_return"), ("A2C", "advantages"),
                                      ("A2C", "target_values")])
def test_ppo_and_a2c_refuse_a_column_of_per_step_values(name, key):
    """Before, an [N, 1] column was broadcast against the [N] log-probabilities into [N, N]."""
    def change(batch):
        batch[key] = batch[key][:, None]

    _assert_refused(name, change, ValueError, f"{name}.learn: {key} has shape \\[{N}, 1\\]; one value per step "
                    "must be \\[N\\]")


@pytest.mark.parametrize("name", CONTINUOUS)
def test_continuous_actions_must_have_the_policys_width(name):
    def narrow(batch):
        batch["action"] = batch["action"][:, :1]

    def flat(batch):
        batch["action"] = batch["action"][:, 0]

    _assert_refused(name, narrow, ValueError, f"{name}.learn: action has shape \\[{N}, 1\\]; the policy's "
                    "actions have 2 dimension\\(s\\), so action must be \\[N, 2\\]")
    _assert_refused(name, flat, ValueError, f"action has shape \\[{N}\\]; continuous actions must be "
                    "\\[N, act_dim\\]")


def test_impala_refuses_behaviour_logits_of_another_width():
    def change(batch):
        batch["behaviour_logits"] = np.concatenate([batch["behaviour_logits"]] * 2, axis=1)

    _assert_refused("IMPALA", change, ValueError, f"behaviour_logits have shape \\[{N}, 4\\]; the policy's "
                    f"output at obs has \\[{N}, 2\\]")


@pytest.mark.parametrize("name,returned", [
    ("PolicyGradient", paddle.Tensor), ("DQN", paddle.Tensor), ("DDQN", paddle.Tensor), ("TD3", paddle.Tensor),
    ("DDPG", ("critic_loss", "actor_loss")), ("SAC", ("critic_loss", "actor_loss")),
    ("PPO", ("value_loss", "action_loss", "entropy")), ("A2C", ("total_loss", "pi_loss", "vf_loss", "entropy")),
    ("IMPALA", ("vtrace_loss", "kl")),
])
def test_learn_returns_what_parl_returns(name, returned):
    result, _ = _learn_once(name, "keyword paddle")
    if returned is paddle.Tensor:
        assert isinstance(result, paddle.Tensor) and result.size == 1
        return
    assert isinstance(result, tuple) and result._fields == returned
    if name == "PPO":
        assert all(isinstance(value, float) for value in result)  # PARL's .item()
    elif name == "IMPALA":
        vtrace_loss, kl = result
        assert all(isinstance(getattr(vtrace_loss, key), paddle.Tensor)
                   for key in ("total_loss", "pi_loss", "vf_loss", "entropy"))
        assert isinstance(kl, paddle.Tensor)
    else:
        assert all(isinstance(value, paddle.Tensor) for value in result)


def test_constructors_take_parls_positional_arguments_and_defaults():
    ppo = PPO(MLPActorCritic(4, 2, 16), 0.3, 0.7, 0.02, 1e-3, 1e-6, 0.9, False, False, False)
    assert (ppo.clip_param, ppo.value_loss_coef, ppo.entropy_coef, ppo.max_grad_norm) == (0.3, 0.7, 0.02, 0.9)
    assert (ppo.use_clipped_value_loss, ppo.norm_adv, ppo.continuous_action) == (False, False, False)
    assert ppo.optimizer.get_lr() == pytest.approx(1e-3) and ppo.optimizer._epsilon == pytest.approx(1e-6)
    defaults = PPO(MLPActorCritic(4, 2, 16))  # PARL's defaults
    assert (defaults.clip_param, defaults.value_loss_coef, defaults.entropy_coef, defaults.max_grad_norm) == \
        (0.1, 0.5, 0.01, 0.5)
    assert defaults.use_clipped_value_loss and defaults.norm_adv and not defaults.continuous_action
    assert defaults.optimizer.get_lr() == pytest.approx(2.5e-4) and defaults.optimizer._epsilon == pytest.approx(1e-5)

    a2c = A2C(MLPActorCritic(4, 2, 16), 0.25)
    assert a2c.vf_loss_coeff == 0.25 and isinstance(a2c.optimizer, paddle.optimizer.Adam)
    assert a2c.optimizer.get_lr() == pytest.approx(1e-3) and a2c.optimizer._grad_clip.clip_norm == 40.0

    impala = IMPALA(MLPActorCritic(4, 2, 16), 20, 0.9, 0.3, 1.5, 1.2)
    assert (impala.sample_batch_steps, impala.gamma, impala.vf_loss_coeff) == (20, 0.9, 0.3)
    assert (impala.clip_rho_threshold, impala.clip_pg_rho_threshold) == (1.5, 1.2)
    assert impala.optimizer.get_lr() == pytest.approx(1e-3) and impala.optimizer._grad_clip.clip_norm == 40.0

    td3 = TD3(MLPActorQ(3, 2, 16, twin_q=True), 0.9, 0.01, 1e-3, 2e-3)
    assert (td3.policy_noise, td3.noise_clip, td3.policy_freq) == (0.2, 0.5, 2)  # PARL's defaults
    ddpg = DDPG(MLPActorQ(3, 2, 16), 0.9, 0.01, 1e-3, 2e-3)
    assert (ddpg.gamma, ddpg.tau) == (0.9, 0.01) and ddpg.critic_optimizer.get_lr() == pytest.approx(2e-3)
    dqn = DQN(MLPQNetwork(4, 2, 16), 0.9, 1e-3)
    assert (dqn.gamma, dqn.lr) == (0.9, 1e-3) and dqn.optimizer._grad_clip is None  # PARL's: no clipping
    assert PolicyGradient(_discrete_policy_model(), 1e-3).optimizer.get_lr() == pytest.approx(1e-3)


def test_extras_are_keyword_only():
    with pytest.raises(TypeError):
        DQN(MLPQNetwork(4, 2, 16), 0.9, 1e-3, "huber")
    with pytest.raises(TypeError):
        SAC(MLPActorQ(3, 2, 16, twin_q=True, gaussian=True), 0.99, 0.005, 0.2, 1e-3, 1e-3, 1e-3)
    with pytest.raises(TypeError):
        A2C(MLPActorCritic(4, 2, 16), 0.5, None)


# ---------------------------------------------------------------- import paths and base classes
def test_parls_import_paths_resolve_to_parl_lites_classes():
    import parl_lite.algorithms.paddle as algorithms_paddle
    import parl_lite.core.paddle as core_paddle
    from parl_lite.algorithms import vtrace
    from parl_lite.algorithms.paddle.impala import vtrace as impala_vtrace
    from parl_lite.core.agent_base import AgentBase
    from parl_lite.core.algorithm_base import AlgorithmBase
    from parl_lite.core.model_base import ModelBase
    from parl_lite.core.paddle.model import Model
    from parl_lite.core.paddle.policy_distribution import CategoricalDistribution

    assert core_paddle.Model is Model is parl_lite.Model
    assert core_paddle.Algorithm is parl_lite.Algorithm and core_paddle.Agent is parl_lite.Agent
    assert issubclass(parl_lite.Model, ModelBase) and issubclass(parl_lite.Algorithm, AlgorithmBase)
    assert issubclass(parl_lite.Agent, AgentBase)
    assert parl_lite.algorithms.PolicyGradient is PolicyGradient and algorithms_paddle.IMPALA is IMPALA
    assert impala_vtrace is vtrace and callable(vtrace.from_importance_weights)
    assert CategoricalDistribution.__module__ == "parl_lite.core.paddle.policy_distribution"


def test_algorithm_base_weights_cover_models_in_lists_tuples_and_dicts():
    from parl_lite.core.algorithm_base import AlgorithmBase
    from parl_lite.core.model_base import ModelBase

    class Holder(ModelBase):
        def __init__(self, value):
            self.value = value

        def get_weights(self):
            return self.value

        def set_weights(self, weights):
            self.value = weights

    class Several(AlgorithmBase):
        def __init__(self):
            self.single = Holder(1)
            self.listed = [Holder(2), "not a model", Holder(3)]
            self.keyed = {"a": Holder(4), "b": 0}

    algorithm = Several()
    assert algorithm.get_weights() == {"single": 1, "listed": [2, 3], "keyed": {"a": 4}}
    algorithm.set_weights({"single": -1, "listed": [-2, -3], "keyed": {"a": -4}, "ignored": 9})
    assert algorithm.get_weights() == {"single": -1, "listed": [-2, -3], "keyed": {"a": -4}}
    for bad, name in (({"listed": [0, 0], "keyed": {"a": 0}}, "single"),
                      ({"single": 0, "listed": [0], "keyed": {"a": 0}}, "listed"),
                      ({"single": 0, "listed": [0, 0], "keyed": {"b": 0}}, "keyed")):
        with pytest.raises(ValueError, match=name):
            algorithm.set_weights(bad)
    assert algorithm.get_weights() == {"single": -1, "listed": [-2, -3], "keyed": {"a": -4}}  # nothing changed
    with pytest.raises(NotImplementedError, match="forward"):  # calling a ModelBase runs its forward
        Holder(0)(1)


# ---------------------------------------------------------------- Agent: save, restore, inference model
class ActorCritic(parl_lite.Model):
    """PARL's DDPG example shape: two sub-models, each with its own forward."""

    def __init__(self):
        super().__init__()
        self.actor_model = MLPActorQ(3, 2, 8)
        self.critic_model = MLPQNetwork(5, 1, 8)

    def policy(self, obs):
        return self.actor_model(obs)


def _agent(seed):
    paddle.seed(seed)
    from core_models import make_agent

    return make_agent(seed)


def test_save_and_restore_with_parls_model_argument(tmp_path):
    saved, other = _agent(0), _agent(1)
    saved.save(tmp_path / "model.ckpt", saved.alg.model)  # PARL's save(save_path, model)
    other.restore(tmp_path / "model.ckpt", other.alg.model)
    for key, value in saved.get_weights().items():
        np.testing.assert_array_equal(other.get_weights()[key], value)

    paddle.seed(2)
    algorithm = parl_lite.Algorithm(ActorCritic())
    agent = parl_lite.Agent(algorithm)
    agent.save(tmp_path / "actor.ckpt", model=algorithm.model.actor_model)  # only the actor
    before = algorithm.model.actor_model.get_weights()
    paddle.seed(3)
    fresh = parl_lite.Agent(parl_lite.Algorithm(ActorCritic()))
    critic_before = fresh.alg.model.critic_model.get_weights()
    fresh.restore(tmp_path / "actor.ckpt", model=fresh.alg.model.actor_model)
    for key, value in before.items():
        np.testing.assert_array_equal(fresh.alg.model.actor_model.get_weights()[key], value)
    for key, value in critic_before.items():
        np.testing.assert_array_equal(fresh.alg.model.critic_model.get_weights()[key], value)
    with pytest.raises(parl_lite.CheckpointError, match="does not fit"):
        fresh.restore(tmp_path / "actor.ckpt")  # the whole model from a file that holds only the actor


def test_old_save_with_optimizer_as_second_argument_is_refused_by_name(tmp_path):
    """Before, agent.save(path, model) silently took the model for with_optimizer=True."""
    agent = _agent(0)
    with pytest.raises(TypeError, match="model \\(PARL's argument.*with_optimizer=True"):
        agent.save(tmp_path / "a.h5", True)
    with pytest.raises(TypeError, match="model \\(PARL's argument"):
        agent.restore(tmp_path / "a.h5", "model")
    with pytest.raises(ValueError, match="with_optimizer"):
        agent.save(tmp_path / "a.h5", agent.alg.model, with_optimizer=True)
    assert not (tmp_path / "a.h5").exists()
    agent.save(tmp_path / "a.h5", with_optimizer=True)  # the optimizer state stays reachable by keyword
    agent.restore(tmp_path / "a.h5")


def test_save_inference_model_writes_what_paddle_jit_loads(tmp_path):
    paddle.seed(0)
    algorithm = parl_lite.Algorithm(ActorCritic())
    agent = parl_lite.Agent(algorithm)
    prefix = tmp_path / "inference" / "actor"
    agent.save_inference_model(str(prefix), [[None, 3]], ["float32"], algorithm.model.actor_model)
    written = sorted(path.name for path in prefix.parent.iterdir())
    assert written == ["actor.json", "actor.pdiparams"]  # Paddle 3's program format; no temporaries left
    loaded = paddle.jit.load(str(prefix))
    obs = paddle.to_tensor(np.random.default_rng(0).normal(size=(5, 3)).astype("float32"))
    np.testing.assert_allclose(loaded(obs).numpy(), algorithm.model.actor_model(obs).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shapes,dtypes,model,message", [
    ([[None, 3]], ["float32"], "whole", "no forward\\(\\) of its own"),
    ((None, 3), ["float32"], None, "input_shape_list must be a list"),
    ([[None, 3]], "float32", None, "input_dtype_list must be a list"),
    ([[None, 3]], ["float32", "float32"], None, "1 input shapes but 2 input dtypes"),
])
def test_save_inference_model_names_what_is_wrong(tmp_path, shapes, dtypes, model, message):
    algorithm = parl_lite.Algorithm(ActorCritic())
    chosen = algorithm.model if model == "whole" else algorithm.model.actor_model
    with pytest.raises(ValueError, match=message):
        parl_lite.Agent(algorithm).save_inference_model(str(tmp_path / "m"), shapes, dtypes, chosen)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("prefix", ["", ".", "..", "out/", "out/.", "out/.."])
def test_save_inference_model_names_a_save_path_that_is_no_file_prefix(tmp_path, monkeypatch, prefix):
    """Before, save_inference_model("") failed with pathlib's "PosixPath('.') has an empty name"."""
    monkeypatch.chdir(tmp_path)
    algorithm = parl_lite.Algorithm(ActorCritic())
    with pytest.raises(ValueError, match=f"save_path {prefix!r} names no file; give a path prefix such as"):
        parl_lite.Agent(algorithm).save_inference_model(prefix, [[None, 3]], ["float32"], algorithm.model.actor_model)
    with pytest.raises(TypeError, match="save_path must be a path prefix \\(str or os.PathLike\\), got NoneType"):
        parl_lite.Agent(algorithm).save_inference_model(None, [[None, 3]], ["float32"], algorithm.model.actor_model)
    assert list(tmp_path.iterdir()) == []
