"""PARL's ``parl.env.mujoco_wrappers``: running normalisation of observations and rewards for
continuous control (PARL's PPO example).

    env = wrap_rms(gymnasium.make("Pendulum-v1"), gamma=0.99)      # training
    eval_env = wrap_rms(gymnasium.make("Pendulum-v1"), gamma=None, test=True)
    eval_env.set_ob_rms(get_ob_rms(env))   # evaluate with the training statistics

``info["episode"]`` holds ``{"r": return, "l": length, "t": seconds}`` of the raw rewards when an
episode ends (gymnasium's ``RecordEpisodeStatistics``).
"""
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import RecordEpisodeStatistics
from gymnasium.wrappers.utils import RunningMeanStd

from parl_lite.env.compat_wrappers import CompatWrapper
from parl_lite.env.forwarding import ForwardingWrapper

__all__ = ["VecNormalizeEnv", "wrap_rms", "get_ob_rms", "RunningMeanStd"]


class VecNormalizeEnv(ForwardingWrapper):
    """Observations standardised by their running mean and variance, rewards divided by the running
    standard deviation of the discounted return, both clipped; on an old-gym (4-tuple) environment.

    Args:
        env: an environment with the old gym interface (e.g. a :class:`CompatWrapper`).
        ob: normalise observations.
        ret: normalise rewards.
        clipob: observations are clipped to [-clipob, clipob] after normalising.
        cliprew: rewards are clipped to [-cliprew, cliprew] after normalising.
        gamma: discount of the return whose variance scales the rewards.
        epsilon: added to the variances.
    """

    def __init__(self, env: gym.Env, ob: bool = True, ret: bool = True, clipob: float = 10.0,
                 cliprew: float = 10.0, gamma: float = 0.99, epsilon: float = 1e-8) -> None:
        super().__init__(env)
        self.ob_rms: RunningMeanStd | None = RunningMeanStd(shape=env.observation_space.shape) if ob else None
        self.ret_rms = RunningMeanStd(shape=()) if ret else None
        self.clipob, self.cliprew, self.gamma, self.epsilon = clipob, cliprew, gamma, epsilon
        self.ret = np.zeros(1)
        self.training = True

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:  # type: ignore[override]
        obs, reward, done, info = self.env.step(action)  # type: ignore[misc]  # an old-gym 4-tuple
        self.ret = self.ret * self.gamma + reward
        if self.ret_rms is not None:
            self.ret_rms.update(self.ret)
            reward = float(np.clip(reward / np.sqrt(self.ret_rms.var + self.epsilon), -self.cliprew, self.cliprew))
        if done:
            self.ret = np.zeros(1)
        return self._normalized(obs), reward, done, info

    def reset(self, **kwargs: Any) -> Any:
        self.ret = np.zeros(1)
        return self._normalized(self.env.reset(**kwargs))

    def _normalized(self, obs: Any) -> Any:
        if self.ob_rms is None:
            return obs
        obs = np.asarray(obs)
        if self.training:
            self.ob_rms.update(obs[None])
        return np.clip((obs - self.ob_rms.mean) / np.sqrt(self.ob_rms.var + self.epsilon), -self.clipob, self.clipob)

    def get_ob_rms(self) -> RunningMeanStd | None:
        """The observation statistics (None: observations are not normalised)."""
        return self.ob_rms

    def set_ob_rms(self, ob_rms: RunningMeanStd | None) -> None:
        """Use these statistics (e.g. a training environment's, shared, in an evaluation one)."""
        self.ob_rms = ob_rms

    def train(self) -> None:
        """Update the observation statistics with each observation (the default)."""
        self.training = True

    def eval(self) -> None:
        """Keep the observation statistics fixed."""
        self.training = False


def get_ob_rms(env: gym.Env) -> RunningMeanStd | None:
    """The observation statistics of the :class:`VecNormalizeEnv` in ``env``'s wrappers, or None."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, VecNormalizeEnv):
            return env.get_ob_rms()
        env = env.env
    return None


def wrap_rms(env: gym.Env, gamma: float | None, test: bool = False,
             ob_rms: RunningMeanStd | None = None) -> VecNormalizeEnv:
    """``env`` with episode statistics in ``info["episode"]``, the old gym interface and running
    normalisation (PARL's order: statistics of the raw rewards, then normalisation).

    Args:
        env: a gymnasium environment.
        gamma: discount of the return that scales the rewards (unused when ``test``).
        test: evaluation: rewards are not normalised and observations use ``ob_rms``, fixed.
        ob_rms: the observation statistics to evaluate with (e.g. :func:`get_ob_rms` of the
            training environment); None leaves observations as they are until set.
    """
    wrapped = CompatWrapper(RecordEpisodeStatistics(env))
    if test:
        normalized = VecNormalizeEnv(wrapped, ret=False)
        normalized.eval()
        normalized.set_ob_rms(ob_rms)
        return normalized
    if gamma is None:
        raise ValueError("wrap_rms: gamma is None; give the discount that scales the rewards (or test=True)")
    return VecNormalizeEnv(wrapped, gamma=gamma)
