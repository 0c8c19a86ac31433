"""parl_lite.train: callbacks, the progress display, checkpoints, Ctrl-C, resume, the Args
dataclass command line, and the Algorithm contract (numpy in, numpy out; tensors in, tensors out)."""
import dataclasses
import json
import re
import signal
import subprocess
import sys
from typing import Optional

import h5py
import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite import train
from parl_lite.algorithms import A2C, DQN, PPO
from parl_lite.utils.models import MLPActorCritic, MLPQNetwork
from locations import ROOT



def a2c_trainer(seed=1, **options):
    paddle.seed(seed)
    return train.OnPolicyTrainer(A2C(MLPActorCritic(4, 2, 16)), "CartPole-v1", num_envs=4, rollout_steps=5,
                                 gamma=0.99, gae_lambda=1.0, seed=seed, **options)


class Recorder(train.Callback):
    def __init__(self, stop_after_steps=None):
        self.events, self.stop_after_steps = [], stop_after_steps

    def on_training_start(self, trainer):
        self.events.append(("start", trainer.steps))

    def on_step(self, trainer):
        self.events.append(("step", trainer.steps))
        return self.stop_after_steps is None or trainer.steps < self.stop_after_steps

    def on_evaluation(self, trainer, score):
        self.events.append(("eval", trainer.steps, score))
        return True

    def on_training_end(self, trainer):
        self.events.append(("end", trainer.steps))


@pytest.mark.timeout(120)
def test_callbacks_see_every_round_and_evaluation_and_can_stop():
    recorder = Recorder(stop_after_steps=60)
    summary = a2c_trainer(eval_every=40).learn(1_000, callback=[recorder], progress_bar=False)
    assert summary.steps == 60 and summary.updates == 3 and not summary.interrupted
    assert recorder.events[0] == ("start", 0) and recorder.events[-1] == ("end", 60)
    assert [e[1] for e in recorder.events if e[0] == "step"] == [20, 40, 60]
    evaluations = [e for e in recorder.events if e[0] == "eval"]
    assert [e[1] for e in evaluations] == [40] and evaluations[0][2] == summary.eval_return


@pytest.mark.timeout(120)
def test_target_stops_at_the_first_evaluation_that_reaches_it():
    summary = a2c_trainer(eval_every=40, target=-1.0).learn(1_000, progress_bar=False)
    assert summary.solved and summary.solved_at == 40 and summary.steps == 40


@pytest.mark.timeout(120)
def test_the_summary_gives_the_best_evaluation_beside_the_last_and_a_resumed_run_keeps_it(tmp_path):
    path, first, later = str(tmp_path / "a2c.h5"), Recorder(), Recorder()
    summary = a2c_trainer(eval_every=20, eval_episodes=2, save=path).learn(200, callback=[first], progress_bar=False)
    scores = [event[2] for event in first.events if event[0] == "eval"]
    assert summary.eval_return == scores[-1] and summary.best_eval_return == max(scores)
    resumed = a2c_trainer(eval_every=20, eval_episodes=2, resume=path).learn(240, callback=[later],
                                                                             progress_bar=False)
    more = [event[2] for event in later.events if event[0] == "eval"]
    assert max(scores) > max(more)  # the best is one of the first run's, and has to be kept
    assert resumed.eval_return == more[-1] and resumed.best_eval_return == max(scores)
    assert json.loads(resumed.to_json())["best_eval_return"] == max(scores)


@pytest.mark.timeout(120)
def test_every_n_steps_callback():
    seen = []
    a2c_trainer(eval_every=1_000).learn(200, callback=train.EveryNSteps(60, lambda t: seen.append(t.steps)),
                                        progress_bar=False)
    assert seen == [60, 120, 180]


@pytest.mark.timeout(120)
def test_log_lines_without_a_terminal_and_a_bar_with_one(capsys):
    a2c_trainer(eval_every=40).learn(80, progress_bar=False)
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    assert len(lines) == 2 and all("steps/s" in line and "ETA" in line and "eval" in line for line in lines)
    assert lines[-1].startswith("A2C steps      80/80")
    a2c_trainer(eval_every=40).learn(80, progress_bar=True)
    out, err = capsys.readouterr()
    assert out == "" and "100%" in err and "step/s" in err and "eval=" in err


@pytest.mark.timeout(120)
def test_periodic_checkpoints_hold_weights_optimizer_and_loop_state(tmp_path):
    path = tmp_path / "run.h5"
    written = []
    trainer = a2c_trainer(eval_every=1_000, save=str(path), checkpoint_every=40)
    trainer.learn(100, callback=train.EveryNSteps(40, lambda t: written.append(h5py.File(path, "r").attrs["format"])
                                                  if path.exists() else written.append(None)), progress_bar=False)
    with h5py.File(path, "r") as file:
        assert dict(file["trainer"].attrs)["steps"] == 100
        assert "optimizer" in file["optimizers"]
        assert json.loads(file["models"]["model"].attrs["constructor_args"])["hidden"] == 16
    assert written[1:] == ["parl_lite.checkpoint"] * (len(written) - 1)


@pytest.mark.timeout(120)
def test_resume_continues_the_step_count_and_the_replay_memory(tmp_path, capsys):
    path = str(tmp_path / "dqn.h5")

    def dqn_trainer(**options):
        paddle.seed(3)
        return train.OffPolicyTrainer(DQN(MLPQNetwork(4, 2, 32), gamma=0.99, lr=1e-3), "CartPole-v1",
                                      learning_starts=50, train_every=10, batch_size=16, memory_size=1_000, seed=3,
                                      eval_every=1_000, eval_episodes=1, **options)

    first = dqn_trainer(save=path)
    first.learn(120, progress_bar=False)
    first.train_seconds = 1e6  # as if the first run had taken long: the resumed run's rate is its own
    first.save_checkpoint(path)
    weights = first.agent.get_weights()
    resumed = dqn_trainer(resume=path)
    assert resumed.agent.get_weights().keys() == weights.keys()
    capsys.readouterr()
    summary = resumed.learn(200, progress_bar=False)
    assert summary.steps == 200 and summary.updates == first.updates + 8
    assert len(resumed.memory) == 200
    rate = float(re.search(r"([\d.e+-]+) steps/s", capsys.readouterr().out.splitlines()[-1]).group(1))
    assert rate > 1, rate  # 80 steps over this run's seconds, not over the first run's 1e6 as well
    with pytest.raises(parl_lite.CheckpointError, match="DQN run"):
        a2c_trainer(resume=path).learn(100, progress_bar=False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_checkpoints_and_exits_128_plus_the_signal_and_the_run_resumes(tmp_path, stop_signal):
    save = tmp_path / "ppo.h5"
    command = [sys.executable, "-u", str(ROOT / "scripts" / "examples" / "train_ppo.py"), "--total-steps", "1000000",
               "--eval-every", "256", "--eval-episodes", "1", "--target", "1e9", "--save", str(save)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        first_line = process.stdout.readline()  # the first evaluation: training is under way
        assert "steps/s" in first_line
        process.send_signal(stop_signal)
        out, _ = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 128 + stop_signal  # SIGTERM: paddle's handler no longer aborts the run
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted"] and summary["steps"] >= 256
    with h5py.File(save, "r") as file:
        assert file["trainer"].attrs["steps"] == summary["steps"]
    resumed = subprocess.run(command[:4] + [str(summary["steps"] + 256), *command[5:], "--resume", str(save)],
                             capture_output=True, text=True, timeout=100, cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["steps"] == summary["steps"] + 256


@dataclasses.dataclass
class Args(train.TrainArgs):
    env: str = train.arg("CartPole-v1", "gymnasium id", choices=["CartPole-v1", "Pendulum-v1"])
    double: bool = train.arg(True, "double targets")
    lr: float = train.arg(1e-3, "learning rate")
    kl_target: Optional[float] = train.arg(None, "KL target")


def test_args_dataclass_is_a_command_line():
    args = train.parse_args(Args, argv=["--no-double", "--lr", "0.5", "--total-steps", "10", "--env", "Pendulum-v1"],
                            env_defaults={"Pendulum-v1": {"lr": 0.1, "eval_every": 7}})
    assert (args.double, args.lr, args.total_steps, args.kl_target, args.eval_every) == (False, 0.5, 10, None, 7)
    assert args.run_options()["eval_every"] == 7
    with pytest.raises(SystemExit):
        train.parse_args(Args, argv=["--env", "Nope-v0"])


@dataclasses.dataclass
class LongerArgs(Args):
    total_steps: int = 500_000  # TrainArgs's field, another default: the help is inherited
    lr: float = 0.25            # Args's field


def test_a_default_changed_in_a_subclass_keeps_the_fields_help(capsys):
    assert (LongerArgs().total_steps, LongerArgs().lr, LongerArgs().double) == (500_000, 0.25, True)
    with pytest.raises(SystemExit):
        train.parse_args(LongerArgs, argv=["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--total-steps TOTAL_STEPS environment steps at most (default: 500000)" in text
    assert "--lr LR learning rate (default: 0.25)" in text
    assert train.parse_args(LongerArgs, argv=["--total-steps", "7"]).total_steps == 7


@pytest.mark.timeout(60)
def test_the_package_loads_each_name_on_first_use():
    code = """
import sys
from parl_lite import train
assert sorted(dir(train)) == sorted(train.__all__), dir(train)
train.Reporter, train.RunSummary, train.TrainArgs      # what es-train takes: paddle-free
assert "paddle" not in sys.modules and "parl_lite.train.on_policy" not in sys.modules
assert train.OnPolicyTrainer.__module__ == "parl_lite.train.on_policy" and "paddle" in sys.modules
try:
    train.NoSuchLoop
except AttributeError as error:
    print(error)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "module 'parl_lite.train' has no attribute 'NoSuchLoop'\n"


def test_algorithm_converts_numpy_once_and_passes_tensors_through():
    paddle.seed(0)
    ppo = PPO(MLPActorCritic(4, 2, 16))
    obs = np.zeros((3, 4), np.float64)  # float64 in: converted to float32
    actions, log_probs = parl_lite.Agent(ppo).sample(obs)
    assert isinstance(actions, np.ndarray) and actions.shape == (3,) and log_probs.dtype == np.float32
    assert isinstance(ppo.predict(paddle.zeros([3, 4])), paddle.Tensor)
    assert isinstance(ppo.value(obs), np.ndarray)
    losses = parl_lite.Agent(ppo).learn(obs, np.array([0, 1, 0]), np.zeros(3), np.ones(3), log_probs, np.ones(3))
    assert len(losses) == 3 and all(isinstance(value, float) for value in losses)


def test_the_dict_form_of_learn_is_refused_with_the_way_to_call_it():
    ppo = PPO(MLPActorCritic(4, 2, 16))
    with pytest.raises(TypeError, match=r"not one dict: call learn\(\*\*batch\)"):
        ppo.learn(dict(batch_obs=np.zeros((3, 4))))


def test_learn_stats_names_parls_return_values():
    from parl_lite.algorithms.a2c import A2CLosses
    from parl_lite.algorithms.impala import IMPALALosses, VTraceLoss
    from parl_lite.algorithms.vtrace import VTraceReturns

    assert train.learn_stats(paddle.to_tensor(0.5)) == {"loss": 0.5}
    assert train.learn_stats(A2CLosses(*(paddle.to_tensor(float(v)) for v in range(4)))) == {
        "total_loss": 0.0, "pi_loss": 1.0, "vf_loss": 2.0, "entropy": 3.0}
    nested = IMPALALosses(VTraceLoss(1.0, 2.0, 3.0, 4.0, VTraceReturns(paddle.ones([2, 3]), paddle.ones([2, 3]))),
                          paddle.to_tensor([0.25]))
    assert train.learn_stats(nested) == {"total_loss": 1.0, "pi_loss": 2.0, "vf_loss": 3.0, "entropy": 4.0,
                                         "kl": 0.25}
    assert train.learn_stats((1.0, np.float32(2.0))) == {"loss_0": 1.0, "loss_1": 2.0}
    assert train.learn_stats(None) == {} and train.learn_stats(np.zeros(3)) == {}


def test_constructor_arguments_are_recorded_and_export_needs_no_model_kwargs(tmp_path):
    pytest.importorskip("onnxruntime")
    paddle.seed(0)
    model = MLPActorCritic(4, 2, hidden=8)
    assert model.constructor_args() == {"obs_dim": 4, "act_dim": 2, "hidden": 8, "continuous": False,
                                        "shared": False, "pi_arch": None, "vf_arch": None, "activation": "tanh",
                                        "ortho_init": True, "log_std_init": 0.0, "normalize_obs": False}
    parl_lite.Agent(A2C(model)).save(tmp_path / "a2c.h5")
    done = subprocess.run([sys.executable, "-m", "parl_lite.cli", "export", str(tmp_path / "a2c.h5"),
                           "--input-shape", "None,4", "--output", str(tmp_path / "a2c.onnx")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    import onnxruntime

    session = onnxruntime.InferenceSession(str(tmp_path / "a2c.onnx"))
    obs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name: obs})[0],
                               model(paddle.to_tensor(obs)).numpy(), atol=1e-5)


def test_a_model_given_a_layer_records_nothing():
    class Wrapper(parl_lite.Model):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

    assert Wrapper(paddle.nn.Linear(2, 2)).constructor_args() is None
    with pytest.raises(ValueError, match="model_fn"):
        train.AsyncTrainer(A2C(Wrapper(paddle.nn.Linear(2, 2)), critic=MLPQNetwork(2, 1)), "CartPole-v1")


def test_bad_loop_options_are_named():
    with pytest.raises(ValueError, match="eval_every"):
        a2c_trainer(eval_every=0)
    with pytest.raises(ValueError, match="total_timesteps"):
        a2c_trainer().learn(0)
    with pytest.raises(ValueError, match="batch_size"):
        train.OffPolicyTrainer(DQN(MLPQNetwork(4, 2, 8), gamma=0.9, lr=1e-3), "CartPole-v1", batch_size=0)


def _dqn_trainer(**options):
    paddle.seed(3)
    return train.OffPolicyTrainer(DQN(MLPQNetwork(4, 2, 32), gamma=0.99, lr=1e-3), "CartPole-v1",
                                  learning_starts=50, train_every=10, batch_size=16, memory_size=1_000, seed=3,
                                  eval_every=1_000, eval_episodes=1, **options)


@pytest.mark.timeout(120)
def test_resume_refuses_a_replay_memory_capacity_that_cannot_be_allocated_naming_it(tmp_path):
    path = tmp_path / "dqn.h5"
    _dqn_trainer(save=str(path)).learn(60, progress_bar=False)
    with h5py.File(path, "r+") as file:
        file["replay_memory"].attrs["max_size"] = 2**62
    with pytest.raises(parl_lite.CheckpointError, match=r"max_size 4611686018427387904 transitions do not fit"):
        _dqn_trainer(resume=str(path)).learn(100, progress_bar=False)


@pytest.mark.timeout(120)
def test_a_diverged_run_keeps_its_last_good_checkpoint(tmp_path):
    """Before, the periodic checkpoint of a run whose weights had turned NaN replaced the last good
    one with a file that restore refuses."""
    path = tmp_path / "dqn.h5"
    trainer = _dqn_trainer(save=str(path))
    trainer.learn(60, progress_bar=False)
    good = trainer.agent.get_weights()
    weight = trainer.agent.alg.model.state_dict()["fc1.weight"]
    weight.set_value(np.full(weight.shape, np.nan, "float32"))
    with pytest.raises(ValueError, match=r"DQN checkpoint '.*dqn.h5': model parameter 'fc1.weight' holds nan"):
        trainer.save_checkpoint(path)
    resumed = _dqn_trainer(resume=str(path))
    resumed.learn(60, progress_bar=False)  # nothing more to do: only the restore
    for name, value in good.items():
        np.testing.assert_array_equal(resumed.agent.get_weights()[name], value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["dqn", "memory"])
def test_a_fifo_in_place_of_a_checkpoint_is_named_without_blocking(tmp_path, kind):
    import os

    from parl_lite.utils.replay_memory import ReplayMemory, ReplayMemoryError

    fifo = tmp_path / "run.h5"
    os.mkfifo(fifo)
    if kind == "dqn":
        with pytest.raises(parl_lite.CheckpointError, match="run.h5 is a FIFO"):
            _dqn_trainer(resume=str(fifo)).learn(100, progress_bar=False)
    else:
        with pytest.raises(ReplayMemoryError, match="run.h5 is a FIFO"):
            ReplayMemory(10, 4, 0).load(fifo)


class CountingPPO(PPO):
    """PPO that counts its own draws of actions (paddle's)."""

    draws = 0

    def sample_actions(self, obs):
        CountingPPO.draws += 1
        return super().sample_actions(obs)


class OwnDrawsPPO(CountingPPO):
    """A PPO whose draws are its own business: the loop must call them."""

    samples_from_policy = False


@pytest.mark.timeout(120)
@pytest.mark.parametrize("algorithm, paddle_draws", [(CountingPPO, 0), (OwnDrawsPPO, 40)])
def test_the_on_policy_loop_draws_in_onnxruntime_only_for_an_algorithm_that_samples_from_its_policy_alone(
        algorithm, paddle_draws):
    paddle.seed(1)
    CountingPPO.draws = 0
    trainer = train.OnPolicyTrainer(algorithm(MLPActorCritic(4, 2, 16)), "CartPole-v1", num_envs=4, rollout_steps=10,
                                    seed=1, epochs=2, minibatch_size=20)
    summary = trainer.learn(160, progress_bar=False)
    assert summary.steps == 160 and CountingPPO.draws == paddle_draws  # 4 rounds of 10 steps


@pytest.mark.timeout(120)
def test_the_on_policy_loop_s_onnx_draws_repeat_for_a_seed_and_learn_cartpole():
    def run():
        paddle.seed(3)
        trainer = train.OnPolicyTrainer(PPO(MLPActorCritic(4, 2, 64)), "CartPole-v1", num_envs=8, rollout_steps=32,
                                        seed=3, epochs=10, minibatch_size=64, target=200, eval_every=2_048,
                                        eval_episodes=5)
        return trainer.learn(40_000, progress_bar=False), trainer.agent.get_weights()

    (first, weights), (second, again) = run(), run()
    assert first.solved and first.steps == second.steps, (first, second)
    assert all(np.array_equal(weights[name], again[name]) for name in weights)
