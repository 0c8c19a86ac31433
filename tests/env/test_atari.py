"""Atari for the training loops: the C++-stepped preprocessed games (parl_lite.env.atari), the replay
memory that keeps each frame once (parl_lite.utils.frame_replay), the convolutional models, and the
DQN, A2C, PPO and IMPALA scripts on Pong for a few hundred steps (the ROMs come with ale-py)."""
import json
import subprocess
import sys
import types

import gymnasium as gym
import h5py
import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite import train
from parl_lite.algorithms import DDQN, IMPALA
from parl_lite.env.atari import AtariSettings, atari_game, is_atari
from parl_lite.utils.envs import EpisodeReturns, make_vector_env
from parl_lite.utils.frame_replay import FrameReplayMemory
from parl_lite.utils.models import CNNActorCritic, CNNQNetwork
from parl_lite.utils.replay_memory import ReplayMemoryError
from locations import ROOT

pytest.importorskip("ale_py")

EXAMPLES = ROOT / "scripts" / "examples"


# ---------------------------------------------------------------- the environment
def test_ale_ids_are_atari_games_and_other_ids_are_not():
    pong = atari_game("PongNoFrameskip-v4")
    assert (pong.game, pong.frame_skip, pong.repeat_action_probability) == ("pong", 1, 0.0)
    v5 = atari_game("ALE/Pong-v5")
    assert (v5.game, v5.frame_skip, v5.repeat_action_probability) == ("pong", 4, 0.25)
    assert not is_atari("CartPole-v1") and atari_game("NoSuchThing-v0") is None
    with pytest.raises(gym.error.Error, match="random number of frames"):
        atari_game("Pong-v4")


def test_frames_are_uint8_stacks_channel_first_with_zeros_before_the_first():
    env, obs = make_vector_env("PongNoFrameskip-v4", 2, seed=0)
    try:
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        assert not obs[:, :3].any() and obs[:, 3].any()  # zeros before an episode's first frame
        next_obs, rewards, terminated, truncated, info = env.step(np.array([0, 0]))
        assert (next_obs[:, :3] == obs[:, 1:]).all()  # the stack moves on by one frame
        assert rewards.dtype == np.float64 and terminated.dtype == np.bool_ and "_episode" in info
    finally:
        env.close()
    small, obs = make_vector_env("PongNoFrameskip-v4", 1, seed=0, env_kwargs={"screen_size": 42})
    small.close()
    assert obs.shape == (1, 4, 42, 42)
    with pytest.raises(TypeError, match="unknown Atari option.*'screen'"):
        make_vector_env("PongNoFrameskip-v4", 1, seed=0, env_kwargs={"screen": 42})
    with pytest.raises(ValueError, match="screen_size must be a positive integer"):
        AtariSettings.of({"screen_size": 0})


def test_a_lost_life_terminates_for_the_learner_and_the_game_goes_on():
    """Breakout has 5 lives: training sees 5 terminations, the game's return is reported once; an
    evaluation environment ends at game over only."""
    env, _ = make_vector_env("BreakoutNoFrameskip-v4", 1, seed=3)
    returns = EpisodeReturns(1)
    rng = np.random.default_rng(0)
    terminations, clipped_sum, steps = 0, 0.0, 0
    try:
        while not returns.finished:
            _, rewards, terminated, truncated, info = env.step(rng.integers(0, 4, size=1))
            terminations += int(terminated[0])
            clipped_sum += float(rewards[0])
            returns.update(rewards, terminated | truncated, info)
            steps += 1
            assert steps < 20_000
    finally:
        env.close()
    assert terminations == 5 and returns.episodes == 1
    assert returns.finished[0] >= clipped_sum  # a brick above the first rows is worth more than 1 (clipped)
    evaluation, _ = make_vector_env("BreakoutNoFrameskip-v4", 1, seed=3, evaluation=True)
    ends = 0
    try:
        for _ in range(steps):
            _, _, terminated, truncated, _ = evaluation.step(rng.integers(0, 4, size=1))
            ends += int(terminated[0] | truncated[0])
    finally:
        evaluation.close()
    assert ends <= 2  # whole games only (about as long as the one above)


def test_space_invaders_rewards_are_clipped_for_learning_and_whole_in_evaluation():
    totals = {}
    for evaluation in (False, True):
        env, _ = make_vector_env("SpaceInvadersNoFrameskip-v4", 1, seed=1, evaluation=evaluation)
        rng = np.random.default_rng(1)
        seen = set()
        try:
            for _ in range(400):
                seen.update(env.step(rng.integers(0, 6, size=1))[1].tolist())
        finally:
            env.close()
        totals[evaluation] = seen
    assert totals[False] <= {0.0, 1.0} and max(totals[True]) >= 5.0


# ---------------------------------------------------------------- the replay memory
def _pong_transitions(count, seed=0):
    """``count`` transitions of Pong played at random (episodes cut short by resets now and then)."""
    env, obs = make_vector_env("PongNoFrameskip-v4", 1, seed=seed)
    rng = np.random.default_rng(seed)
    transitions = []
    try:
        for index in range(count):
            action = int(rng.integers(0, 6))
            next_obs, _, terminated, _, _ = env.step(np.array([action]))
            terminal = bool(terminated[0]) or index % 97 == 96
            transitions.append((obs[0].copy(), action, float(index), next_obs[0].copy(), terminal))
            obs = env.reset(seed=seed + index)[0] if terminal else next_obs
    finally:
        env.close()
    return transitions


def test_frame_replay_gives_back_exactly_the_stacks_it_was_given():
    transitions = _pong_transitions(400)
    memory = FrameReplayMemory(1_000, (84, 84), 4, seed=0)
    for transition in transitions:
        memory.append(*transition)
    assert memory.size() == 400
    # one slot per transition, and `stack` more per episode (its older frames, the final frame)
    episodes = sum(terminal for *_, terminal in transitions) + 1
    assert memory._written == 400 + 4 * episodes - 1
    assert memory.frames.nbytes == 1_000 * 84 * 84  # frames only: no stacked copies
    obs, action, reward, next_obs, terminal = memory.sample_batch(256)
    assert obs.dtype == np.uint8 and obs.shape == (256, 4, 84, 84) and next_obs.shape == obs.shape
    for k in range(256):
        original = transitions[int(reward[k])]  # the reward is the transition's index
        assert reward[k] < 399  # the newest transition waits for its next frame
        assert (obs[k] == original[0]).all() and action[k] == original[1]
        assert (next_obs[k] == original[3]).all() and terminal[k] == original[4]


def test_frame_replay_forgets_the_oldest_transitions_when_full():
    transitions = _pong_transitions(300, seed=1)
    memory = FrameReplayMemory(150, (84, 84), 4, seed=1)
    for transition in transitions:
        memory.append(*transition)
    obs, _, reward, next_obs, _ = memory.sample_batch(500)
    assert reward.min() >= 300 - 150 and memory.size() <= 150
    for k in range(0, 500, 7):
        original = transitions[int(reward[k])]
        assert (obs[k] == original[0]).all() and (next_obs[k] == original[3]).all()


def test_frame_replay_saves_restores_and_refuses_what_does_not_fit(tmp_path):
    transitions = _pong_transitions(120, seed=2)
    memory = FrameReplayMemory(200, (84, 84), 4, seed=2)
    for transition in transitions[:100]:
        memory.append(*transition)
    memory.save(tmp_path / "memory.h5")
    restored = FrameReplayMemory(200, (84, 84), 4, seed=99)
    restored.load(tmp_path / "memory.h5")
    for transition in transitions[100:]:  # appending goes on where it stopped
        memory.append(*transition)
        restored.append(*transition)
    for left, right in zip(memory.sample_batch(64), restored.sample_batch(64), strict=True):
        assert (left == right).all()
    with pytest.raises(ReplayMemoryError, match="max_size 200 differs"):
        FrameReplayMemory(300, (84, 84), 4).load(tmp_path / "memory.h5")
    with h5py.File(tmp_path / "memory.h5", "r+") as file:
        file["replay_memory/frames"][3, 0, 0] ^= 1
    with pytest.raises(ReplayMemoryError, match="frames"):
        FrameReplayMemory(200, (84, 84), 4).load(tmp_path / "memory.h5")


def test_frame_replay_names_bad_input():
    memory = FrameReplayMemory(50, (84, 84), 4)
    stack = np.zeros((4, 84, 84), np.uint8)
    with pytest.raises(ValueError, match="obs is float32"):
        memory.append(stack.astype(np.float32), 0, 0.0, stack, False)
    with pytest.raises(ValueError, match="act must be one integer"):
        memory.append(stack, 1.5, 0.0, stack, False)
    with pytest.raises(ValueError, match="terminal must be a bool"):
        memory.append(stack, 1, 0.0, stack, "yes")
    with pytest.raises(ValueError, match="no transition .* can be sampled yet"):
        memory.sample_batch(1)


# ---------------------------------------------------------------- models and learning
def test_convolutional_models_take_uint8_frames_and_learn_in_one_pass():
    paddle.seed(0)
    obs = np.random.default_rng(0).integers(0, 256, (6, 4, 84, 84)).astype(np.uint8)
    q = CNNQNetwork((4, 84, 84), 6)
    dqn = DDQN(q, gamma=0.99, lr=1e-4)
    assert parl_lite.Agent(dqn).predict(obs).shape == (6,)
    before = q.get_weights()
    dqn.learn(obs, np.arange(6), np.ones(6, np.float32), obs, np.zeros(6, bool))
    assert any(not np.array_equal(before[name], value) for name, value in q.get_weights().items())
    seen = []
    q.register_forward_pre_hook(lambda layer, inputs: seen.append(inputs[0].dtype))
    dqn.learn(obs, np.arange(6), np.ones(6, np.float32), obs, np.zeros(6, bool))
    assert set(seen) == {paddle.uint8}  # a quarter of float32's bytes until the first convolution
    model = CNNActorCritic((4, 42, 42), 6, torso="compact")
    logits, value = model.policy_and_value(paddle.to_tensor(obs[:, :, :42, :42]))
    assert logits.shape == [6, 6] and value.shape == [6, 1]
    with pytest.raises(ValueError, match="too small"):
        CNNQNetwork((4, 20, 20), 6)


def _script(name, tmp_path, *args, timeout=600):
    result = subprocess.run([sys.executable, str(EXAMPLES / name), "--env", "PongNoFrameskip-v4", *map(str, args),
                             "--save", str(tmp_path / "run.h5")], capture_output=True, text=True, timeout=timeout,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(600)
def test_dqn_script_learns_pong_from_frames_and_resumes_with_its_replay_memory(tmp_path):
    summary = _script("train_dqn.py", tmp_path, "--total-steps", 300, "--learning-starts", 200, "--eval-every", 300,
                      "--eval-episodes", 1, "--memory-size", 1_000)
    assert summary["steps"] == 300 and summary["updates"] == 25 and summary["eval_return"] == -21.0
    with h5py.File(tmp_path / "run.h5", "r") as file:
        group = file["replay_memory"]
        assert group.attrs["format"] == "parl_lite.frame_replay_memory"
        assert group["frames"].dtype == np.uint8 and group["frames"].shape[1:] == (84, 84)
        assert group["frames"].shape[0] == 300 + 3  # one frame per step, and the first stack's older three
    resumed = _script("train_dqn.py", tmp_path, "--total-steps", 400, "--learning-starts", 200, "--eval-every", 400,
                      "--eval-episodes", 1, "--memory-size", 1_000, "--resume", tmp_path / "run.h5")
    assert resumed["steps"] == 400 and resumed["updates"] == 50


@pytest.mark.timeout(600)
@pytest.mark.parametrize("script, extra, algo", [
    ("train_a2c.py", ("--num-envs", 4, "--total-steps", 200), "A2C"),
    ("train_ppo.py", ("--num-envs", 2, "--rollout-steps", 64, "--minibatch-size", 64, "--total-steps", 128), "PPO"),
    ("train_impala.py", ("--actors", 2, "--num-envs", 2, "--total-steps", 400), "IMPALA"),
])
def test_on_policy_scripts_learn_pong_from_frames(tmp_path, script, extra, algo):
    summary = _script(script, tmp_path, *extra, "--eval-every", 100_000, "--eval-episodes", 1)
    assert summary["algo"] == algo and summary["updates"] >= 1 and summary["eval_return"] == -21.0


def test_impala_script_takes_parls_atari_values():
    """The script's options for an Atari game, as its ``__main__`` parses them (read in a child process
    that runs the script's file without its ``__main__``; no test imports a script)."""
    parse = ("import dataclasses, json, runpy, sys\n"
             "from parl_lite import train\n"
             "script = runpy.run_path(sys.argv[1])\n"
             "args = train.parse_args(script['Args'], argv=['--env', 'PongNoFrameskip-v4'],\n"
             "                        atari_defaults=script['ATARI'])\n"
             "print(json.dumps(dataclasses.asdict(args)))\n")
    parsed = subprocess.run([sys.executable, "-c", parse, str(EXAMPLES / "train_impala.py")], capture_output=True,
                            text=True, timeout=120)
    assert parsed.returncode == 0, parsed.stderr[-3000:]
    args = types.SimpleNamespace(**json.loads(parsed.stdout.splitlines()[-1]))
    assert (args.screen_size, args.unroll, args.reduction, args.max_grad_norm) == (42, 49, "sum", 40.0)
    assert train.env_spaces(args.env, {"screen_size": 42}).obs_shape == (4, 42, 42)
    impala = IMPALA(CNNActorCritic((4, 42, 42), 6, args.torso), sample_batch_steps=args.unroll + 1)
    assert impala.sample_batch_steps == 50
