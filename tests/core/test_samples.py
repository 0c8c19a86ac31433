"""parl_lite.core.samples: one sample type per training regime, built by the loops and consumed by
the algorithms. The loops name no algorithm (a new on-policy algorithm trains through the
OnPolicyTrainer unchanged), and the rollout actors run a policy model without the algorithms."""
import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite import train
from parl_lite.algorithms import A2C, DDPG, DQN, IMPALA, PPO, SAC, TD3, PolicyGradient
from parl_lite.core.algorithm import to_tensor
from parl_lite.core.learn_inputs import ACTIONS, OBSERVATIONS, STEP_VALUES_FLAT, LearnInputs
from parl_lite.core.samples import AdvantageBatch, Episode, Trajectories, Transitions
from parl_lite.core.distributions import Categorical
from parl_lite.utils.gae import gae
from parl_lite.utils.models import MLPActorCritic, MLPActorQ, MLPQNetwork
from locations import ROOT



class VanillaPolicyGradient(parl_lite.Algorithm):
    """REINFORCE with a learned baseline (Williams, 1992): one Adam step on
    ``-mean(log pi(a|s) * A) + 0.5 * mean((V(s) - R)^2)`` per on-policy batch, the advantages
    standardised. Written against the samples alone, with its own argument names."""

    sample_type = AdvantageBatch
    learn_inputs = LearnInputs(obs=OBSERVATIONS, taken=ACTIONS, advantage=STEP_VALUES_FLAT, target=STEP_VALUES_FLAT)

    def __init__(self, model: parl_lite.Model, lr: float) -> None:
        super().__init__(model)
        self.optimizer = paddle.optimizer.Adam(learning_rate=lr, parameters=model.parameters())

    def learn_arguments(self, sample: AdvantageBatch) -> dict:
        return {"obs": sample.obs, "taken": sample.actions, "advantage": sample.advantages, "target": sample.returns}

    def learn(self, obs, taken, advantage, target):
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        policy_loss = -(Categorical(self.model.policy(obs)).log_prob(taken) * advantage).mean()
        value_loss = 0.5 * ((self.model.value(obs).reshape([-1]) - target) ** 2).mean()
        loss = policy_loss + value_loss
        self.optimizer.clear_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def value(self, obs):
        return self.model.value(obs)

    def sample_actions(self, obs):
        dist = Categorical(self.model.policy(obs))
        actions = dist.sample()
        return actions, dist.log_prob(actions)

    def greedy_actions(self, obs):
        return paddle.argmax(self.model.policy(obs), axis=-1)


@pytest.mark.timeout(300)
def test_a_new_on_policy_algorithm_trains_through_the_on_policy_loop_unchanged():
    paddle.seed(1)
    vpg = VanillaPolicyGradient(MLPActorCritic(4, 2, 64), lr=3e-3)
    trainer = train.OnPolicyTrainer(vpg, "CartPole-v1", num_envs=8, rollout_steps=64, gamma=0.99, gae_lambda=0.95,
                                    seed=1, target=300, eval_every=2_048, eval_episodes=5)
    summary = trainer.learn(60_000, progress_bar=False)  # seeds 1-4 solve it in 12k-20k steps
    assert summary.algo == "VanillaPolicyGradient" and summary.solved, summary


def _rollout(T=3, N=2, obs_shape=(4,), dtype=np.float32, seed=0):
    """A [T, N] rollout as VectorRollout.collect gives it, env 1 truncated at step 0, env 0 terminated at 1."""
    rng = np.random.default_rng(seed)
    obs = (rng.integers(0, 255, (T, N, *obs_shape)) if dtype == np.uint8 else rng.normal(size=(T, N, *obs_shape)))
    next_obs = np.concatenate([obs[1:], rng.normal(size=(1, N, *obs_shape))]).astype(dtype)
    terminated, ends = np.zeros((T, N), bool), np.zeros((T, N), bool)
    terminated[1, 0] = ends[1, 0] = ends[0, 1] = True
    next_obs[0, 1] += 1  # the final observation of the truncated episode, not the next one's first
    return {"obs": obs.astype(dtype), "actions": rng.integers(0, 2, (T, N)),
            "log_probs": rng.normal(-0.7, 0.1, (T, N)).astype(np.float32),
            "behaviour_logits": rng.normal(size=(T, N, 2)).astype(np.float32),
            "rewards": rng.uniform(0, 1, (T, N)).astype(np.float32), "terminated": terminated, "ends": ends,
            "next_obs": next_obs}


def _value(obs):
    """A value function that is easy to check: the mean of each observation."""
    return np.asarray(obs, np.float64).reshape(len(obs), -1).mean(axis=1, keepdims=True).astype(np.float32)


def test_an_advantage_batch_flattens_a_rollout_step_major_with_gae_from_the_learners_values():
    rollout = _rollout()
    batch = AdvantageBatch.from_rollout(rollout, _value, 0.9, 0.8)
    values, next_values = _value(rollout["obs"].reshape(6, 4)).reshape(3, 2), _value(rollout["next_obs"].reshape(6, 4))
    advantages, returns = gae(rollout["rewards"], values, next_values.reshape(3, 2), rollout["terminated"],
                              rollout["ends"], 0.9, 0.8)
    assert len(batch) == 6 and batch.obs.shape == (6, 4) and batch.actions.shape == (6,)
    np.testing.assert_array_equal(batch.obs[3], rollout["obs"][1, 1])  # row t * N + n
    np.testing.assert_array_equal(batch.actions, rollout["actions"].reshape(-1))
    np.testing.assert_array_equal(batch.log_probs, rollout["log_probs"].reshape(-1))
    np.testing.assert_array_equal(batch.values, values.reshape(-1))
    np.testing.assert_array_equal(batch.advantages, advantages.reshape(-1))
    np.testing.assert_array_equal(batch.returns, returns.reshape(-1))
    minibatch = batch.rows(np.array([4, 1]))  # a minibatch keeps every array's rows together
    assert isinstance(minibatch, AdvantageBatch) and len(minibatch) == 2
    for name, array in minibatch.arrays().items():
        np.testing.assert_array_equal(array, getattr(batch, name)[[4, 1]])


def test_image_observations_stay_uint8_in_the_samples():
    rollout = _rollout(obs_shape=(2, 3, 3), dtype=np.uint8)
    seen = []
    batch = AdvantageBatch.from_rollout(rollout, lambda obs: (seen.append(obs.dtype), _value(obs))[1], 0.9, 0.8)
    trajectories = Trajectories.from_rollout(rollout, _value, 0.9)
    assert seen == [np.uint8] and batch.obs.dtype == np.uint8 and batch.obs.shape == (6, 2, 3, 3)
    assert trajectories.obs.dtype == np.uint8 and trajectories.obs.shape == (8, 2, 3, 3)
    tensors = to_tensor(batch)  # the one conversion: the same sample, of tensors
    assert isinstance(tensors, AdvantageBatch) and tensors.obs.dtype == paddle.uint8
    assert tensors.actions.dtype == paddle.int64 and tensors.advantages.dtype == paddle.float32


def test_trajectories_lay_each_environments_steps_then_the_bootstrap_and_fold_a_truncation_into_the_reward():
    rollout = _rollout()
    sample = Trajectories.from_rollout(rollout, _value, 0.9)
    assert len(sample) == 2 * 4  # N trajectories of T + 1 rows
    np.testing.assert_array_equal(sample.obs[:4], np.concatenate([rollout["obs"][:, 0], rollout["next_obs"][-1:, 0]]))
    np.testing.assert_array_equal(sample.obs[4:], np.concatenate([rollout["obs"][:, 1], rollout["next_obs"][-1:, 1]]))
    np.testing.assert_array_equal(sample.dones, [False, True, False, False, True, False, False, False])
    np.testing.assert_array_equal(sample.actions[[3, 7]], [0, 0])  # the bootstrap rows' entries are zeros
    expected = rollout["rewards"][:, 1].copy()
    expected[0] += 0.9 * _value(rollout["next_obs"][0, 1:2])[0, 0]  # the truncated step bootstraps
    np.testing.assert_allclose(sample.rewards[4:7], expected, rtol=1e-6)
    np.testing.assert_array_equal(sample.rewards[:3], rollout["rewards"][:, 0])  # a termination does not
    del rollout["behaviour_logits"]
    with pytest.raises(ValueError, match="policy must be discrete"):
        Trajectories.from_rollout(rollout, _value, 0.9)


def _sample_of(kind):
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(4, 3)).astype(np.float32)
    rows = rng.normal(size=4).astype(np.float32)
    if kind is Transitions:
        return Transitions(obs, np.array([0, 1, 1, 0]), rows, obs + 1, np.zeros(4, bool))
    if kind is AdvantageBatch:
        return AdvantageBatch(obs, np.array([0, 1, 1, 0]), rows - 1, rows, rows + 1, rows * 2)
    if kind is Episode:
        return Episode.from_steps(list(obs), [0, 1, 1, 0], [1.0, 1.0, 1.0, 1.0], 0.9)
    return Trajectories(obs, np.array([0, 1, 1, 0]), rng.normal(size=(4, 2)).astype(np.float32), rows,
                        np.zeros(4, bool))


@pytest.mark.parametrize("make", [
    lambda: PPO(MLPActorCritic(3, 2, 8)), lambda: A2C(MLPActorCritic(3, 2, 8)),
    lambda: IMPALA(MLPActorCritic(3, 2, 8), 2), lambda: DQN(MLPQNetwork(3, 2, 8), 0.9, 1e-3),
    lambda: DDPG(MLPActorQ(3, 1, 8)), lambda: TD3(MLPActorQ(3, 1, 8, twin_q=True)),
    lambda: SAC(MLPActorQ(3, 1, 8, twin_q=True, gaussian=True)),
    lambda: PolicyGradient(MLPActorCritic(3, 2, 8), 1e-3)],
    ids=["PPO", "A2C", "IMPALA", "DQN", "DDPG", "TD3", "SAC", "PolicyGradient"])
def test_every_algorithm_names_its_sample_and_maps_it_to_its_learns_arguments_by_parls_names(make):
    algorithm = make()
    sample = _sample_of(algorithm.sample_type)
    arguments = algorithm.learn_arguments(sample)
    assert set(arguments) == set(type(algorithm).learn_inputs.inputs)  # every array learn takes, by its name
    assert {id(array) for array in arguments.values()} <= {id(array) for array in sample.arrays().values()}


def test_an_algorithm_whose_learn_names_the_arrays_otherwise_is_told_to_map_them():
    class Renamed(parl_lite.Algorithm):
        sample_type = AdvantageBatch

        def learn(self, observations, actions, advantages, returns):
            raise AssertionError("not called")

    with pytest.raises(TypeError, match=r"Renamed.learn takes no obs, log_probs, values: to learn from "
                                        r"AdvantageBatch samples .* must define learn_arguments\(sample\)"):
        parl_lite.Agent(Renamed(MLPActorCritic(3, 2, 8))).learn_from(_sample_of(AdvantageBatch))


def test_a_loop_refuses_an_algorithm_of_another_regime_naming_both():
    with pytest.raises(ValueError, match=r"OffPolicyTrainer builds Transitions samples; PPO learns from "
                                         r"AdvantageBatch \(its sample_type\)"):
        train.OffPolicyTrainer(PPO(MLPActorCritic(4, 2, 8)), "CartPole-v1")
    with pytest.raises(ValueError, match=r"OnPolicyTrainer builds AdvantageBatch samples; DQN learns from "
                                         r"Transitions"):
        train.OnPolicyTrainer(DQN(MLPQNetwork(4, 2, 8), 0.9, 1e-3), "CartPole-v1")
    with pytest.raises(ValueError, match=r"AsyncTrainer builds AdvantageBatch or Trajectories samples; "
                                         r"PolicyGradient learns from Episode"):
        train.AsyncTrainer(PolicyGradient(MLPActorCritic(4, 2, 8), 1e-3), "CartPole-v1")


def test_an_on_policy_algorithm_without_a_value_function_is_named():
    class NoValue(VanillaPolicyGradient):
        value = None

    with pytest.raises(ValueError, match=r"NoValue learns from AdvantageBatch samples, built with the learner's "
                                         r"value function, but it has no value\(obs\)"):
        train.OnPolicyTrainer(NoValue(MLPActorCritic(4, 2, 8), 1e-3), "CartPole-v1")


def test_the_asynchronous_loop_learns_as_a3c_or_impala_by_the_algorithms_sample():
    a3c = train.AsyncTrainer(A2C(MLPActorCritic(4, 2, 8)), "CartPole-v1", rollout_steps=5)  # no gae_lambda: 1
    assert a3c.sample_type is AdvantageBatch and a3c.gae_lambda == 1.0
    impala = train.AsyncTrainer(IMPALA(MLPActorCritic(4, 2, 8), 6), "CartPole-v1", rollout_steps=5)
    assert impala.sample_type is Trajectories
    with pytest.raises(ValueError, match="IMPALA learns from Trajectories .*: gae_lambda does not apply"):
        train.AsyncTrainer(IMPALA(MLPActorCritic(4, 2, 8), 6), "CartPole-v1", rollout_steps=5, gae_lambda=0.9)
    with pytest.raises(ValueError, match=r"IMPALA's sample_batch_steps \(6\) must be rollout_steps \+ 1 = 11"):
        train.AsyncTrainer(IMPALA(MLPActorCritic(4, 2, 8), 6), "CartPole-v1", rollout_steps=10)


@pytest.mark.timeout(120)
def test_the_loops_call_an_agent_that_overrides_learn_with_parls_names():
    class RecordingAgent(parl_lite.Agent):
        def __init__(self, algorithm):
            super().__init__(algorithm)
            self.calls = []

        def learn(self, *args, **kwargs):
            self.calls.append(sorted(kwargs))
            return super().learn(*args, **kwargs)

    paddle.seed(0)
    agent = RecordingAgent(PPO(MLPActorCritic(4, 2, 8)))
    train.OnPolicyTrainer(agent, "CartPole-v1", num_envs=2, rollout_steps=8, epochs=2, minibatch_size=8,
                          eval_every=10_000, eval_episodes=1).learn(16, progress_bar=False)
    names = sorted(["batch_obs", "batch_action", "batch_value", "batch_return", "batch_logprob", "batch_adv"])
    assert agent.calls == [names] * 4  # 2 epochs of 2 minibatches
    agent = RecordingAgent(DQN(MLPQNetwork(4, 2, 8), 0.9, 1e-3))
    train.OffPolicyTrainer(agent, "CartPole-v1", learning_starts=4, batch_size=4, eval_every=10_000,
                           eval_episodes=1).learn(6, progress_bar=False)
    assert agent.calls == [sorted(["obs", "action", "reward", "next_obs", "terminal"])] * 2


def _imports(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.append(node.module)
    return modules


def test_the_training_loops_and_the_rollouts_import_no_algorithm():
    import parl_lite.algorithms

    files = [*sorted((ROOT / "parl_lite" / "train").glob("*.py")), ROOT / "parl_lite" / "utils" / "rollout.py"]
    for path in files:
        assert not [module for module in _imports(path) if module.startswith("parl_lite.algorithms")], path
        names = {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
        assert not names & set(parl_lite.algorithms.__all__), path


@pytest.mark.timeout(120)
def test_a_rollout_actor_runs_its_model_s_policy_without_importing_the_algorithms():
    code = """
import sys
import numpy as np
from parl_lite.utils.models import MLPActorCritic
from parl_lite.utils.rollout import RolloutWorker

worker = RolloutWorker(lambda: MLPActorCritic(4, 2, 8), "CartPole-v1", 2, seed=0)
rollout = worker.collect(None, 5)  # the weights it was built with
assert rollout["behaviour_logits"].shape == (5, 2, 2) and rollout["log_probs"].shape == (5, 2)
chosen = np.take_along_axis(rollout["behaviour_logits"], rollout["actions"][..., None], -1)[..., 0]
np.testing.assert_allclose(rollout["log_probs"], chosen, rtol=1e-6)  # the logits are log-softmaxed
print(sorted(name for name in sys.modules if name.startswith("parl_lite.algorithms")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "[]\n"
