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
  marks and at the end. Torch runs on one thread, as paddle does.

Each system's figures: ``steps`` and ``frames``, ``wall_s``, ``cpu_s`` (every process of the run:
read from /proc, the driver being the subreaper of what it starts), ``curve`` (one
``[steps, wall_s, cpu_s, mean return]`` per evaluation), ``final_return`` (the last evaluation),
``solved_at_steps`` and ``solved_at_s`` (the first evaluation at or over ``--target``; null if
none). ``reached_target_within_budget`` says whether parl_lite's first such evaluation came
within ``--minutes``.
"""
import argparse
import dataclasses
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


class Curve:
    """Evaluations as they come: ``[steps, wall_s, cpu_s, mean return]`` each, timed from
    :meth:`start`, CPU over this process and its descendants."""

    def __init__(self, target: float) -> None:
        self.target = target
        self.points: list[list[float]] = []
        self.started = time.perf_counter()
        self.cpu_before = 0.0

    def start(self) -> None:
        self.started, self.cpu_before = time.perf_counter(), self.cpu()

    def cpu(self) -> float:
        return sum(cpu_by_kind(os.getpid()).values())

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def evaluated_at(self, steps: int) -> bool:
        return bool(self.points) and self.points[-1][0] == steps

    def add(self, steps: int, score: float, who: str) -> None:
        point = [int(steps), round(self.elapsed(), 1), round(self.cpu() - self.cpu_before, 1), round(float(score), 2)]
        self.points.append(point)
        print(f"{who}: {point[0]:,} steps ({point[0] * FRAME_SKIP:,} frames), {point[1]:.0f} s, {point[2]:.0f} CPU-s: "
              f"evaluation {point[3]:+.2f}", file=sys.stderr, flush=True)

    def figures(self, steps: int, **extra: Any) -> dict[str, Any]:
        solved = next((point for point in self.points if point[3] >= self.target), None)
        return {"steps": int(steps), "frames": int(steps) * FRAME_SKIP, "wall_s": round(self.elapsed(), 1),
                "cpu_s": round(self.cpu() - self.cpu_before, 1), "curve": self.points,
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
    """SB3's PPO with the RL Zoo's Atari values for ``settings.steps`` agent steps (whole rollouts)."""
    import ale_py
    import gymnasium as gym
    import stable_baselines3
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecFrameStack

    torch.set_num_threads(1)
    gym.register_envs(ale_py)
    env = VecFrameStack(make_atari_env(ENV_ID, n_envs=SB3_ENVS, seed=settings.seed), n_stack=4)
    whole_games = {"terminal_on_life_loss": False, "clip_reward": False}
    eval_env = VecFrameStack(make_atari_env(ENV_ID, n_envs=1, seed=10_000 + settings.seed,
                                            wrapper_kwargs=whole_games), n_stack=4)
    model = PPO("CnnPolicy", env, n_steps=SB3_ROLLOUT, n_epochs=SB3_EPOCHS, batch_size=SB3_BATCH,
                learning_rate=lambda remaining: remaining * SB3_LR, clip_range=lambda remaining: remaining * SB3_CLIP,
                ent_coef=0.01, vf_coef=0.5, seed=settings.seed, device="cpu", verbose=0)
    curve = Curve(settings.target)

    def evaluate() -> None:
        returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=settings.eval_episodes, deterministic=True,
                                     return_episode_rewards=True)
        curve.add(model.num_timesteps, sum(returns) / len(returns), "sb3")

    class EveryEvaluation(BaseCallback):
        def _on_training_start(self) -> None:
            self.next_mark = settings.eval_every

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_mark:
                self.next_mark += settings.eval_every
                evaluate()
            return True

    curve.start()
    model.learn(settings.steps, callback=EveryEvaluation())
    if not curve.evaluated_at(model.num_timesteps):
        evaluate()
    return curve.figures(model.num_timesteps,
                         versions={"stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__})


DRIVERS = {"parl_lite_pong": ours_pong, "sb3_pong": sb3_pong}


def bench(args: argparse.Namespace, settings: PongSettings) -> dict[str, Any]:
    """parl_lite's run, then SB3's for as many steps."""
    ours = measure(Run("parl_lite", "parl_lite_pong", sys.executable), settings, args.timeout * 3600, __file__,
                   echo=True)
    if "steps" in ours:
        sb3_settings = dataclasses.replace(settings, steps=ours["steps"])
        sb3 = measure(Run("sb3", "sb3_pong", args.sb3_python, "--sb3-python"), sb3_settings, args.timeout * 3600,
                      __file__, echo=True)
    else:
        sb3 = {"skipped": "parl_lite's run gave no step count to match"}
    solved_at = ours.get("solved_at_s")
    return {"env": ENV_ID, "frame_skip": FRAME_SKIP, "settings": asdict(settings),
            "load_average_before": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
            "parl_lite": ours, "sb3": sb3,
            "reached_target_within_budget": solved_at is not None and solved_at <= settings.minutes * 60.0}


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
    add_driver_options(parser, DRIVERS)
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.eval_every <= 0 or args.eval_episodes <= 0 or args.actors <= 0 or args.timeout <= 0:
        parser.error("--minutes, --eval-every, --eval-episodes, --actors and --timeout must be positive")
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
