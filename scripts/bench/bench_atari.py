"""IMPALA's and DQN's throughput on Pong: parl_lite against PARL 2.2.1, RLlib and Stable-Baselines3,
side by side in one run.

    python scripts/bench/bench_atari.py                        # parl_lite alone (each peer skipped, with why)
    bash scripts/bench/atari_peers.sh /opt/peers PARL/.git     # the peers' environments, once
    python scripts/bench/bench_atari.py --parl-python /opt/peers/parl/bin/python \\
        --parl-examples /opt/peers/parl-examples/IMPALA --rllib-python /opt/peers/rllib/bin/python \\
        --sb3-python /opt/peers/sb3/bin/python
    python scripts/bench/bench_atari.py --only impala --actors 2 --seconds 30

Prints ONE JSON line. Each system runs in a fresh process of its own Python (its virtual
environment: a peer whose interpreter is not given, or whose run fails, is skipped with the
reason), one after another on this machine, on ``PongNoFrameskip-v4`` (4 frames per agent step).

**IMPALA**, with 2 and 4 actors (``--actors``), each actor stepping ``--num-envs`` games and sending
trajectories of ``--unroll`` steps (and the observation after them, which bootstraps the V-trace
targets); the learner takes one gradient step on ``--num-envs`` trajectories (defaults: the
``ATARI`` values of ``scripts/examples/train_impala.py``, 10 games and 49 steps: 490 steps learned
from per update, 500 rows with the bootstrap rows) with PARL's IMPALA network (``AtariModel``: conv
16 4x4/2 pad 1, 32 4x4/2 pad 2, 256 11x11, a linear policy and value on its 256 features) on 42x42
grey frames stacked 4:

- **parl_lite**: :class:`parl_lite.train.AsyncTrainer` as ``train_impala.py`` builds it for Atari
  (actors on the local process pool, games stepped in C++ by ale-py);
- **parl**: PARL 2.2.1's own example (``examples/IMPALA`` of PARL's repository, from
  ``--parl-examples``: its ``train.py``'s ``Learner``, its ``actor.py``, ``atari_model.py`` and
  ``atari_agent.py``, unchanged) on an ``xparl start --cpu_num <actors>`` cluster of its own, with
  its config's ``actor_num``, ``env_num``, ``sample_batch_steps`` (``--unroll`` + 1) and
  ``train_batch_size`` (``--num-envs`` trajectories) set to the values above; its games are
  gym's, wrapped by PARL's ``wrap_deepmind`` (Python and OpenCV). PARL_BACKEND=paddle (PARL 2.2.1
  detects paddle through ``paddle.fluid``, which paddle 3 lacks);
- **rllib**: RLlib's IMPALA (new API stack, torch): ``num_env_runners`` = actors,
  ``num_envs_per_env_runner``, ``rollout_fragment_length`` = ``--unroll``,
  ``train_batch_size_per_learner`` = ``--num-envs`` fragments, the learner in the driver
  (``num_learners=0``, as the other two), the same network through ``conv_filters`` (``same``
  padding gives PARL's 21x21 and 11x11 maps) with ``vf_share_layers``, RLlib's Atari wrappers
  (``wrap_atari_for_new_api_stack``, ``dim=42``, 4 frames stacked), torch on 1 thread in the driver
  (Ray gives each env runner 1). RLlib counts the bootstrap row of each trajectory as trained: its
  count is scaled by ``unroll / (unroll + 1)``.

Figures per system: ``frames_per_s`` (agent steps learned from x 4 over the wall-clock of the
window), ``frames_per_cpu_s`` (the same frames over the CPU-seconds of every process of the run in
the window: the learner, the actors and each system's own machinery, Ray's and xparl's servers
included; read from /proc: the driver makes itself the subreaper of the processes it starts, so
that it finds them all as its descendants), ``cores_used`` (CPU-seconds per second) and
``cpu_s_by_process`` (the window's CPU-seconds by process kind: ``learner`` is the driver's process,
the others are named from their command lines). The window opens ``--warmup`` seconds after the
first update and lasts ``--seconds``; it starts and ends on an update (parl_lite, PARL) or on the
end of a training iteration (RLlib, 1 s each). ``fps_vs_parl`` and ``fps_vs_rllib`` are parl_lite's
frames per second over the peer's.

**DQN**, one game, in one process: parl_lite's :class:`parl_lite.train.OffPolicyTrainer` with
``train_dqn.py``'s Nature network (84x84 frames) and ``ATARI`` values, against SB3's ``DQN``
(``CnnPolicy``, ``make_atari_env`` (its ``AtariWrapper``) and ``VecFrameStack`` of 4) with the RL Zoo's
Atari values: replay memory of 100,000, batch 32, one update every 4 steps, target copied every
1,000 steps; both plain DQN (SB3 has no Double DQN), torch on 1 thread as paddle and onnxruntime (which
runs parl_lite's target network, as ``ATARI`` says). Learning starts
after ``--dqn-learning-starts`` steps, over which epsilon falls to its final 0.01 (so that the
window, ``--warmup`` seconds after the first update, has the updates and a forward pass almost
every step). Figures: ``frames_per_cpu_s`` (env steps x 4 over the process's CPU-seconds),
``frames_per_s``, and ``frames_per_cpu_s_vs_sb3``, in each of ``--rounds`` rounds (parl_lite
first in the odd ones, SB3 in the even ones), with the mean ratio over them and its 95% interval.
``--dqn-paddle-target`` adds ``parl_lite_target_in_paddle`` (the target network in paddle) between
the two, and ``target_in_onnxruntime_vs_paddle``.

Whole run with the defaults (2 x 3 IMPALA runs and 2 DQN runs of 20 + 60 s, each after its start-up):
about 15-20 minutes on 2 cores. Every process a measurement started is ended after it, by pid. The
peers leave what they always leave: PARL its jobs' logs in ``~/.parl_data`` and an empty
TensorBoard folder ``train_log`` in the examples folder, Ray its session folder under ``/tmp/ray``.
"""
import argparse
import collections
import ctypes
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from intervals import mean_and_interval

ENV_ID = "PongNoFrameskip-v4"
FRAME_SKIP = 4
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RESULT_MARK = "BENCH_ATARI_RESULT "  # a driver's result line (peers print their own lines too)
NEVER = 10**12  # an evaluation period / step budget no run reaches
RLLIB_CONV_FILTERS = [[16, 4, 2, "same"], [32, 4, 2, "same"], [256, 11, 1, "valid"]]  # PARL's AtariModel
DQN_MEMORY, DQN_BATCH, DQN_TRAIN_EVERY, DQN_TARGET_EVERY, DQN_LR = 100_000, 32, 4, 1_000, 1e-4  # RL Zoo's Atari
DQN_FINAL_EPSILON = 0.01


@dataclass(frozen=True)
class Settings:
    """What every system of a comparison is given (sent to the drivers as JSON)."""

    seconds: float
    warmup: float
    num_envs: int
    unroll: int
    dqn_learning_starts: int
    actors: int = 0
    parl_examples: str | None = None


# ---------------------------------------------------------------------------------- processes
def become_subreaper() -> None:
    """Orphans of this process's descendants (xparl's servers, a pool's workers) become its
    children instead of init's, so that they stay among its descendants (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (field 3 is index 0), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def descendants(root: int) -> list[int]:
    """The processes below ``root`` (children, theirs, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def process_kind(pid: int) -> str:
    """A short name for what process ``pid`` runs: the script or module a Python runs, else its
    program (Ray's workers name themselves ``ray::Class.method``: the class is kept)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            words = [word.decode(errors="replace") for word in cmdline.read().split(b"\0") if word]
    except OSError:
        return "(exited)"
    if not words:  # a zombie (its CPU is still counted until it is reaped)
        return "(exited)"
    words = words[0].split() + words[1:]  # a process that set its title has one word with spaces
    program = os.path.basename(words[0])
    if program.startswith("python"):
        rest = [word for word in words[1:] if not word.startswith("-") or word == "-m"]
        if rest[:1] == ["-m"] and len(rest) > 1:
            return rest[1]
        return os.path.basename(rest[0]) if rest else program
    return program.split(".")[0]


def cpu_by_kind(root: int) -> dict[str, float]:
    """CPU-seconds so far of ``root`` (as ``learner``) and of its descendants, by kind, each with
    the children it has reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for pid in [root, *descendants(root)]:
        fields = _stat(pid)
        if fields is None:
            continue
        kind = "learner" if pid == root else process_kind(pid)
        used[kind] = used.get(kind, 0.0) + sum(int(value) for value in fields[11:15]) / tick
    return used


def end_processes(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM to each of ``pids``, SIGKILL to those still there after ``grace`` seconds; reap our
    children among them."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            _reap_children()
            pids = [pid for pid in pids if _stat(pid) is not None and _stat(pid)[0] != "Z"]
            if not pids:
                return
            time.sleep(0.1)


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# ---------------------------------------------------------------------------------- the window
class Window:
    """The measured stretch of a run: opens at the first progress event ``warmup`` seconds after
    the first update, closes at the first one ``seconds`` after it opened.

    :meth:`tick` is called at each progress event with the steps so far; ``done`` is set when the
    window has closed.
    """

    def __init__(self, warmup: float, seconds: float) -> None:
        self.warmup, self.seconds = warmup, seconds
        self.first: float | None = None
        self.start: tuple[float, float, dict[str, float]] | None = None
        self.end: tuple[float, float, dict[str, float]] | None = None
        self.done = threading.Event()

    def tick(self, steps: float) -> None:
        """A progress event: ``steps`` so far (learned from, or played while learning)."""
        if self.done.is_set():
            return
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        elif self.start is None:
            if now - self.first >= self.warmup:
                self.start = (now, steps, cpu_by_kind(os.getpid()))
        elif now - self.start[0] >= self.seconds:
            self.end = (now, steps, cpu_by_kind(os.getpid()))
            self.done.set()

    def figures(self, **extra: Any) -> dict[str, Any]:
        """Frames per second and per CPU-second over the window, and where the CPU went."""
        if self.start is None or self.end is None:
            raise RuntimeError("the measurement window did not close")
        (t0, steps0, cpu0), (t1, steps1, cpu1) = self.start, self.end
        wall, frames = t1 - t0, (steps1 - steps0) * FRAME_SKIP
        by_kind = {kind: round(cpu1[kind] - cpu0.get(kind, 0.0), 2) for kind in cpu1}
        cpu = sum(by_kind.values())
        return {"frames_per_s": round(frames / wall, 1), "frames_per_cpu_s": round(frames / cpu, 1) if cpu else None,
                "cores_used": round(cpu / wall, 2), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                "frames": int(frames),
                "cpu_s_by_process": dict(sorted(by_kind.items(), key=lambda item: -item[1])), **extra}


def _example(name: str) -> Any:
    """One of ``scripts/examples``'s scripts as a module (its ``ATARI`` values)."""
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), EXAMPLES / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------- IMPALA drivers
def impala_trainer(actors: int, values: dict[str, Any] | None = None, seed: int = 0, **options: Any) -> Any:
    """parl_lite's AsyncTrainer as ``train_impala.py`` builds it for Pong: its ``ATARI`` values updated
    with ``values`` (``num_envs`` games per actor, trajectories of ``unroll`` steps, ``lr``, ...),
    paddle and the trainer seeded with ``seed``; ``options`` go to the trainer."""
    import paddle

    from parl_lite import train
    from parl_lite.algorithms import IMPALA
    from parl_lite.utils.models import CNNActorCritic

    atari = {**_example("train_impala.py").ATARI, **(values or {})}
    paddle.seed(seed)
    env_kwargs = {"screen_size": atari["screen_size"]}
    spaces = train.env_spaces(ENV_ID, env_kwargs)
    model = CNNActorCritic(spaces.obs_shape, spaces.act_dim, atari["torso"])
    impala = IMPALA(model, sample_batch_steps=atari["unroll"] + 1, gamma=0.99, vf_loss_coeff=atari["vf_loss_coeff"],
                    clip_rho_threshold=atari["clip_rho"], clip_pg_rho_threshold=atari["clip_rho"], lr=atari["lr"],
                    max_grad_norm=atari["max_grad_norm"], clip_c_threshold=atari["clip_c"],
                    reduction=atari["reduction"], entropy_coeff=atari["entropy_coeff"])
    return train.AsyncTrainer(impala, ENV_ID, actors=actors, num_envs=atari["num_envs"], rollout_steps=atari["unroll"],
                              env_kwargs=env_kwargs, seed=seed, **options)


def ours_impala(settings: Settings) -> dict[str, Any]:
    """parl_lite's AsyncTrainer as ``train_impala.py`` builds it for an Atari game."""
    import paddle

    import parl_lite
    from parl_lite.version import __version__

    trainer = impala_trainer(settings.actors, {"num_envs": settings.num_envs, "unroll": settings.unroll},
                             eval_every=NEVER)
    window = Window(settings.warmup, settings.seconds)
    try:
        trainer.learn(NEVER, callback=_window_callback(window, lambda trainer: trainer.steps))
    finally:
        parl_lite.shutdown()  # the pool's shared memory goes with it: drive() ends with os._exit, skipping atexit
    return window.figures(versions={"parl_lite": __version__, "paddle": paddle.__version__})


def _window_callback(window: Window, steps: Callable[[Any], float]) -> Any:
    """A parl_lite training callback that ticks ``window`` with ``steps(trainer)`` after each
    round once the trainer has learned, and stops the run when the window has closed."""
    from parl_lite.train import Callback

    class WindowCallback(Callback):
        def on_step(self, trainer: Any) -> bool:
            if trainer.updates:
                window.tick(steps(trainer))
            return not window.done.is_set()

    return WindowCallback()


def parl_impala(settings: Settings) -> dict[str, Any]:
    """PARL 2.2.1's IMPALA example: its ``Learner`` (which starts its actors) on an xparl cluster of
    ``actors`` CPUs started here; its config's actor_num, env_num, sample_batch_steps and
    train_batch_size set to the comparison's values."""
    if not settings.parl_examples:
        raise ValueError("--parl-examples (PARL's examples/IMPALA folder) is needed for PARL")
    examples = Path(settings.parl_examples).resolve()
    os.environ["PARL_BACKEND"] = "paddle"  # PARL 2.2.1 looks for paddle.fluid, which paddle 3 has no more
    port = _free_port()
    xparl = Path(sys.executable).with_name("xparl")
    subprocess.run([str(xparl), "start", "--port", str(port), "--cpu_num", str(settings.actors)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    os.chdir(examples)  # PARL ships the entry script's folder (the example's files) to its jobs
    sys.path.insert(0, str(examples))
    sys.argv[0] = str(examples / "train.py")
    import paddle
    import parl
    from paddle.base.reader import DataLoader

    # the example's learn thread reads batches through paddle.io.DataLoader.from_generator, which
    # paddle >= 2.6 keeps as paddle.base.reader.DataLoader.from_generator only
    paddle.io.DataLoader.from_generator = DataLoader.from_generator
    _heartbeat_made_in_its_process()
    from impala_config import config
    from train import Learner

    rows = settings.unroll + 1
    config = {**config, "master_address": f"localhost:{port}", "actor_num": settings.actors,
              "env_num": settings.num_envs, "sample_batch_steps": rows, "train_batch_size": settings.num_envs * rows}
    window, learned = Window(settings.warmup, settings.seconds), [0]
    learner = Learner(config)  # its learn thread waits for the first batch
    learn = learner.agent.learn

    def counted_learn(obs: Any, *args: Any) -> Any:
        result = learn(obs, *args)
        learned[0] += obs.shape[0] // rows * settings.unroll  # the last row of each trajectory only bootstraps
        window.tick(learned[0])
        return result

    learner.agent.learn = counted_learn
    window.done.wait()
    return window.figures(versions={"parl": parl.__version__, "paddle": paddle.__version__})


def _heartbeat_made_in_its_process() -> None:
    """PARL 2.2.1's client makes its jobs' heartbeat server (gRPC) in its own process and starts it
    in a forked child; gRPC's Python wheels since 1.49 (the oldest for Python 3.11; PARL pins 1.37)
    do not serve from a server made before the fork, so every job loses its heartbeat within
    seconds and quits. The same server and loop, made in the child."""
    import multiprocessing
    from concurrent import futures

    import grpc
    import parl.remote.client
    from parl.remote.grpc_heartbeat import heartbeat_pb2_grpc
    from parl.remote.grpc_heartbeat.heartbeat_server import GrpcHeartbeatServer

    class HeartbeatServerProcess(multiprocessing.Process):
        def __init__(self, port: Any, client_count: Any, host_is_alive: Any, dead_job_queue: Any) -> None:
            super().__init__()
            self.port, self.server_args = port, (client_count, host_is_alive, dead_job_queue)

        def start(self) -> None:  # PARL reads the port as soon as start returns
            super().start()
            deadline = time.monotonic() + 60
            while self.port.value == 0 and self.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)

        def run(self) -> None:
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=500),
                                 options=[("grpc.max_receive_message_length", -1),
                                          ("grpc.max_send_message_length", -1)])
            heartbeat = GrpcHeartbeatServer(*self.server_args)
            heartbeat_pb2_grpc.add_GrpcHeartbeatServicer_to_server(heartbeat, server)
            port = server.add_insecure_port("[::]:0")
            server.start()
            with self.port.get_lock():
                self.port.value = port
            heartbeat.timeout_time_mp()
            server.stop(0)

    parl.remote.client.HeartbeatServerProcess = HeartbeatServerProcess


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rllib_impala(settings: Settings) -> dict[str, Any]:
    """RLlib's IMPALA (new API stack) with the comparison's actors, games, fragments, batch and PARL's
    network, on a local Ray instance started here."""
    import ray
    import torch
    from ray.rllib.algorithms.impala import IMPALAConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env

    torch.set_num_threads(1)
    register_env("pong42", _rllib_pong)
    ray.init(num_cpus=settings.actors + 1, include_dashboard=False, log_to_driver=False)
    model = DefaultModelConfig(conv_filters=RLLIB_CONV_FILTERS, conv_activation="relu", head_fcnet_hiddens=[],
                               vf_share_layers=True)
    config = (IMPALAConfig().environment("pong42", clip_rewards=True)
              .env_runners(num_env_runners=settings.actors, num_envs_per_env_runner=settings.num_envs,
                           rollout_fragment_length=settings.unroll)
              .learners(num_learners=0)
              .training(train_batch_size_per_learner=settings.num_envs * settings.unroll, lr=1e-3, entropy_coeff=0.01,
                        vf_loss_coeff=0.5, grad_clip=40.0)
              .rl_module(model_config=model)
              .reporting(min_time_s_per_iteration=1))
    algo = config.build_algo()
    window = Window(settings.warmup, settings.seconds)
    scale = settings.unroll / (settings.unroll + 1)  # RLlib counts each trajectory's bootstrap row as trained
    while not window.done.is_set():
        learners = algo.train().get("learners", {})  # none before the first update
        trained = learners.get("__all_modules__", {}).get("num_env_steps_trained_lifetime", 0)
        if trained:
            window.tick(trained * scale)
    figures = window.figures(versions={"ray": ray.__version__, "torch": torch.__version__})
    algo.stop()
    ray.shutdown()
    return figures


def _rllib_pong(env_config: dict) -> Any:
    """Pong with RLlib's Atari wrappers at 42x42, 4 frames stacked (in an env runner)."""
    import ale_py
    import gymnasium as gym
    from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

    gym.register_envs(ale_py)
    return wrap_atari_for_new_api_stack(gym.make(ENV_ID), dim=42, framestack=4)


# ---------------------------------------------------------------------------------- DQN drivers
def ours_dqn(settings: Settings, target_runtime: str | None = None) -> dict[str, Any]:
    """parl_lite's OffPolicyTrainer as ``train_dqn.py`` builds it for an Atari game (plain DQN);
    ``target_runtime`` None: ``ATARI``'s."""
    import paddle

    from parl_lite import train
    from parl_lite.algorithms import DQN
    from parl_lite.utils.models import CNNQNetwork
    from parl_lite.version import __version__

    atari = _example("train_dqn.py").ATARI
    paddle.seed(0)
    spaces = train.env_spaces(ENV_ID)
    dqn = DQN(CNNQNetwork(spaces.obs_shape, spaces.act_dim), gamma=0.99, lr=atari["lr"], loss="huber",
              max_grad_norm=10.0, target_runtime=target_runtime or atari["target_runtime"])
    starts = settings.dqn_learning_starts
    exploration = train.EpsilonGreedy(spaces.act_dim, 1.0, DQN_FINAL_EPSILON, starts, seed=0)
    trainer = train.OffPolicyTrainer(dqn, ENV_ID, exploration=exploration, learning_starts=starts,
                                     train_every=atari["train_every"], gradient_steps=atari["gradient_steps"],
                                     batch_size=atari["batch_size"], memory_size=atari["memory_size"],
                                     target_every=atari["target_every"], eval_every=NEVER)
    window = Window(settings.warmup, settings.seconds)
    trainer.learn(NEVER, callback=_window_callback(window, lambda trainer: trainer.steps))
    return window.figures(versions={"parl_lite": __version__, "paddle": paddle.__version__})


def ours_dqn_paddle_target(settings: Settings) -> dict[str, Any]:
    """:func:`ours_dqn` with the target network in paddle (PARL's), beside ``ATARI``'s onnxruntime."""
    return ours_dqn(settings, "paddle")


def sb3_dqn(settings: Settings) -> dict[str, Any]:
    """SB3's DQN with its Atari wrapper and the RL Zoo's Atari values."""
    import ale_py
    import gymnasium as gym
    import stable_baselines3
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecFrameStack

    torch.set_num_threads(1)
    gym.register_envs(ale_py)
    env = VecFrameStack(make_atari_env(ENV_ID, n_envs=1, seed=0), n_stack=4)
    starts = settings.dqn_learning_starts
    model = DQN("CnnPolicy", env, learning_rate=DQN_LR, buffer_size=DQN_MEMORY, learning_starts=starts,
                batch_size=DQN_BATCH, train_freq=DQN_TRAIN_EVERY, gradient_steps=1,
                target_update_interval=DQN_TARGET_EVERY, exploration_fraction=starts / NEVER,
                exploration_final_eps=DQN_FINAL_EPSILON, optimize_memory_usage=False, seed=0, device="cpu")
    model.set_logger(Logger(folder=None, output_formats=[]))
    window = Window(settings.warmup, settings.seconds)

    class WindowCallback(BaseCallback):
        def _on_step(self) -> bool:
            if self.model._n_updates:
                window.tick(self.num_timesteps)
            return not window.done.is_set()

    model.learn(NEVER, callback=WindowCallback())
    return window.figures(versions={"stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__})


DRIVERS: dict[str, Callable[[Settings], dict[str, Any]]] = {
    "parl_lite_impala": ours_impala, "parl_impala": parl_impala, "rllib_impala": rllib_impala,
    "parl_lite_dqn": ours_dqn, "parl_lite_dqn_paddle_target": ours_dqn_paddle_target, "sb3_dqn": sb3_dqn}


def drive(driver: Callable[[Any], dict[str, Any]], settings: Any) -> None:
    """Run one measurement (``driver(settings)``) in this process (the system's own Python) and
    print its result line; then end every process it started."""
    become_subreaper()
    try:
        result = driver(settings)
    except BaseException:  # noqa: BLE001 - said on stderr; the process must end regardless (below)
        import traceback

        traceback.print_exc()
        result = None
    sys.stdout.flush()
    end_processes(descendants(os.getpid()))
    if result is not None:
        print(RESULT_MARK + json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0 if result is not None else 1)  # the peers' non-daemon threads (PARL's, Ray's) must not hold it


# ---------------------------------------------------------------------------------- the bench
@dataclass(frozen=True)
class Run:
    """One measurement: a driver in a system's Python."""

    system: str
    driver: str
    python: str | None  # None: the peer's interpreter was not given
    missing: str = ""  # what to pass to have it


def measure(run: Run, settings: Any, timeout: float, script: str = __file__, echo: bool = False) -> dict[str, Any]:
    """The figures of ``run`` 's driver, run by ``script --driver NAME --settings JSON`` (a
    dataclass's fields), or ``{"skipped": why}``; every process it left is ended. ``echo`` copies
    the driver's stderr to this process's as it comes."""
    if run.python is None:
        return {"skipped": f"no {run.missing} given"}
    command = [run.python, script, "--driver", run.driver, "--settings", json.dumps(asdict(settings))]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err_tail: collections.deque[str] = collections.deque(maxlen=3)
    readers = [threading.Thread(target=_read_lines, args=(process.stdout, out.append), daemon=True),
               threading.Thread(target=_read_lines, args=(process.stderr, _error_line(err_tail, echo)), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        err_tail.append(f"timed out after {timeout:.0f} s")
    finally:
        end_processes(descendants(os.getpid()))  # what it left (orphans come to this subreaper)
    for reader in readers:
        reader.join(timeout=10.0)
    for line in reversed(out):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    return {"skipped": f"{run.system} failed (exit {process.returncode}): {' | '.join(err_tail)}"}


def _read_lines(stream: Any, take: Callable[[str], None]) -> None:
    for line in stream:
        take(line.rstrip("\n"))


def _error_line(tail: "collections.deque[str]", echo: bool) -> Callable[[str], None]:
    """What to do with a driver's line of stderr: keep the last few (the reason of a failure), and
    copy it to this process's stderr when ``echo`` (the progress of a long run)."""
    def take(line: str) -> None:
        if echo:
            print(line, file=sys.stderr, flush=True)
        if line.strip():
            tail.append(line)
    return take


def ratio(ours: dict[str, Any], theirs: dict[str, Any], key: str) -> float | None:
    """``ours[key] / theirs[key]`` when both were measured."""
    if ours.get(key) and theirs.get(key):
        return round(ours[key] / theirs[key], 2)
    return None


def impala_runs(args: argparse.Namespace) -> list[Run]:
    return [Run("parl_lite", "parl_lite_impala", sys.executable),
            Run("parl", "parl_impala", args.parl_python, "--parl-python"),
            Run("rllib", "rllib_impala", args.rllib_python, "--rllib-python")]


def dqn_runs(args: argparse.Namespace) -> list[Run]:
    paddle_target = [Run("parl_lite_target_in_paddle", "parl_lite_dqn_paddle_target", sys.executable)]
    return [Run("parl_lite", "parl_lite_dqn", sys.executable), *(paddle_target if args.dqn_paddle_target else []),
            Run("sb3", "sb3_dqn", args.sb3_python, "--sb3-python")]


def bench(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Every measurement, one after another; the figures side by side."""
    result: dict[str, Any] = {"env": ENV_ID, "frame_skip": FRAME_SKIP,
                              "settings": {key: value for key, value in asdict(settings).items()
                                           if key not in ("actors", "parl_examples")},
                              "load_average_before": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    if args.only in (None, "impala"):
        impala: dict[str, Any] = {}
        for actors in args.actors:
            per_actors = settings.__class__(**{**asdict(settings), "actors": actors})
            row = {run.system: measure(run, per_actors, args.timeout) for run in impala_runs(args)}
            row["fps_vs_parl"] = ratio(row["parl_lite"], row["parl"], "frames_per_s")
            row["fps_vs_rllib"] = ratio(row["parl_lite"], row["rllib"], "frames_per_s")
            row["frames_per_cpu_s_vs_parl"] = ratio(row["parl_lite"], row["parl"], "frames_per_cpu_s")
            row["frames_per_cpu_s_vs_rllib"] = ratio(row["parl_lite"], row["rllib"], "frames_per_cpu_s")
            impala[f"{actors}_actors"] = row
        result["impala"] = impala
    if args.only in (None, "dqn"):
        result["dqn"] = dqn_rounds(args, settings)
    return result


def dqn_rounds(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """``--rounds`` measurements of each DQN, in turn forwards and backwards (parl_lite first in the
    odd rounds, SB3 in the even ones: a machine that speeds up or slows down over the run favours
    neither), and the mean of the per-round ratios with its 95% interval."""
    rounds = []
    runs = dqn_runs(args)
    for index in range(args.rounds):
        measured = {run.system: measure(run, settings, args.timeout) for run in (runs if index % 2 == 0 else runs[::-1])}
        row = {run.system: measured[run.system] for run in runs}
        row["frames_per_cpu_s_vs_sb3"] = ratio(row["parl_lite"], row["sb3"], "frames_per_cpu_s")
        if args.dqn_paddle_target:
            row["target_in_onnxruntime_vs_paddle"] = ratio(row["parl_lite"], row["parl_lite_target_in_paddle"],
                                                           "frames_per_cpu_s")
        rounds.append(row)
    summary: dict[str, Any] = {"rounds": rounds}
    for key in ("frames_per_cpu_s_vs_sb3", "target_in_onnxruntime_vs_paddle"):
        ratios = [row[key] for row in rounds if row.get(key) is not None]
        if ratios:
            mean, half_width = mean_and_interval(ratios)
            summary[key] = {"mean": round(mean, 3), "interval_95": None if half_width is None else round(half_width, 3)}
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each measurement window")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds from the first update to the window")
    parser.add_argument("--actors", type=int, nargs="+", default=[2, 4], help="IMPALA's actor counts")
    parser.add_argument("--num-envs", type=int, default=None, help="games per actor (train_impala.py's ATARI value)")
    parser.add_argument("--unroll", type=int, default=None, help="steps per trajectory (train_impala.py's ATARI value)")
    parser.add_argument("--dqn-learning-starts", type=int, default=1_000,
                        help="DQN: env steps before the first update (epsilon falls to 0.01 over them)")
    parser.add_argument("--dqn-paddle-target", action="store_true",
                        help="DQN: also parl_lite with its target network in paddle, between the other two")
    parser.add_argument("--rounds", type=int, default=1,
                        help="DQN: measurements of each system, in turn forwards and backwards")
    parser.add_argument("--only", choices=("impala", "dqn"), default=None, help="one of the two benchmarks")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds a measurement may take, start-up included")
    parser.add_argument("--parl-python", default=None, help="Python of PARL 2.2.1's environment (atari_peers.sh)")
    parser.add_argument("--parl-examples", default=None, help="PARL 2.2.1's examples/IMPALA folder")
    parser.add_argument("--rllib-python", default=None, help="Python of RLlib's environment")
    parser.add_argument("--sb3-python", default=None, help="Python of Stable-Baselines3's environment")
    add_driver_options(parser, DRIVERS)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.warmup < 0 or args.timeout <= 0 or min(args.actors) <= 0 or args.rounds <= 0:
        parser.error("--seconds, --timeout, --actors and --rounds must be positive, --warmup 0 or more")
    if args.parl_python and not args.parl_examples:
        parser.error("--parl-python needs --parl-examples (PARL's examples/IMPALA folder, atari_peers.sh makes it)")
    return args


def add_driver_options(parser: argparse.ArgumentParser, drivers: dict[str, Any]) -> None:
    """The hidden options by which :func:`measure` runs one driver in a system's Python."""
    parser.add_argument("--driver", choices=sorted(drivers), help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)


def drive_if_asked(args: argparse.Namespace, drivers: dict[str, Any], settings_type: type) -> bool:
    """Run the driver ``--driver`` names with ``--settings`` (see :func:`drive`, which does not
    return); False when no driver was asked for."""
    if not args.driver:
        return False
    drive(drivers[args.driver], settings_type(**json.loads(args.settings)))
    return True


def bench_and_print(bench: Callable[[argparse.Namespace, Any], dict[str, Any]], args: argparse.Namespace,
                    settings: Any) -> None:
    """``bench(args, settings)`` as the subreaper of what it starts; its figures, with
    ``bench_seconds``, printed as one JSON line."""
    become_subreaper()
    started = time.perf_counter()
    result = bench(args, settings)
    result["bench_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result))


def main() -> None:
    args = parse_args()
    if drive_if_asked(args, DRIVERS, Settings):
        return
    atari = _example("train_impala.py").ATARI if args.num_envs is None or args.unroll is None else {}
    settings = Settings(seconds=args.seconds, warmup=args.warmup,
                        num_envs=args.num_envs if args.num_envs is not None else atari["num_envs"],
                        unroll=args.unroll if args.unroll is not None else atari["unroll"],
                        dqn_learning_starts=args.dqn_learning_starts, parl_examples=args.parl_examples)
    bench_and_print(bench, args, settings)


if __name__ == "__main__":
    main()
