"""Atari games for the training loops: DeepMind's preprocessing, stepped in C++ by ``ale-py``.

An ALE id (``PongNoFrameskip-v4``, PARL's and the RL Zoo's spelling, or ``ALE/Pong-v5``) becomes
an :class:`AtariVectorEnv`: ``ale_py.vector_env.AtariVectorEnv`` (the games, the frame skip with
max-pooling, the 84×84 grey frames and the stack of 4 made in C++, several games in one call)
behind the interface of gymnasium's vector environments with same-step autoreset, as
:func:`parl_lite.utils.envs.make_vector_env` gives for any other id. Observations are ``uint8``
``[N, 4, 84, 84]``, channel first; the frames before an episode's first are zeros.

What the learner sees (:class:`AtariSettings`, DeepMind's and the RL Zoo's ``AtariWrapper``
values): up to 30 no-ops and FIRE at each reset, the loss of a life as a termination (the game
goes on), rewards clipped to their sign. The games themselves are reported as gymnasium's
``RecordEpisodeStatistics`` does, in ``info["episode"]`` (``r``: the unclipped return of a whole
game, ``l``: its agent steps) where ``info["_episode"]`` is true (in every step's ``info``). An evaluation environment
(``evaluation=True``) ends episodes at game over only and keeps the rewards as the game gives them.

The id's own settings are kept: ``-v5`` ids repeat the previous action with probability 0.25
(sticky actions) and skip 4 frames, ``NoFrameskip`` ids are stepped every frame, so the skip of 4
is ours, as in PARL's ``wrap_deepmind``.
"""
import importlib.util
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["AtariSettings", "AtariVectorEnv", "atari_game", "is_atari", "INSTALL_HINT"]

INSTALL_HINT = ("pip install '.[atari]' from the project's folder (the atari extra: ale-py, the emulator with the "
                "Atari ROMs, and opencv-python-headless)")
_ENTRY_POINT = "ale_py.env:AtariEnv"


@dataclass(frozen=True)
class AtariSettings:
    """DeepMind's Atari preprocessing (Mnih et al. 2015; SB3's ``AtariWrapper`` defaults).

    Attributes:
        frame_skip: frames per agent step (the action repeated, the rewards summed, the last two
            frames max-pooled) for ``NoFrameskip`` ids; a ``-v5`` id's own skip is used.
        screen_size: observations are ``screen_size`` × ``screen_size`` grey frames.
        stack: frames per observation.
        noop_max: at most this many no-ops at each reset (a random number of them).
        threads: C++ threads stepping the games of one environment (1: the calling thread's
            core only; a process of the pool or of a cluster node has one core).
    """

    frame_skip: int = 4
    screen_size: int = 84
    stack: int = 4
    noop_max: int = 30
    threads: int = 1

    @classmethod
    def of(cls, options: dict[str, Any]) -> "AtariSettings":
        """These settings with ``options`` (field name -> value) in place of the defaults.

        Raises:
            TypeError: an option is not a field (the message names it and the fields).
            ValueError: a value is not a positive integer (named).
        """
        names = {field.name for field in fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(f"unknown Atari option(s) {unknown}: the options are {sorted(names)}")
        for name, value in options.items():
            least, kind = (0, "a non-negative") if name == "noop_max" else (1, "a positive")
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"Atari option {name} must be {kind} integer, got {value!r}")
        return cls(**options)


@dataclass(frozen=True)
class AtariGame:
    """An ALE id's game and the settings its registration gives."""

    env_id: str
    game: str
    frame_skip: int  # frames per step the id itself takes (1 for NoFrameskip ids)
    repeat_action_probability: float
    full_action_space: bool
    max_frames: int


def atari_game(env_id: str) -> AtariGame | None:
    """The ALE game ``env_id`` names (its ids are registered with gymnasium on first use), or None
    for an id that is not an ALE game.

    Raises:
        gymnasium.error.Error: ``env_id`` looks like an ALE id (``ALE/...``, ``...NoFrameskip-v4``)
            and ale-py is not installed (the message says how to install it).
    """
    spec = _spec(env_id)
    if spec is None or spec.entry_point != _ENTRY_POINT:
        return None
    kwargs = spec.kwargs
    frame_skip = kwargs.get("frameskip", 1)
    if not isinstance(frame_skip, int):  # the -v0/-v4 ids without NoFrameskip/Deterministic: 2 to 4 at random
        raise gym.error.Error(f"{env_id} skips a random number of frames per step; parl_lite's Atari "
                              f"preprocessing needs a fixed skip: use {kwargs.get('game', 'the game')}'s "
                              "NoFrameskip-v4 or ALE/...-v5 id")
    return AtariGame(env_id, str(kwargs["game"]), frame_skip, float(kwargs.get("repeat_action_probability", 0.0)),
                     bool(kwargs.get("full_action_space", False)),
                     int(kwargs.get("max_num_frames_per_episode", 108_000)))


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` is an ALE game (see :func:`atari_game`, whose errors it raises)."""
    return atari_game(env_id) is not None


def _spec(env_id: str) -> Any:
    """gymnasium's spec of ``env_id``, registering ale-py's ids first if it is not known yet."""
    try:
        return gym.spec(env_id)
    except gym.error.Error:
        pass
    if importlib.util.find_spec("ale_py") is None:
        if env_id.startswith("ALE/") or "NoFrameskip" in env_id:
            raise gym.error.Error(f"{env_id} is an Atari game: {INSTALL_HINT}") from None
        return None
    import ale_py

    gym.register_envs(ale_py)
    try:
        return gym.spec(env_id)
    except gym.error.Error:
        return None


class AtariVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` copies of an Atari game with DeepMind's preprocessing (see the module docstring),
    with gymnasium's same-step autoreset: after an episode ends, ``step`` returns the next
    episode's first observation and puts the last one in ``info["final_obs"]`` (``info["_final_obs"]``
    marks the copies).

    Args:
        game: the ALE game (:func:`atari_game`).
        num_envs: copies stepped together.
        settings: the preprocessing.
        evaluation: end episodes at game over only and keep the game's rewards (for evaluation);
            False: the loss of a life terminates (the game goes on) and rewards are clipped.
    """

    def __init__(self, game: AtariGame, num_envs: int, settings: AtariSettings = AtariSettings(),
                 evaluation: bool = False) -> None:
        from ale_py.vector_env import AtariVectorEnv as CppAtariVectorEnv

        if num_envs <= 0:
            raise ValueError(f"num_envs must be positive, got {num_envs}")
        self.game, self.settings, self.evaluation = game, settings, evaluation
        skip = settings.frame_skip if game.frame_skip == 1 else game.frame_skip
        self._env = CppAtariVectorEnv(
            game.game, num_envs, num_threads=settings.threads, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
            repeat_action_probability=game.repeat_action_probability, full_action_space=game.full_action_space,
            max_num_frames_per_episode=game.max_frames, img_height=settings.screen_size,
            img_width=settings.screen_size, stack_num=settings.stack, frameskip=skip, maxpool=True,
            noop_max=settings.noop_max, episodic_life=False, life_loss_info=not evaluation, reward_clipping=False,
            use_fire_reset=True)
        self.num_envs = num_envs
        self.single_observation_space = self._env.single_observation_space
        self.single_action_space = self._env.single_action_space
        self.observation_space = self._env.observation_space
        self.action_space = self._env.action_space
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self.spec = None
        self._returns = np.zeros(num_envs)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._episode_frames = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: int | list[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every copy (copy ``i`` with ``seed + i``, or ``seed[i]``)."""
        seeds = np.asarray(seed, dtype=np.int64) if isinstance(seed, (list, tuple)) else seed
        if seeds is not None:
            self._env.action_space.seed(int(np.ravel(seeds)[0]))
            self.action_space = self._env.action_space
        obs, info = self._env.reset(seed=seeds, options=options)
        self._returns[:] = 0.0
        self._lengths[:] = 0
        self._episode_frames[:] = info["episode_frame_number"]
        return obs, info

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One agent step of every copy: ``(obs, rewards, terminated, truncated, info)``."""
        obs, rewards, terminated, truncated, ale_info = self._env.step(np.asarray(actions, dtype=np.int64))
        info: dict[str, Any] = dict(ale_info)
        rewards = np.asarray(rewards, dtype=np.float64)
        self._returns += rewards
        self._lengths += 1
        # a new game started in this step (same-step autoreset) where its frame count went back
        frames = info["episode_frame_number"]
        game_over = (terminated | truncated) & (frames < self._episode_frames)
        self._episode_frames[:] = frames
        info["episode"] = {"r": np.where(game_over, self._returns, 0.0), "l": np.where(game_over, self._lengths, 0)}
        info["_episode"] = game_over
        self._returns[game_over] = 0.0
        self._lengths[game_over] = 0
        info["_final_obs"] = game_over  # a lost life goes on: its next observation is the one returned
        if not self.evaluation:
            rewards = np.sign(rewards)
        return obs, rewards, terminated, truncated, info

    def close(self, **kwargs: Any) -> None:
        self._env.close()
