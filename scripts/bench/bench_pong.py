"""Pong from pixels: parl_lite's IMPALA towards +18 within a wall-clock budget, and Stable-Baselines3's
PPO given the same frames, in one run.

    python scripts/bench/bench_pong.py --sb3-python /opt/peers/sb3/bin/python     # 60 minutes, then SB3
    python scripts/bench/bench_pong.py --minutes 2 --eval-every 20000 --eval-episodes 2   # a short look

Prints ONE JSON line (progress lines on stderr while it runs). The two systems run one after
another on this machine, each in a fresh process of its own Python, on ``PongNoFrameskip-v4``
(4 frames per agent step):

- **parl_lite**: ``train_impala.py``'s Atari setup (``ATARI``: PARL's IMPALA example's network and
  42x42 frames) with smaller updates (``SMALL_MACHINE``: 4 games per actor, 20-step trajectories,
  averaged losses clipped at a gradient norm of 0.5, lr 5e-4: on 2 cores PARL's 490-step updates
  left the policy uniform for 10M frames, these learned) and ``--actors`` actors on the local
  process pool. Every ``--eval-every`` agent steps the greedy
  policy plays ``--eval-episodes`` whole games; the run stops at the first evaluation whose mean
  reaches ``--target``, or at the first round after ``--minutes`` of wall-clock (counted from the
  start of training, actors' start-up and evaluations included), with a last evaluation then.
- **sb3**: SB3's ``PPO`` with the RL Zoo's Atari values (``CnnPolicy``, ``make_atari_env`` of 8
  games and ``VecFrameStack`` of 4 at 84x84, 128 steps per rollout, 4 epochs of batches of 256,
  learning rate 2.5e-4 and clip range 0.1 both falling linearly to 0, entropy 0.01, value 0.5),
  trained for the agent steps parl_lite took (rounded up to whole rollouts of 1,024 steps),
  evaluated the same way (deterministic actions, whole games, unclipped rewards) at the same step
  marks and at the end. Torch runs on one thread, as paddle does, unless ``--sb3-threads`` says more
  (its CPU-seconds per step then grow a little, its wall-clock per step falls).

SB3 needs many hours for the steps parl_lite takes in one, so its side can be run apart and in parts:

    python scripts/bench/bench_pong.py --ours-from pong.json --sb3-python ... --sb3-state sb3_pong --sb3-hours 2

``--ours-from`` takes parl_lite's figures from an earlier line of this script (its ``--target``,
``--eval-every``, ``--eval-episodes`` and ``--seed`` must be these); ``--sb3-state`` saves SB3's run
in a folder every 32 rollouts and resumes from it (its games start afresh, seeded by the step
count); ``--sb3-hours`` ends this invocation's part, saved (the rollout it stops in is not learned
from). SB3's figures say ``finished``, ``resumed_from_steps`` and torch's ``threads``; its wall-clock
and CPU add up the parts.

Each system's figures: ``steps`` and ``frames``, ``wall_s``, ``cpu_s`` (every process of the run:
read from /proc, the driver being the subreaper of what it starts), ``curve`` (one
``[steps, wall_s, cpu_s, mean return]`` per evaluation), ``final_return`` (the last evaluation),
``solved_at_steps`` and ``solved_at_s`` (the first evaluation at or over ``--target``; null if
none). ``reached_target_within_budget`` says whether parl_lite's first such evaluation came
within ``--minutes``; ``at_equal_steps`` lists ``[steps, parl_lite's evaluation, SB3's]`` at every
step count both evaluated at.
"""
import argparse
import dataclasses
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench_atari import (ENV_ID, FRAME_SKIP, Run, add_driver_options, bench_and_print, cpu_by_kind,
                         drive_if_asked, impala_trainer, measure)

# train_impala.py options: the updates that learned Pong on 2 cores (benchmarks/2026-11-29-pong-impala-two-settings.md)
SMALL_MACHINE = dict(num_envs=4, unroll=20, lr=5e-4, reduction="mean", max_grad_norm=0.5)
SB3_ENVS, SB3_ROLLOUT, SB3_EPOCHS, SB3_BATCH, SB3_LR, SB3_CLIP = 8, 128, 4, 256, 2.5e-4, 0.1  # RL Zoo's Atari PPO
SB3_SAVE_EVERY = 32 * SB3_ENVS * SB3_ROLLOUT  # agent steps between saves of SB3's run (--sb3-state)


@dataclass(frozen=True)
class PongSettings:
    """What both systems are given (sent to the drivers as JSON)."""

    minutes: float
    target: float
    eval_every: int
    eval_episodes: int
    actors: int
    seed: int
    steps: int = 0  # SB3's budget: the agent steps parl_lite took
    sb3_state: str | None = None  # SB3's run is saved in this folder and resumed from it
    sb3_hours: float | None = None  # SB3's wall-clock in this invocation, then saved to go on later
    sb3_threads: int = 1  # torch's threads in SB3's process


class Curve:
    """Evaluations as they come: ``[steps, wall_s, cpu_s, mean return]`` each, timed from
    :meth:`start`, CPU over this process and its descendants."""

    def __init__(self, target: float) -> None:
        self.target = target
        self.points: list[list[float]] = []
        self.started = time.perf_counter()
        self.cpu_before = 0.0
        self.earlier_wall_s = self.earlier_cpu_s = 0.0  # of the invocations a resumed run came from

    def start(self) -> None:
        self.started, self.cpu_before = time.perf_counter(), self.cpu()

    def resume(self, saved: dict[str, Any]) -> None:
        """Go on from :meth:`saved` of an earlier invocation: its evaluations, wall-clock and CPU."""
        self.points, self.earlier_wall_s, self.earlier_cpu_s = saved["curve"], saved["wall_s"], saved["cpu_s"]

    def saved(self) -> dict[str, Any]:
        return {"curve": self.points, "wall_s": round(self.elapsed(), 1), "cpu_s": round(self.cpu_used(), 1)}

    def cpu(self) -> float:
        return sum(cpu_by_kind(os.getpid()).values())

    def cpu_used(self) -> float:
        return self.earlier_cpu_s + self.cpu() - self.cpu_before

    def elapsed(self) -> float:
        return self.earlier_wall_s + time.perf_counter() - self.started

    def this_invocation_s(self) -> float:
        return time.perf_counter() - self.started

    def evaluated_at(self, steps: int) -> bool:
        return bool(self.points) and self.points[-1][0] == steps

    def add(self, steps: int, score: float, who: str) -> None:
        point = [int(steps), round(self.elapsed(), 1), round(self.cpu_used(), 1), round(float(score), 2)]
        self.points.append(point)
        print(f"{who}: {point[0]:,} steps ({point[0] * FRAME_SKIP:,} frames), {point[1]:.0f} s, {point[2]:.0f} CPU-s: "
              f"evaluation {point[3]:+.2f}", file=sys.stderr, flush=True)

    def figures(self, steps: int, **extra: Any) -> dict[str, Any]:
        solved = next((point for point in self.points if point[3] >= self.target), None)
        return {"steps": int(steps), "frames": int(steps) * FRAME_SKIP, "wall_s": round(self.elapsed(), 1),
                "cpu_s": round(self.cpu_used(), 1), "curve": self.points,
                "final_return": self.points[-1][3] if self.points else None,
                "solved_at_steps": solved[0] if solved else None, "solved_at_s": solved[1] if solved else None,
                **extra}


def ours_pong(settings: PongSettings) -> dict[str, Any]:
    """parl_lite's IMPALA until the target or the wall-clock budget."""
    import paddle

    import parl_lite
    from parl_lite.train import Callback
    from parl_lite.version import __version__

    trainer = impala_trainer(settings.actors, SMALL_MACHINE, seed=settings.seed, eval_every=settings.eval_every,
                             eval_episodes=settings.eval_episodes, target=settings.target)
    curve = Curve(settings.target)
    budget = settings.minutes * 60.0

    class Budget(Callback):
        def on_training_start(self, trainer: Any) -> None:
            curve.start()

        def on_evaluation(self, trainer: Any, score: float) -> bool:
            if not curve.evaluated_at(trainer.steps):  # on_step's last evaluation came first
                curve.add(trainer.steps, score, "parl_lite")
            return True

        def on_step(self, trainer: Any) -> bool:
            if curve.elapsed() < budget:
                return True
            if not curve.evaluated_at(trainer.steps):
                curve.add(trainer.steps, trainer.evaluate(), "parl_lite")
            return False

    try:
        trainer.learn(10**12, callback=Budget(), progress_bar=False)
    finally:
        parl_lite.shutdown()  # drive() ends with os._exit, skipping atexit
    return curve.figures(trainer.steps, updates=trainer.updates,
                         versions={"parl_lite": __version__, "paddle": paddle.__version__})


def sb3_pong(settings: PongSettings) -> dict[str, Any]:
    """SB3's PPO with the RL Zoo's Atari values for ``settings.steps`` agent steps (whole rollouts);
    with ``settings.sb3_state``, saved there every :data:`SB3_SAVE_EVERY` steps and resumed from it."""
    import ale_py
    import gymnasium as gym
    import stable_baselines3
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecFrameStack

    torch.set_num_threads(settings.sb3_threads)
    gym.register_envs(ale_py)
    state = Sb3State(settings.sb3_state) if settings.sb3_state else None
    saved = state.load() if state else None
    env = VecFrameStack(make_atari_env(ENV_ID, n_envs=SB3_ENVS, seed=settings.seed + (saved["steps"] if saved else 0)),
                        n_stack=4)
    whole_games = {"terminal_on_life_loss": False, "clip_reward": False}
    eval_env = VecFrameStack(make_atari_env(ENV_ID, n_envs=1, seed=10_000 + settings.seed,
                                            wrapper_kwargs=whole_games), n_stack=4)
    curve = Curve(settings.target)
    if state and saved:
        model = PPO.load(state.model_path, env=env, device="cpu")
        curve.resume(saved)
    else:
        model = PPO("CnnPolicy", env, n_steps=SB3_ROLLOUT, n_epochs=SB3_EPOCHS, batch_size=SB3_BATCH,
                    learning_rate=lambda remaining: remaining * SB3_LR,
                    clip_range=lambda remaining: remaining * SB3_CLIP,
                    ent_coef=0.01, vf_coef=0.5, seed=settings.seed, device="cpu", verbose=0)
    hours = settings.sb3_hours

    def evaluate() -> None:
        returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=settings.eval_episodes, deterministic=True,
                                     return_episode_rewards=True)
        curve.add(model.num_timesteps, sum(returns) / len(returns), "sb3")

    def save() -> None:
        if state:
            state.save(model, {"steps": model.num_timesteps, **curve.saved()})

    class EveryEvaluation(BaseCallback):
        def _on_training_start(self) -> None:
            self.next_mark = (self.num_timesteps // settings.eval_every + 1) * settings.eval_every
            self.next_save = self.num_timesteps + SB3_SAVE_EVERY

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_mark:
                self.next_mark += settings.eval_every
                evaluate()
            if self.num_timesteps >= self.next_save:
                self.next_save += SB3_SAVE_EVERY
                save()
            return hours is None or curve.this_invocation_s() < hours * 3600.0

    curve.start()
    left = settings.steps - model.num_timesteps
    if left > 0:
        model.learn(left, callback=EveryEvaluation(), reset_num_timesteps=not saved)
    finished = model.num_timesteps >= settings.steps
    if finished and not curve.evaluated_at(model.num_timesteps):
        evaluate()
    save()
    return curve.figures(model.num_timesteps, finished=finished, resumed_from_steps=saved["steps"] if saved else None,
                         threads=torch.get_num_threads(),
                         versions={"stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__})


class Sb3State:
    """SB3's run in a folder: ``ppo.zip`` (the model, with its optimizer) and ``progress.json`` (steps,
    evaluations, wall-clock and CPU so far), each replaced atomically (by hand: SB3's Python has no
    parl_lite, whose ``write_bytes_atomically`` does the same)."""

    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.model_path = os.path.join(folder, "ppo.zip")
        self.progress_path = os.path.join(folder, "progress.json")

    def load(self) -> dict[str, Any] | None:
        if not os.path.exists(self.progress_path):
            return None
        with open(self.progress_path) as file:
            return json.load(file)

    def save(self, model: Any, progress: dict[str, Any]) -> None:
        model.save(self.model_path + ".tmp.zip")
        os.replace(self.model_path + ".tmp.zip", self.model_path)
        with open(self.progress_path + ".tmp", "w") as file:
            json.dump(progress, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(self.progress_path + ".tmp", self.progress_path)


DRIVERS = {"parl_lite_pong": ours_pong, "sb3_pong": sb3_pong}


def bench(args: argparse.Namespace, settings: PongSettings) -> dict[str, Any]:
    """parl_lite's run (or an earlier one's, ``--ours-from``), then SB3's for as many steps."""
    if args.ours_from:
        ours = earlier_run(args.ours_from, settings)
    else:
        ours = measure(Run("parl_lite", "parl_lite_pong", sys.executable), settings, args.timeout * 3600, __file__,
                       echo=True)
    if "steps" in ours:
        sb3_settings = dataclasses.replace(settings, steps=ours["steps"], sb3_state=args.sb3_state,
                                           sb3_hours=args.sb3_hours, sb3_threads=args.sb3_threads)
        sb3 = measure(Run("sb3", "sb3_pong", args.sb3_python, "--sb3-python"), sb3_settings, args.timeout * 3600,
                      __file__, echo=True)
    else:
        sb3 = {"skipped": "parl_lite's run gave no step count to match"}
    solved_at = ours.get("solved_at_s")
    return {"env": ENV_ID, "frame_skip": FRAME_SKIP, "settings": asdict(settings),
            "load_average_before": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
            "parl_lite": ours, "sb3": sb3, "at_equal_steps": at_equal_steps(ours, sb3),
            "reached_target_within_budget": solved_at is not None and solved_at <= settings.minutes * 60.0}


# what an earlier run's settings must share with this one's for its figures to stand beside SB3's
MATCHED = ("target", "eval_every", "eval_episodes", "seed")


def earlier_run(path: str, settings: PongSettings) -> dict[str, Any]:
    """parl_lite's figures from the last line of an earlier ``bench_pong.py`` output in ``path``.

    Raises:
        SystemExit: the file cannot be read, holds no such line, or its settings differ from these
            in one of :data:`MATCHED` (named).
    """
    try:
        with open(path) as file:
            lines = [line for line in file.read().splitlines() if line.strip()]
        earlier = json.loads(lines[-1])
        ours, earlier_settings = earlier["parl_lite"], earlier["settings"]
    except (OSError, IndexError, ValueError, KeyError, TypeError) as error:
        reason = f"{type(error).__name__}: {error}"
        raise SystemExit(f"--ours-from {path}: not a bench_pong.py output line ({reason})") from None
    if "steps" not in ours:
        raise SystemExit(f"--ours-from {path}: parl_lite's run there has no figures: {ours}")
    differ = [f"{key} {earlier_settings.get(key)!r} there, {getattr(settings, key)!r} here" for key in MATCHED
              if earlier_settings.get(key) != getattr(settings, key)]
    if differ:
        raise SystemExit(f"--ours-from {path}: its settings differ: {'; '.join(differ)}")
    return {**ours, "from": path}


def at_equal_steps(ours: dict[str, Any], sb3: dict[str, Any]) -> list[list[float]]:
    """``[steps, parl_lite's evaluation, SB3's]`` at every step count both evaluated at."""
    theirs = {point[0]: point[3] for point in sb3.get("curve", [])}
    return [[point[0], point[3], theirs[point[0]]] for point in ours.get("curve", []) if point[0] in theirs]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0, help="parl_lite's wall-clock budget")
    parser.add_argument("--target", type=float, default=18.0, help="the evaluation mean that counts as solved")
    parser.add_argument("--eval-every", type=int, default=250_000, help="agent steps between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=10, help="games per evaluation")
    parser.add_argument("--actors", type=int, default=2, help="parl_lite's rollout actors")
    parser.add_argument("--seed", type=int, default=1, help="seeds both systems")
    parser.add_argument("--timeout", type=float, default=6.0, help="hours each system may take, start-up included")
    parser.add_argument("--sb3-python", default=None, help="Python of Stable-Baselines3's environment")
    parser.add_argument("--ours-from", default=None,
                        help="a file holding an earlier bench_pong.py line: its parl_lite run, not a new one")
    parser.add_argument("--sb3-state", default=None,
                        help="folder SB3's run is saved in as it goes, and resumed from when it holds one")
    parser.add_argument("--sb3-hours", type=float, default=None,
                        help="SB3's wall-clock in this invocation; then its run is saved (--sb3-state) to go on")
    parser.add_argument("--sb3-threads", type=int, default=1, help="torch's threads in SB3's process")
    add_driver_options(parser, DRIVERS)
    args = parser.parse_args(argv)
    if min(args.minutes, args.eval_every, args.eval_episodes, args.actors, args.timeout, args.sb3_threads) <= 0:
        parser.error("--minutes, --eval-every, --eval-episodes, --actors, --timeout and --sb3-threads must be positive")
    if args.sb3_hours is not None and (args.sb3_hours <= 0 or not args.sb3_state):
        parser.error("--sb3-hours must be positive and needs --sb3-state, where the run is saved to go on")
    return args


def main() -> None:
    args = parse_args()
    if drive_if_asked(args, DRIVERS, PongSettings):
        return
    settings = PongSettings(minutes=args.minutes, target=args.target, eval_every=args.eval_every,
                            eval_episodes=args.eval_episodes, actors=args.actors, seed=args.seed)
    bench_and_print(bench, args, settings)


if __name__ == "__main__":
    main()
