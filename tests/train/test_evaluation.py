"""train.Evaluator: episodes played side by side return what playing them one by one returns."""
import gymnasium as gym
import numpy as np
import pytest

from parl_lite.train.evaluation import Evaluator

WEIGHTS = np.array([0.3, -0.2, 1.0, 0.4])  # a fixed CartPole policy whose episodes differ in length


def linear_policy(obs: np.ndarray) -> np.ndarray:
    return (obs @ WEIGHTS > 0).astype(np.int64)


def one_by_one(env_id: str, episodes: int, seed: int, policy, scale=None) -> list[float]:
    env = gym.make(env_id)
    totals = []
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        total, done = 0.0, False
        while not done:
            action = policy(obs[None])[0]
            obs, reward, terminated, truncated, _ = env.step(action if scale is None else action * scale)
            total, done = total + float(reward), terminated or truncated
        totals.append(total)
    return totals


def test_side_by_side_matches_one_by_one_on_episodes_of_different_lengths():
    expected = one_by_one("CartPole-v1", 7, 100, linear_policy)
    assert len(set(expected)) > 3  # the episodes end at different steps
    evaluator = Evaluator("CartPole-v1", 7, 100)
    try:
        assert evaluator(linear_policy) == pytest.approx(np.mean(expected), abs=0)
        assert evaluator(linear_policy) == pytest.approx(np.mean(expected), abs=0)  # every call from the same starts
    finally:
        evaluator.close()


def test_continuous_actions_are_scaled():
    def policy(obs: np.ndarray) -> np.ndarray:
        return np.tanh(obs[:, :1] * 2.0).astype(np.float32)

    scale = np.array([2.0], np.float32)
    expected = one_by_one("Pendulum-v1", 3, 5, policy, scale)
    evaluator = Evaluator("Pendulum-v1", 3, 5, action_scale=scale)
    try:
        assert evaluator(policy) == pytest.approx(np.mean(expected), rel=1e-12)
    finally:
        evaluator.close()


def test_episodes_must_be_positive():
    with pytest.raises(ValueError, match="eval_episodes"):
        Evaluator("CartPole-v1", 0, 0)
