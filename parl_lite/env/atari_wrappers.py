"""PARL's ``parl.env.atari_wrappers``: DeepMind-style Atari preprocessing with the old gym interface.

    import gymnasium as gym
    from parl_lite.env.atari_wrappers import wrap_deepmind, MonitorEnv, get_wrapper_by_cls

    env = wrap_deepmind(gym.make("PongNoFrameskip-v4"), dim=84, obs_format="NCHW")
    obs = env.reset()                            # uint8 [4, 84, 84]: the last 4 frames, grey, 84 x 84
    obs, reward, done, info = env.step(action)   # reward clipped to its sign; done at each life lost
    get_wrapper_by_cls(env, MonitorEnv).get_episode_rewards()   # raw returns of whole games

Importing this module registers ale-py's Atari environments with gymnasium (``PongNoFrameskip-v4``,
``ALE/Pong-v5``, ...), so ``gym.make`` finds them afterwards, in remote actors too. It needs the
``atari`` extra (ale-py, which ships the ROMs, and opencv).

The wrappers are PARL's (themselves from RLlib and OpenAI Baselines), in PARL's order, each on the
old gym interface of the one below; ``MaxAndSkipEnv`` and ``FrameStack`` are gymnasium's
``MaxAndSkipObservation`` and ``FrameStackObservation`` (:mod:`parl_lite.env.gymnasium_stage`).
"""
import time
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FrameStackObservation, MaxAndSkipObservation

from parl_lite.env.atari import INSTALL_HINT
from parl_lite.env.compat_wrappers import CompatWrapper
from parl_lite.env.forwarding import ForwardingWrapper
from parl_lite.env.gymnasium_stage import GymnasiumStage

_MISSING = "parl_lite.env.atari_wrappers needs {}: " + INSTALL_HINT
try:
    import ale_py
except ImportError as error:
    raise ImportError(_MISSING.format("ale-py")) from error
try:
    import cv2
except ImportError as error:
    raise ImportError(_MISSING.format("opencv (cv2)")) from error

gym.register_envs(ale_py)
cv2.ocl.setUseOpenCL(False)  # as PARL: no OpenCL context in every actor process

__all__ = [
    "wrap_deepmind", "MonitorEnv", "get_wrapper_by_cls", "NoopResetEnv", "ClipRewardEnv", "FireResetEnv",
    "EpisodicLifeEnv", "MaxAndSkipEnv", "WarpFrame", "FrameStack", "TestEnv",
]

_OBS_FORMATS = ("NHWC", "NCHW")


def get_wrapper_by_cls(env: gym.Env, cls: type) -> gym.Env | None:
    """The wrapper of class ``cls`` in ``env``'s stack (``env`` itself included), or None."""
    current: gym.Env = env
    while not isinstance(current, cls):
        if not isinstance(current, gym.Wrapper):
            return None
        current = current.env
    return current


class MonitorEnv(ForwardingWrapper):
    """Statistics of whole episodes, below the wrappers that change rewards or end episodes at a
    lost life: the raw return and the length (in the environment's own steps) of each.

    An episode is recorded at the step that ends it (``done``), where ``info["episode"]`` holds
    ``{"r": return, "l": length, "t": seconds since creation}``; an episode cut short by a
    ``reset()`` is not recorded. (PARL records each episode at the next ``reset()``, a cut one too.)

    Args:
        env: an environment with the old gym interface.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._current_reward = 0.0
        self._num_steps = 0
        self._total_steps = 0
        self._episode_rewards: list[float] = []
        self._episode_lengths: list[int] = []
        self._num_episodes = 0
        self._num_returned = 0
        self.tstart = time.time()

    def reset(self, **kwargs: Any) -> Any:
        """Start an episode (one in progress is dropped)."""
        obs = self.env.reset(**kwargs)
        self._current_reward, self._num_steps = 0.0, 0
        return obs

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:  # type: ignore[override]
        """One step; at the end of an episode, records it and sets ``info["episode"]``."""
        obs, reward, done, info = self.env.step(action)  # type: ignore[misc]  # an old-gym 4-tuple
        self._current_reward += float(reward)
        self._num_steps += 1
        self._total_steps += 1
        if done:
            self._episode_rewards.append(self._current_reward)
            self._episode_lengths.append(self._num_steps)
            self._num_episodes += 1
            info["episode"] = {"r": self._current_reward, "l": self._num_steps,
                               "t": round(time.time() - self.tstart, 6)}
            self._current_reward, self._num_steps = 0.0, 0
        return obs, reward, done, info

    def get_episode_rewards(self) -> list[float]:
        """The return of every episode finished so far."""
        return self._episode_rewards

    def get_episode_lengths(self) -> list[int]:
        """The length of every episode finished so far."""
        return self._episode_lengths

    def get_total_steps(self) -> int:
        """Steps taken since creation."""
        return self._total_steps

    def next_episode_results(self) -> Any:
        """Yields ``(return, length)`` of each episode finished since the previous call."""
        for i in range(self._num_returned, len(self._episode_rewards)):
            yield self._episode_rewards[i], self._episode_lengths[i]
        self._num_returned = len(self._episode_rewards)


class NoopResetEnv(ForwardingWrapper):
    """``reset()`` then takes a random number of no-op actions (action 0), from 1 to ``noop_max``
    (drawn from the environment's seeded generator; ``override_num_noops`` fixes the number), so
    that episodes start from varied states.

    Args:
        env: an Atari environment with the old gym interface, action 0 being ``NOOP``.
        noop_max: the most no-ops (at least 1).
    """

    def __init__(self, env: gym.Env, noop_max: int = 30) -> None:
        super().__init__(env)
        if isinstance(noop_max, bool) or not isinstance(noop_max, int | np.integer) or noop_max < 1:
            raise ValueError(f"NoopResetEnv: noop_max must be an int >= 1, got {noop_max!r}")
        _check_action_meaning(env, 0, "NOOP", "NoopResetEnv")
        self.noop_max = int(noop_max)
        self.override_num_noops: int | None = None
        self.noop_action = 0

    def reset(self, **kwargs: Any) -> Any:
        """Reset, then 1 to ``noop_max`` no-ops (an episode that ends during them starts again)."""
        obs = self.env.reset(**kwargs)
        noops = self.override_num_noops
        if noops is None:
            noops = int(self.unwrapped.np_random.integers(1, self.noop_max + 1))
        for _ in range(noops):
            obs, _, done, _ = self.env.step(self.noop_action)  # type: ignore[misc]  # an old-gym 4-tuple
            if done:
                obs = self.env.reset(**kwargs)
        return obs


class ClipRewardEnv(ForwardingWrapper):
    """Rewards replaced by their sign: -1, 0 or +1 (what the agent learns from; a
    :class:`MonitorEnv` below still records the raw returns)."""

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:  # type: ignore[override]
        obs, reward, done, info = self.env.step(action)  # type: ignore[misc]  # an old-gym 4-tuple
        return obs, self.reward(reward), done, info

    def reward(self, reward: float) -> float:
        """The sign of ``reward``."""
        return float(np.sign(reward))


class FireResetEnv(ForwardingWrapper):
    """``reset()`` then presses FIRE (action 1) and action 2, for games that wait for FIRE to start
    (Breakout) or to go on after a lost life.

    Args:
        env: an Atari environment with the old gym interface, action 1 being ``FIRE``.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        _check_action_meaning(env, 1, "FIRE", "FireResetEnv")
        meanings = _game(env).get_action_meanings()
        if len(meanings) < 3:
            raise ValueError(f"FireResetEnv needs at least 3 actions (it presses actions 1 and 2), got {meanings}")

    def reset(self, **kwargs: Any) -> Any:
        self.env.reset(**kwargs)
        obs = None
        for action in (1, 2):
            obs, _, done, _ = self.env.step(action)  # type: ignore[misc]  # an old-gym 4-tuple
            if done:
                obs = self.env.reset(**kwargs)
        return obs


class EpisodicLifeEnv(ForwardingWrapper):
    """A lost life ends the episode (``done``), but ``reset()`` starts a new game only after a real
    game over; after a lost life it takes one no-op step and play goes on (DeepMind's DQN: it
    helps value estimation, and every state stays reachable).

    Args:
        env: an Atari environment with the old gym interface.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:  # type: ignore[override]
        obs, reward, done, info = self.env.step(action)  # type: ignore[misc]  # an old-gym 4-tuple
        self.was_real_done = done
        lives = _game(self.env).ale.lives()
        if 0 < lives < self.lives:  # lives > 0: some games sit at 0 lives for a few frames before the game over
            done = True
        self.lives = lives
        return obs, reward, done, info

    def reset(self, **kwargs: Any) -> Any:
        """A new game after a game over; otherwise one no-op step from the lost-life state."""
        if self.was_real_done:
            obs = self.env.reset(**kwargs)
        else:
            obs, _, _, _ = self.env.step(0)  # type: ignore[misc]  # an old-gym 4-tuple
        self.lives = _game(self.env).ale.lives()
        return obs


class MaxAndSkipEnv(GymnasiumStage):
    """Each action repeated ``skip`` times; the rewards summed, the observation the pixel-wise
    maximum of the last two frames (Atari sprites flicker). Gymnasium's ``MaxAndSkipObservation``.

    Args:
        env: an environment with the old gym interface that skips no frames itself
            (``*NoFrameskip-v4``).
        skip: frames per action (at least 2).
    """

    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        super().__init__(env, lambda view: MaxAndSkipObservation(view, skip=skip))


class WarpFrame(ForwardingWrapper):
    """RGB frames turned grey and resized to ``dim`` x ``dim`` uint8 (OpenCV, as PARL: the same
    pixels).

    Args:
        env: an environment with the old gym interface and RGB frames ``[H, W, 3]``.
        dim: the side of the resized frame.
    """

    def __init__(self, env: gym.Env, dim: int) -> None:
        super().__init__(env)
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
            raise ValueError(f"WarpFrame: dim must be a positive int, got {dim!r}")
        shape = env.observation_space.shape
        if shape is None or len(shape) != 3 or shape[2] != 3:
            raise ValueError(f"WarpFrame needs RGB frames of shape [H, W, 3], got {env.observation_space}")
        self.width = self.height = int(dim)
        self.observation_space = gym.spaces.Box(low=0, high=255, shape=(self.height, self.width), dtype=np.uint8)

    def reset(self, **kwargs: Any) -> Any:
        return self.observation(self.env.reset(**kwargs))  # type: ignore[arg-type]  # old gym: the observation

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:  # type: ignore[override]
        obs, reward, done, info = self.env.step(action)  # type: ignore[misc]  # an old-gym 4-tuple
        return self.observation(obs), reward, done, info

    def observation(self, frame: np.ndarray) -> np.ndarray:
        """The grey, resized frame."""
        grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        return cv2.resize(grey, (self.width, self.height), interpolation=cv2.INTER_AREA)


class FrameStack(GymnasiumStage):
    """The last ``k`` frames stacked: ``[H, W, k]`` (``"NHWC"``) or ``[k, H, W]`` (``"NCHW"``); after
    ``reset()`` every slot holds the first frame. Gymnasium's ``FrameStackObservation``.

    Args:
        env: an environment with the old gym interface and 2-D frames ``[H, W]``.
        k: frames stacked.
        obs_format: ``"NHWC"`` (channels last) or ``"NCHW"`` (channels first, paddle's convolutions).
    """

    def __init__(self, env: gym.Env, k: int, obs_format: str = "NHWC") -> None:
        if obs_format not in _OBS_FORMATS:
            raise ValueError(f"FrameStack: obs_format must be 'NHWC' or 'NCHW', got {obs_format!r}")
        shape = env.observation_space.shape
        if shape is None or len(shape) != 2:
            raise ValueError(f"FrameStack needs 2-D frames [H, W] (e.g. from WarpFrame), got {env.observation_space}")
        super().__init__(env, lambda view: FrameStackObservation(view, k))
        self.k = k
        self.obs_format = obs_format
        if obs_format == "NHWC":
            self.observation_space = gym.spaces.Box(low=0, high=255, shape=(shape[0], shape[1], k),
                                                    dtype=cast(Any, env.observation_space.dtype))

    def observation(self, obs: np.ndarray) -> np.ndarray:
        """``[k, H, W]`` as given by gymnasium, or ``[H, W, k]``."""
        return obs if self.obs_format == "NCHW" else np.ascontiguousarray(np.moveaxis(obs, 0, -1))


class TestEnv(ForwardingWrapper):
    """An evaluation environment: after every ``test_episodes`` whole games, ``get_real_done()`` is
    True from the ``reset()`` that follows the last of them, and ``get_eval_rewards()`` gives their
    raw returns (from the :class:`MonitorEnv` below).

    Args:
        env: a :func:`wrap_deepmind` stack (any stack with a :class:`MonitorEnv`).
        test_episodes: games per evaluation.
    """

    def __init__(self, env: gym.Env, test_episodes: int = 3) -> None:
        super().__init__(env)
        if isinstance(test_episodes, bool) or not isinstance(test_episodes, int | np.integer) or test_episodes < 1:
            raise ValueError(f"TestEnv: test_episodes must be an int >= 1, got {test_episodes!r}")
        monitor = get_wrapper_by_cls(env, MonitorEnv)
        if not isinstance(monitor, MonitorEnv):
            raise ValueError("TestEnv needs a MonitorEnv in the stack below it (wrap_deepmind puts one there)")
        self._monitor = monitor
        self._test_episodes = int(test_episodes)
        self._was_real_done = False
        self._eval_rewards: list[float] | None = None
        self._end_episode = len(monitor.get_episode_rewards()) + self._test_episodes

    def reset(self, **kwargs: Any) -> Any:
        obs = self.env.reset(**kwargs)
        finished = len(self._monitor.get_episode_rewards())
        if finished >= self._end_episode:
            self._was_real_done = True
            self._eval_rewards = self._monitor.get_episode_rewards()[-self._test_episodes:]
            self._end_episode = finished + self._test_episodes
        else:
            self._was_real_done = False
            self._eval_rewards = None
        return obs

    def get_eval_rewards(self) -> list[float] | None:
        """The raw returns of the evaluation just finished, or None while one is in progress."""
        return self._eval_rewards

    def get_real_done(self) -> bool:
        """Whether the last ``reset()`` came after the evaluation's last game."""
        return self._was_real_done


def wrap_deepmind(env: gym.Env, dim: int = 84, framestack: bool = True, obs_format: str = "NHWC",
                  test: bool = False, test_episodes: int = 3) -> gym.Env:
    """DeepMind's Atari preprocessing, in PARL's order, on the old gym interface: ``CompatWrapper``,
    ``MonitorEnv``, ``NoopResetEnv(noop_max=30)``, ``MaxAndSkipEnv(skip=4)`` (when the environment
    skips no frames itself), ``EpisodicLifeEnv``, ``FireResetEnv`` (games with FIRE),
    ``WarpFrame(dim)``, ``ClipRewardEnv``, ``FrameStack(4)`` and, with ``test``, ``TestEnv``.

    Args:
        env: a gymnasium Atari environment (``gym.make("PongNoFrameskip-v4")``).
        dim: side of the grey frames.
        framestack: stack the last 4 frames.
        obs_format: ``"NHWC"`` or ``"NCHW"`` for the stacked frames.
        test: an evaluation environment (:class:`TestEnv`).
        test_episodes: games per evaluation, with ``test``.

    Raises:
        TypeError: ``env`` is not an Atari environment of ale-py, or has a ``CompatWrapper`` already.
        ValueError: ``obs_format``, ``dim`` or ``test_episodes`` is out of range.
    """
    game = getattr(env, "unwrapped", None)
    if not isinstance(game, ale_py.AtariEnv):
        raise TypeError(f"wrap_deepmind needs an Atari environment of ale-py (gym.make('PongNoFrameskip-v4')), "
                        f"got {env}")
    if get_wrapper_by_cls(env, CompatWrapper) is not None:
        raise TypeError(f"wrap_deepmind takes the gymnasium environment itself and adds the CompatWrapper; got "
                        f"one already wrapped: {env}")
    if obs_format not in _OBS_FORMATS:
        raise ValueError(f"wrap_deepmind: obs_format must be 'NHWC' or 'NCHW', got {obs_format!r}")
    skips_frames = game._frameskip != 1
    wrapped: gym.Env = NoopResetEnv(MonitorEnv(CompatWrapper(env)), noop_max=30)
    if not skips_frames:
        wrapped = MaxAndSkipEnv(wrapped, skip=4)
    wrapped = EpisodicLifeEnv(wrapped)
    if "FIRE" in game.get_action_meanings():
        wrapped = FireResetEnv(wrapped)
    wrapped = ClipRewardEnv(WarpFrame(wrapped, dim))
    if framestack:
        wrapped = FrameStack(wrapped, 4, obs_format)
    if test:
        wrapped = TestEnv(wrapped, test_episodes)
    return wrapped


def _game(env: gym.Env) -> Any:
    """The Atari game under ``env``'s wrappers (ale-py's ``AtariEnv``: ``ale``, ``get_action_meanings``)."""
    return env.unwrapped


def _check_action_meaning(env: gym.Env, action: int, meaning: str, wrapper: str) -> None:
    meanings = _game(env).get_action_meanings() if hasattr(env.unwrapped, "get_action_meanings") else None
    if meanings is None or len(meanings) <= action or meanings[action] != meaning:
        raise ValueError(f"{wrapper} needs an Atari environment whose action {action} is {meaning}, got action "
                         f"meanings {meanings}")
