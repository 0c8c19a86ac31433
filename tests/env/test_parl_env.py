"""parl_lite.env: PARL's wrappers on real gymnasium environments."""
import pickle

import gymnasium as gym
import numpy as np
import pytest

from parl_lite.env import ActionMappingWrapper, CompatWrapper, VectorEnv, is_gym_version_ge
from parl_lite.env.mujoco_wrappers import VecNormalizeEnv, get_ob_rms, wrap_rms


def test_compat_wrapper_gives_the_old_gym_interface_on_cartpole():
    env = CompatWrapper(gym.make("CartPole-v1"))
    assert env._max_episode_steps == 500
    env.seed(3)
    first = env.reset()
    assert isinstance(first, np.ndarray) and first.shape == (4,)
    second_episode_start = None
    lengths = []
    for _ in range(2):
        done, steps = False, 0
        while not done:
            obs, reward, done, info = env.step(env.action_space.sample())
            assert isinstance(reward, float) and isinstance(done, bool) and isinstance(info, dict)
            steps += 1
        lengths.append(steps)
        second_episode_start = env.reset()
    reference = gym.make("CartPole-v1")
    assert np.array_equal(first, reference.reset(seed=3)[0])  # seed() seeds the next reset
    assert not np.array_equal(second_episode_start, first)  # and only that one (PARL's reseeds each)
    assert all(1 <= n <= 500 for n in lengths)


def test_compat_wrapper_gives_gym_0_26_discrete_sizes():
    env = CompatWrapper(gym.make("CartPole-v1"))
    assert type(env.action_space.n) is int and type(env.action_space.start) is int  # PARL asserts it
    env.seed(4)
    drawn = [env.action_space.sample() for _ in range(20)]
    env.seed(4)
    assert [env.action_space.sample() for _ in range(20)] == drawn  # seed() seeds the space shown
    assert set(int(a) for a in drawn) == {0, 1} and env.action_space.contains(1) and not env.action_space.contains(2)
    assert type(env.observation_space) is gym.spaces.Box  # other spaces are the environment's own


def test_compat_wrapper_ends_at_the_time_limit():
    env = CompatWrapper(gym.make("Pendulum-v1"))
    env.seed(0)
    env.reset()
    dones = [env.step(np.zeros(1))[2] for _ in range(env._max_episode_steps)]
    assert dones == [False] * 199 + [True]


def test_action_mapping_maps_per_dimension_and_forwards_seed():
    env = gym.make("Pendulum-v1")  # action in [-2, 2]
    wrapped = ActionMappingWrapper(CompatWrapper(env))
    assert wrapped._max_episode_steps == 200
    wrapped.seed(5)  # forwarded to the CompatWrapper, as gym 0.26's wrappers did
    obs = wrapped.reset()
    reference = gym.make("Pendulum-v1")
    assert np.array_equal(obs, reference.reset(seed=5)[0])
    _, reward, _, _ = wrapped.step(np.array([0.5]))
    _, expected, _, _, _ = reference.step(np.array([1.0], np.float32))  # -2 + 1.5 * 4 / 2
    assert reward == pytest.approx(expected)

    box = gym.spaces.Box(low=np.array([0.0, -5.0], np.float32), high=np.array([1.0, 10.0], np.float32))

    class Recorder(gym.Env):
        action_space = box
        observation_space = gym.spaces.Box(-1.0, 1.0, (1,))

        def step(self, action):
            self.action = action
            return np.zeros(1), 0.0, False, False, {}

        def reset(self, *, seed=None, options=None):
            return np.zeros(1), {}

    recorder = Recorder()
    ActionMappingWrapper(recorder).step(np.array([0.0, 1.0]))
    assert recorder.action.tolist() == [0.5, 10.0] and recorder.action.dtype == np.float32
    ActionMappingWrapper(recorder).step(np.array([-1.0005, 1.0005]))  # rounding overshoot: clipped
    assert recorder.action.tolist() == [0.0, 10.0]
    with pytest.raises(ValueError, match=r"must be in \[-1, 1\].*got array\(\[ 0\. , -1\.5\]\)"):
        ActionMappingWrapper(recorder).step(np.array([0.0, -1.5]))


def test_action_mapping_rejects_what_it_cannot_map():
    with pytest.raises(TypeError, match="needs a Box action space, got Discrete"):
        ActionMappingWrapper(gym.make("CartPole-v1"))
    unbounded = gym.make("Pendulum-v1")
    unbounded.action_space = gym.spaces.Box(-np.inf, np.inf, (1,))
    with pytest.raises(ValueError, match="finite action bounds"):
        ActionMappingWrapper(unbounded)


def test_private_attributes_are_not_forwarded_and_wrappers_pickle():
    wrapped = ActionMappingWrapper(CompatWrapper(gym.make("Pendulum-v1")))
    with pytest.raises(AttributeError, match="'_secret'"):
        wrapped._secret
    clone = pickle.loads(pickle.dumps(wrapped))
    clone.seed(1)
    assert clone.reset().shape == (3,)


def test_is_gym_version_ge():
    assert is_gym_version_ge("0.26.0") and is_gym_version_ge(gym.__version__)
    assert not is_gym_version_ge("99.0")


def test_wrap_rms_normalises_and_reports_raw_episode_returns():
    env = wrap_rms(gym.make("Pendulum-v1"), gamma=0.99)
    assert isinstance(env, VecNormalizeEnv)
    env.seed(0)
    obs = env.reset()
    raw = CompatWrapper(gym.make("Pendulum-v1"))
    raw.seed(0)
    raw.reset()
    raw_return, rewards = 0.0, []
    for _ in range(200):
        obs, reward, done, info = env.step(np.array([0.3]))
        raw_return += raw.step(np.array([0.3]))[1]
        rewards.append(reward)
        assert np.all(np.abs(obs) <= 10.0)
    assert done and info["episode"]["l"] == 200
    assert info["episode"]["r"] == pytest.approx(raw_return)  # statistics of the raw rewards
    assert abs(np.mean(rewards)) < abs(raw_return / 200)  # rewards were scaled down
    stats = get_ob_rms(env)
    assert stats is env.get_ob_rms() and stats.count > 200

    evaluation = wrap_rms(gym.make("Pendulum-v1"), gamma=None, test=True)
    assert evaluation.get_ob_rms() is None  # raw observations until statistics are given
    evaluation.set_ob_rms(stats)
    evaluation.seed(0)
    first = evaluation.reset()
    counted = stats.count
    evaluation.step(np.array([0.0]))
    assert stats.count == counted  # evaluation does not update the training statistics
    expected = (raw_first := CompatWrapper(gym.make("Pendulum-v1")))
    raw_first.seed(0)
    assert np.allclose(first, np.clip((expected.reset() - stats.mean) / np.sqrt(stats.var + 1e-8), -10, 10))
    with pytest.raises(ValueError, match="gamma is None"):
        wrap_rms(gym.make("Pendulum-v1"), gamma=None)


def test_vector_env_steps_a_list_and_resets_each_environment_that_ends():
    envs = [CompatWrapper(gym.make("CartPole-v1")) for _ in range(3)]
    for seed, env in enumerate(envs):
        env.seed(seed)
    vector = VectorEnv(envs)
    assert vector.envs_num == 3
    obs_batch = vector.reset()
    assert isinstance(obs_batch, list) and len(obs_batch) == 3
    ended = 0
    for _ in range(200):
        actions = np.ones(3, dtype=np.int64)  # always right: an episode ends within a few dozen steps
        obs_batch, reward_batch, done_batch, info_batch = vector.step(actions)
        assert [len(batch) for batch in (obs_batch, reward_batch, done_batch, info_batch)] == [3, 3, 3, 3]
        for obs, done in zip(obs_batch, done_batch, strict=True):
            if done:  # the observation is the new episode's first: CartPole starts within 0.05 of upright
                ended += 1
                assert np.all(np.abs(obs) <= 0.05)
    assert ended >= 6
    with pytest.raises(ValueError, match="actions holds 2 action\\(s\\) for 3 environments"):
        vector.step([0, 1])
    with pytest.raises(ValueError, match="envs is empty"):
        VectorEnv([])
