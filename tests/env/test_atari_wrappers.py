"""parl_lite.env.atari_wrappers (PARL's Atari preprocessing) on the real ROMs ale-py ships: Pong, and
Breakout where lives matter (Pong has none), SpaceInvaders where rewards exceed 1, Asterix for a game
with lives and no FIRE."""
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ale_py", reason="the Atari wrappers need the atari extra: pip install '.[atari]'")
cv2 = pytest.importorskip("cv2", reason="the Atari wrappers need the atari extra: pip install '.[atari]'")

from parl_lite.env import CompatWrapper, atari_wrappers  # noqa: E402
from parl_lite.env.atari_wrappers import (ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, FrameStack,  # noqa: E402
                                          MaxAndSkipEnv, MonitorEnv, NoopResetEnv, WarpFrame, get_wrapper_by_cls,
                                          wrap_deepmind)

PONG, BREAKOUT, SPACE_INVADERS = "PongNoFrameskip-v4", "BreakoutNoFrameskip-v4", "SpaceInvadersNoFrameskip-v4"
ASTERIX = "AsterixNoFrameskip-v4"  # 3 lives, no FIRE action: nothing steps between a game's reset and the next


def _old_gym(name: str, seed: int = 0) -> CompatWrapper:
    env = CompatWrapper(gym.make(name))
    env.seed(seed)
    return env


def _play_game(env: gym.Env, rng: np.random.Generator) -> list:
    """Random actions from a reset until a step returns done; the steps' ``(reward, done, info)``."""
    env.reset()
    steps = []
    done = False
    while not done:
        _, reward, done, info = env.step(int(rng.integers(env.action_space.n)))
        steps.append((reward, done, info))
    return steps


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_importing_the_module_registers_the_ale_environments_with_gymnasium():
    result = _run("""
        import gymnasium as gym
        import parl_lite.env.atari_wrappers
        for name in ("PongNoFrameskip-v4", "ALE/Pong-v5"):
            print(name, gym.make(name).unwrapped.get_action_meanings()[:2])
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["PongNoFrameskip-v4 ['NOOP', 'FIRE']", "ALE/Pong-v5 ['NOOP', 'FIRE']"]
    without = _run("import gymnasium as gym; gym.make('PongNoFrameskip-v4')")
    assert without.returncode != 0 and "PongNoFrameskip" in without.stderr  # gymnasium alone does not know them


def test_without_ale_py_the_import_error_says_which_extra_to_install():
    result = _run("""
        import sys
        sys.modules["ale_py"] = None  # as if ale-py were not installed
        import parl_lite.env.atari_wrappers
    """)
    assert result.returncode != 0
    assert "ImportError: parl_lite.env.atari_wrappers needs ale-py" in result.stderr
    assert "pip install '.[atari]'" in result.stderr


@pytest.mark.parametrize("obs_format, dim, shape", [("NCHW", 84, (4, 84, 84)), ("NHWC", 84, (84, 84, 4)),
                                                    ("NCHW", 42, (4, 42, 42))])
def test_wrap_deepmind_stacks_four_grey_uint8_frames_in_the_format_asked(obs_format, dim, shape):
    env = wrap_deepmind(gym.make(PONG), dim=dim, obs_format=obs_format)
    assert env.observation_space.shape == shape and env.observation_space.dtype == np.uint8
    env.seed(0)
    first = env.reset()
    assert first.shape == shape and first.dtype == np.uint8 and first.flags.c_contiguous
    channels = first if obs_format == "NCHW" else np.moveaxis(first, -1, 0)
    assert all(np.array_equal(channels[0], frame) for frame in channels)  # reset fills every slot
    second, reward, done, info = env.step(0)
    after = second if obs_format == "NCHW" else np.moveaxis(second, -1, 0)
    assert np.array_equal(after[:3], channels[1:])  # the oldest frame leaves, the new one comes last
    assert env.observation_space.contains(second)
    assert isinstance(reward, float) and done is False and isinstance(info, dict)


def test_wrap_deepmind_formats_hold_the_same_frames_and_the_seed_reaches_the_game():
    nchw, nhwc = (wrap_deepmind(gym.make(PONG), obs_format=form) for form in ("NCHW", "NHWC"))
    nchw.seed(3)
    nhwc.seed(3)  # forwarded down the stack to the CompatWrapper
    assert np.array_equal(nchw.reset(), np.moveaxis(nhwc.reset(), -1, 0))
    for action in [2, 3, 2, 2, 5, 0, 4, 1] * 5:
        assert np.array_equal(nchw.step(action)[0], np.moveaxis(nhwc.step(action)[0], -1, 0))
    single = wrap_deepmind(gym.make(PONG), framestack=False)
    assert single.observation_space.shape == (84, 84) and single.reset().shape == (84, 84)


def test_wrap_deepmind_stacks_pongs_wrappers_in_parls_order():
    env = wrap_deepmind(gym.make(PONG), test=True)
    order = []
    while isinstance(env, gym.Wrapper):
        order.append(type(env).__name__)
        env = env.env
    assert order[:10] == ["TestEnv", "FrameStack", "ClipRewardEnv", "WarpFrame", "FireResetEnv", "EpisodicLifeEnv",
                          "MaxAndSkipEnv", "NoopResetEnv", "MonitorEnv", "CompatWrapper"]
    v5 = wrap_deepmind(gym.make("ALE/Pong-v5"))  # skips 4 frames itself: no MaxAndSkipEnv
    assert get_wrapper_by_cls(v5, MaxAndSkipEnv) is None and get_wrapper_by_cls(v5, MonitorEnv) is not None


def test_max_and_skip_repeats_the_action_sums_rewards_and_maxes_the_last_two_frames():
    skipped, raw = MaxAndSkipEnv(_old_gym(PONG, seed=1), skip=4), _old_gym(PONG, seed=1)
    skipped.reset()
    raw.reset()
    rng = np.random.default_rng(0)
    for _ in range(300):
        action = int(rng.integers(6))
        frames, total = [], 0.0
        for _ in range(4):
            frame, reward, _, _ = raw.step(action)
            frames.append(frame)
            total += reward
        obs, reward, done, _ = skipped.step(action)
        assert np.array_equal(obs, np.maximum(frames[-2], frames[-1])) and reward == total and not done
    assert skipped.unwrapped.ale.getEpisodeFrameNumber() == 1200


def test_warp_frame_is_parls_opencv_grey_and_area_resize():
    env = WarpFrame(_old_gym(PONG), dim=84)
    raw = _old_gym(PONG)
    warped, frame = env.reset(), raw.reset()
    expected = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), (84, 84), interpolation=cv2.INTER_AREA)
    assert warped.dtype == np.uint8 and np.array_equal(warped, expected)


def test_noop_reset_takes_1_to_30_seeded_noops_or_the_number_fixed():
    frames = []
    for seed in (7, 7, 8, 9, 10):
        env = NoopResetEnv(_old_gym(PONG, seed=seed), noop_max=30)
        env.reset()
        frames.append(env.unwrapped.ale.getEpisodeFrameNumber())
    assert all(1 <= n <= 30 for n in frames) and frames[0] == frames[1]  # the game's seeded generator draws it
    assert len(set(frames)) > 1
    fixed = NoopResetEnv(_old_gym(PONG), noop_max=30)
    fixed.override_num_noops = 7
    fixed.reset()
    assert fixed.unwrapped.ale.getEpisodeFrameNumber() == 7


def test_fire_reset_launches_breakouts_ball():
    def lives_lost_in(env: gym.Env, steps: int) -> int:
        env.reset()
        for _ in range(steps):
            env.step(0)  # NOOP: the ball falls only if it was launched
        return 5 - env.unwrapped.ale.lives()

    fired = FireResetEnv(_old_gym(BREAKOUT))
    assert lives_lost_in(fired, 200) >= 1 and fired.unwrapped.ale.getEpisodeFrameNumber() == 202
    assert lives_lost_in(_old_gym(BREAKOUT), 200) == 0


def test_episodic_life_ends_the_episode_at_a_lost_life_but_resets_only_after_game_over():
    env = EpisodicLifeEnv(MonitorEnv(_old_gym(BREAKOUT)))
    monitor = get_wrapper_by_cls(env, MonitorEnv)
    env.reset()
    assert env.lives == 5
    episodes, frame = 0, 0
    while True:
        _, _, done, _ = env.step(1)  # FIRE: launch the ball again after each lost life
        if done:
            episodes += 1
            if env.was_real_done:
                break
            env.reset()  # one NOOP step: the game goes on with a life less
            assert env.lives == 5 - episodes and env.unwrapped.ale.getEpisodeFrameNumber() > frame
            frame = env.unwrapped.ale.getEpisodeFrameNumber()
    assert episodes == 5 and env.unwrapped.ale.lives() == 0
    assert len(monitor.get_episode_rewards()) == 1  # one game, five lives
    env.reset()  # after the game over: a new game
    assert env.lives == 5 and env.unwrapped.ale.getEpisodeFrameNumber() == 0


def test_clip_reward_gives_the_sign_while_monitor_env_keeps_the_raw_rewards():
    clipped, raw = ClipRewardEnv(MonitorEnv(_old_gym(SPACE_INVADERS, seed=2))), _old_gym(SPACE_INVADERS, seed=2)
    clipped.reset()
    raw.reset()
    rng = np.random.default_rng(1)
    raw_rewards = []
    for _ in range(600):
        action = int(rng.integers(6))
        _, raw_reward, _, _ = raw.step(action)
        _, reward, _, _ = clipped.step(action)
        assert reward == np.sign(raw_reward) and isinstance(reward, float)
        raw_rewards.append(raw_reward)
    assert max(raw_rewards) > 1  # some alien was worth more than 1
    assert get_wrapper_by_cls(clipped, MonitorEnv)._current_reward == sum(raw_rewards)


def test_monitor_env_records_whole_games_with_raw_returns_and_frame_counts():
    env = wrap_deepmind(gym.make(PONG))
    env.seed(4)
    monitor = get_wrapper_by_cls(env, MonitorEnv)
    steps = _play_game(env, np.random.default_rng(4))  # Pong has no lives: the episode is the game
    rewards = [reward for reward, _, _ in steps]
    assert "episode" not in steps[-2][2]
    episode = steps[-1][2]["episode"]
    assert episode["r"] == sum(rewards) and -21 <= sum(rewards) < 21 and min(rewards) == -1
    assert episode["l"] == env.unwrapped.ale.getEpisodeFrameNumber()  # the game's frames, noops and FIRE included
    assert monitor.get_episode_rewards() == [episode["r"]] and monitor.get_episode_lengths() == [episode["l"]]
    assert monitor.get_total_steps() == episode["l"]
    assert list(monitor.next_episode_results()) == [(episode["r"], episode["l"])]
    assert list(monitor.next_episode_results()) == []  # each episode is given once
    env.reset()
    env.step(0)
    env.reset()  # a game cut short is not an episode
    assert monitor.get_episode_rewards() == [episode["r"]]


def test_test_env_reports_each_evaluation_of_whole_games_only():
    """PARL's DQN_variant evaluation loop, twice. Each evaluation starts with a ``reset()`` right
    after the previous one's last: PARL's MonitorEnv records that cut game (a return of 0) and the
    second evaluation has one real game in two."""
    env = wrap_deepmind(gym.make(ASTERIX), obs_format="NCHW", test=True, test_episodes=2)
    env.seed(5)
    monitor = get_wrapper_by_cls(env, MonitorEnv)
    rng = np.random.default_rng(5)
    evaluations = []
    for _ in range(2):
        env.reset()
        resets = 0
        while not env.get_real_done():
            assert env.get_eval_rewards() is None
            _, _, done, _ = env.step(int(rng.integers(env.action_space.n)))
            if done:
                env.reset()
                resets += 1
        assert resets >= 6  # 2 games of 3 lives each
        evaluations.append(env.get_eval_rewards())
    games = monitor.get_episode_rewards()
    assert len(games) == 4 and evaluations == [games[:2], games[2:]]


def test_bad_arguments_are_refused_with_their_name():
    with pytest.raises(TypeError, match="wrap_deepmind needs an Atari environment"):
        wrap_deepmind(gym.make("CartPole-v1"))
    with pytest.raises(TypeError, match="adds the CompatWrapper; got one already wrapped"):
        wrap_deepmind(CompatWrapper(gym.make(PONG)))
    with pytest.raises(ValueError, match="obs_format must be 'NHWC' or 'NCHW', got 'CHW'"):
        wrap_deepmind(gym.make(PONG), obs_format="CHW")
    with pytest.raises(ValueError, match="dim must be a positive int"):
        wrap_deepmind(gym.make(PONG), dim=0)
    with pytest.raises(ValueError, match="test_episodes must be an int >= 1"):
        wrap_deepmind(gym.make(PONG), test=True, test_episodes=0)
    with pytest.raises(ValueError, match="FrameStack needs 2-D frames"):
        FrameStack(_old_gym(PONG), 4)
    with pytest.raises(ValueError, match="TestEnv needs a MonitorEnv"):
        atari_wrappers.TestEnv(WarpFrame(_old_gym(PONG), 84))  # (imported as TestEnv, pytest would collect it)
    with pytest.raises(ValueError, match=r"FireResetEnv needs an Atari environment whose action 1 is FIRE, got "
                                         r"action meanings \['NOOP', 'UP', 'DOWN'\]"):
        FireResetEnv(_old_gym("FreewayNoFrameskip-v4"))
    with pytest.raises(ValueError, match="NoopResetEnv needs an Atari environment whose action 0 is NOOP"):
        NoopResetEnv(_old_gym("CartPole-v1"))
