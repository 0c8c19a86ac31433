"""Every algorithm against Stable-Baselines3, side by side in one run, and raw throughputs.

    python scripts/bench/bench_algos.py                          # time to threshold: all six below, seed 1
    python scripts/bench/bench_algos.py --algos PPO --seeds 1 2 3
    python scripts/bench/bench_algos.py --mode throughput        # env steps/s and updates/s of all nine
    python scripts/bench/bench_algos.py --mode parity            # PPO, A2C and SAC updates, ours and SB3's

Prints ONE JSON line.

``--mode threshold``: for each seed, each algorithm runs its script (``scripts/examples/train_*.py`` on
CartPole-v1 to an evaluation mean of 475, ``scripts/examples/train_{sac,td3,ddpg}.py`` on Pendulum-v1 to -200; greedy
10-episode evaluations every ``eval_every`` steps) and then, when ``stable-baselines3`` is
importable, SB3's implementation with RL-Zoo's hyperparameters for the task under the same
evaluation protocol (same evaluation seeds and frequency, evaluations excluded from the time); the
runs alternate so that a load change hits both. Each run is a fresh process (start-up excluded from
the figures). torch runs on one thread, as paddle does. Per algorithm, ``over_seeds`` gives the
medians and means of both and on how many seeds ours was faster.

``--mode parity`` (needs ``stable-baselines3``, and ``mujoco`` for SAC): our PPO and A2C against
SB3's, one update each from the same weights on the same CartPole batch (RL-Zoo's settings, the first
update of a run), and ``--sac-updates`` (4) SAC updates on Hopper-v5 batches with the same Gaussian
draws (:func:`sac_updates_side_by_side`): the largest difference between the updated weights, beside
the largest change the updates made; with many updates, where float rounding has grown into visible
weight differences, the quantities a different update would move apart: each side's temperature,
distance travelled by the weights and mean Q-value.

``--mode throughput``: the baseline (the same environments stepped with random actions), and per
algorithm environment steps/s while acting as the loops do and gradient updates/s on a batch of the
loop's size; A3C and IMPALA run their whole loop (2 remote actors + the learner).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@dataclass(frozen=True)
class ThresholdRun:
    """One algorithm's time-to-threshold run: our script and SB3's RL-Zoo counterpart."""
    script: str
    env: str
    eval_every: int
    target: float
    sb3_budget: int  # RL-Zoo's n_timesteps
    eval_seed_base: int  # the script's first evaluation seed is base + stride * seed
    eval_seed_stride: int

    def eval_seed(self, seed: int) -> int:
        """First evaluation seed, as the script computes it."""
        return self.eval_seed_base + self.eval_seed_stride * seed


CARTPOLE_EVAL_SEEDS = (10_000, 100)  # parl_lite.train's default eval_seed
PENDULUM_EVAL_SEEDS = (10_000_000, 1000)  # the train_{sac,td3,ddpg}.py scripts' eval_seed
THRESHOLD_RUNS = {
    "PPO": ThresholdRun("train_ppo.py", "CartPole-v1", 2_560, 475.0, 100_000, *CARTPOLE_EVAL_SEEDS),
    "A2C": ThresholdRun("train_a2c.py", "CartPole-v1", 5_000, 475.0, 500_000, *CARTPOLE_EVAL_SEEDS),
    "DQN": ThresholdRun("train_dqn.py", "CartPole-v1", 4_096, 475.0, 100_000, *CARTPOLE_EVAL_SEEDS),
    "DDPG": ThresholdRun("train_ddpg.py", "Pendulum-v1", 500, -200.0, 30_000, *PENDULUM_EVAL_SEEDS),
    "TD3": ThresholdRun("train_td3.py", "Pendulum-v1", 500, -200.0, 30_000, *PENDULUM_EVAL_SEEDS),
    "SAC": ThresholdRun("train_sac.py", "Pendulum-v1", 500, -200.0, 30_000, *PENDULUM_EVAL_SEEDS),
}


# ---------------------------------------------------------------------------------- threshold
def ours_to_threshold(algo: str, seed: int) -> dict:
    """Run the script; its JSON summary gives steps and training seconds."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, str(EXAMPLES / THRESHOLD_RUNS[algo].script), "--seed", str(seed),
                               "--progress-bar", "--save", str(Path(folder) / "run.h5")],
                              capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"steps": summary["solved_at"], "train_s": round(summary["train_seconds"], 2),
            "cpu_s": round(summary["train_cpu_seconds"], 2), "eval_return": summary["eval_return"]}


def sb3_model(algo: str, seed: int):
    """SB3's implementation with RL-Zoo's hyperparameters for the task (CartPole-v1 or Pendulum-v1;
    the Pendulum budgets are raised from RL-Zoo's 20k to our scripts' 30k), with a logger that writes
    nothing (SB3's default one makes a folder under the temporary directory for each model)."""
    from stable_baselines3.common.logger import Logger

    model = _sb3_algorithm(algo, seed)
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def _sb3_algorithm(algo: str, seed: int):
    import numpy as np
    from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.noise import NormalActionNoise

    linear = lambda start: (lambda remaining: remaining * start)  # noqa: E731 - SB3's schedule form
    if algo == "PPO":
        return PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=seed), n_steps=32, batch_size=256,
                   gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3),
                   clip_range=linear(0.2), seed=seed, device="cpu")
    if algo == "A2C":
        return A2C("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=seed), ent_coef=0.0, seed=seed,
                   device="cpu")
    if algo == "DQN":
        return DQN("MlpPolicy", "CartPole-v1", learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                   learning_starts=1_000, gamma=0.99, target_update_interval=10, train_freq=256,
                   gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                   policy_kwargs=dict(net_arch=[256, 256]), seed=seed, device="cpu")
    if algo == "SAC":
        return SAC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, seed=seed, device="cpu")
    # DDPG and TD3: RL-Zoo's Pendulum-v1 entries are the same
    return {"DDPG": DDPG, "TD3": TD3}[algo](
        "MlpPolicy", "Pendulum-v1", gamma=0.98, buffer_size=200_000, learning_starts=10_000,
        action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)), gradient_steps=-1,
        train_freq=(1, "episode"), learning_rate=1e-3, policy_kwargs=dict(net_arch=[400, 300]), seed=seed,
        device="cpu")


def sb3_to_threshold(algo: str, seed: int) -> dict:
    """SB3 under our evaluation protocol, in this process (run by a child)."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)
    run = THRESHOLD_RUNS[algo]
    model = sb3_model(algo, seed)

    class Threshold(BaseCallback):
        """Our evaluation protocol: 10 greedy episodes from the script's evaluation seeds."""

        def __init__(self) -> None:
            super().__init__()
            self.last_eval, self.solved_at, self.score = 0, None, float("nan")
            self.eval_seconds = self.eval_cpu_seconds = 0.0
            self.env = gym.make(run.env)

        def _on_step(self) -> bool:
            if self.num_timesteps - self.last_eval < run.eval_every:
                return True
            self.last_eval = self.num_timesteps
            started, cpu_started = time.perf_counter(), time.process_time()
            totals = []
            for k in range(10):
                obs, _ = self.env.reset(seed=run.eval_seed(seed) + k)
                total, done = 0.0, False
                while not done:
                    action, _ = self.model.predict(obs, deterministic=True)
                    obs, reward, terminated, truncated, _ = self.env.step(action)
                    total, done = total + float(reward), terminated or truncated
                totals.append(total)
            self.score = float(np.mean(totals))
            self.eval_seconds += time.perf_counter() - started
            self.eval_cpu_seconds += time.process_time() - cpu_started
            if self.score >= run.target:
                self.solved_at = self.num_timesteps
                return False
            return True

    callback = Threshold()
    started, cpu_started = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=run.sb3_budget, callback=callback)
    wall = time.perf_counter() - started - callback.eval_seconds
    cpu = time.process_time() - cpu_started - callback.eval_cpu_seconds
    return {"steps": callback.solved_at, "train_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "eval_return": callback.score}


def over_seeds(runs: dict) -> dict:
    """Medians and means over the seeds of one algorithm's runs, ours and SB3's (steps: of the
    solved runs; seconds: of all, an unsolved run with what it spent), and on how many seeds ours
    was faster."""
    import numpy as np

    summary: dict = {}
    for side in ("ours", "sb3"):
        entries = [seed_runs[side] for seed_runs in runs.values() if side in seed_runs]
        if not entries:
            continue
        solved_steps = [e["steps"] for e in entries if e["steps"] is not None]
        seconds = [e["train_s"] for e in entries]
        summary[side] = {"solved": len(solved_steps), "runs": len(entries),
                         "median_steps": float(np.median(solved_steps)) if solved_steps else None,
                         "median_train_s": round(float(np.median(seconds)), 2),
                         "mean_train_s": round(float(np.mean(seconds)), 2)}
    if "sb3" in summary:
        summary["ours_faster_on"] = sum(r["ours"]["train_s"] < r["sb3"]["train_s"] for r in runs.values())
    return summary


def threshold_mode(algos: list[str], seeds: list[int]) -> dict:
    try:
        import stable_baselines3
        sb3_version: str | None = stable_baselines3.__version__
    except ImportError:
        sb3_version = None
    result: dict = {"sb3": sb3_version or "not installed: pip install stable-baselines3"}
    for seed in seeds:
        for algo in algos:
            row = result.setdefault(f"{algo}_{THRESHOLD_RUNS[algo].env.split('-')[0]}", {})
            row[f"seed{seed}"] = entry = {"ours": ours_to_threshold(algo, seed)}
            if sb3_version:
                done = subprocess.run([sys.executable, __file__, "--sb3-run", algo, str(seed)],
                                      capture_output=True, text=True, check=True)
                entry["sb3"] = json.loads(done.stdout.strip().splitlines()[-1])
    for key in [k for k in result if k != "sb3"]:
        result[key]["over_seeds"] = over_seeds(result[key])
    return result


# ---------------------------------------------------------------------------------- parity
def _layer_pairs(model, policy) -> dict:
    """Each MLPActorCritic layer by name, with its counterpart in SB3's ActorCriticPolicy."""
    return {"pi1": (model.pi1, policy.mlp_extractor.policy_net[0]),
            "pi2": (model.pi2, policy.mlp_extractor.policy_net[2]),
            "vf1": (model.vf1, policy.mlp_extractor.value_net[0]),
            "vf2": (model.vf2, policy.mlp_extractor.value_net[2]),
            "pi_out": (model.pi_out, policy.action_net), "vf_out": (model.vf_out, policy.value_net)}


def _sb3_weights_from(model, policy) -> None:
    """Copy an MLPActorCritic's weights into SB3's policy (paddle keeps [in, out], torch [out, in])."""
    import torch

    with torch.no_grad():
        for ours, theirs in _layer_pairs(model, policy).values():
            theirs.weight.copy_(torch.from_numpy(ours.weight.numpy().T.copy()))
            theirs.bias.copy_(torch.from_numpy(ours.bias.numpy()))


def _weights(model, policy) -> dict[str, tuple]:
    """Each layer's parameters, ours and SB3's, as numpy arrays in paddle's layout."""
    weights = {}
    for name, (ours, theirs) in _layer_pairs(model, policy).items():
        weights[f"{name}.weight"] = (ours.weight.numpy(), theirs.weight.detach().numpy().T)
        weights[f"{name}.bias"] = (ours.bias.numpy(), theirs.bias.detach().numpy())
    return weights


def one_update_side_by_side(algo: str) -> dict:
    """One update of our PPO or A2C and of SB3's (RL-Zoo's CartPole-v1 settings, the first update of
    a run) from the same weights on the same batch: how far apart the results are, against how far
    the update moved the weights."""
    import numpy as np
    import paddle
    import torch

    import parl_lite
    from parl_lite.algorithms import A2C, PPO
    from parl_lite.core.samples import AdvantageBatch
    from parl_lite.utils.models import MLPActorCritic
    from parl_lite.utils.rollout import VectorRollout

    torch.set_num_threads(1)
    paddle.seed(0)
    model = MLPActorCritic(4, 2, 64)
    if algo == "PPO":
        ours = PPO(model, clip_param=0.2, value_loss_coef=1.0, entropy_coef=0.0, initial_lr=1e-3, max_grad_norm=0.5,
                   use_clipped_value_loss=False)
        steps, gamma, gae_lambda, epochs = 32, 0.98, 0.8, 20
    else:
        ours = A2C(model, 1.0, lr=7e-4, optimizer="rmsprop", max_grad_norm=0.5, reduction="mean")
        steps, gamma, gae_lambda, epochs = 5, 0.99, 1.0, 1
    agent = parl_lite.Agent(ours)
    rollout = VectorRollout("CartPole-v1", 8, seed=0).collect(_recording(agent), steps)
    sample = AdvantageBatch.from_rollout(rollout, ours.value, gamma, gae_lambda)
    sb3 = sb3_model(algo, 0)
    _sb3_weights_from(model, sb3.policy)
    before = {name: pair[0].copy() for name, pair in _weights(model, sb3.policy).items()}
    buffer = sb3.rollout_buffer
    buffer.reset()
    shaped = {key: array.reshape(steps, 8, *array.shape[1:]) for key, array in sample.arrays().items()}
    for t in range(steps):  # (A2C's update reads neither the old values nor the log-probs)
        buffer.add(shaped["obs"][t], shaped["actions"][t], np.zeros(8), np.zeros(8),
                   torch.from_numpy(shaped["values"][t]), torch.from_numpy(shaped["log_probs"][t]))
    buffer.advantages[:], buffer.returns[:] = shaped["advantages"], shaped["returns"]
    sb3.train()
    for _ in range(epochs):  # RL-Zoo's PPO batch fits one minibatch: each epoch is one step on it
        agent.learn_from(sample)
    after = _weights(model, sb3.policy)
    difference = max(float(np.abs(mine - theirs).max()) for mine, theirs in after.values())
    step = max(float(np.abs(mine - before[name]).max()) for name, (mine, _) in after.items())
    return {"max_abs_difference_ours_vs_sb3": difference, "max_abs_weight_change": step}


BATCH_POOL = 40  # distinct Hopper batches, cycled through by a long side-by-side run


def sac_updates_side_by_side(updates: int = 4) -> dict:
    """``updates`` updates of our SAC and of SB3's (RL-Zoo's Hopper-v5 settings: 256 x 256 networks,
    torch's initialisation, the temperature learned from 1) from the same weights, on the same batches
    of random-action Hopper transitions (at most :data:`BATCH_POOL` distinct ones, cycled), with the
    same Gaussian draws (both libraries' draws replaced by one array each, given in each side's order:
    ours samples at the next observations first): how far apart the weights end, against how far the
    updates moved them; each side's ``log_alpha``, distance travelled by the weights (L2 over every
    layer) and mean Q-value of the first critic on the last batch."""
    import numpy as np
    import paddle
    import torch
    import torch.distributions.normal as torch_normal
    from stable_baselines3 import SAC as SB3SAC
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    from parl_lite.algorithms import SAC
    from parl_lite.utils.models import MLPActorQ

    torch.set_num_threads(1)
    paddle.seed(0)
    model = MLPActorQ(11, 3, twin_q=True, gaussian=True, net_arch=[256, 256], init="torch")
    ours = SAC(model, gamma=0.99, tau=0.005, alpha=1.0, actor_lr=3e-4, critic_lr=3e-4, alpha_lr=3e-4,
               log_std_bounds=(-20.0, 2.0))
    sb3 = SB3SAC("MlpPolicy", "Hopper-v5", learning_rate=3e-4, batch_size=256, ent_coef="auto", seed=0, device="cpu")
    sb3.set_logger(Logger(folder=None, output_formats=[]))
    pairs = _sac_layer_pairs(model, sb3.policy)
    with torch.no_grad():
        for layer, theirs, columns in pairs:
            theirs.weight.copy_(torch.from_numpy(layer.weight.numpy()[:, columns].T.copy()))
            theirs.bias.copy_(torch.from_numpy(layer.bias.numpy()[columns].copy()))
        sb3.policy.critic_target.load_state_dict(sb3.policy.critic.state_dict())
    before = [layer.weight.numpy()[:, columns].copy() for layer, _, columns in pairs]
    batches = _hopper_batches(256, min(updates, BATCH_POOL))
    draws: list[np.ndarray] = []
    torch_draw, paddle_randn = torch_normal._standard_normal, paddle.randn
    torch_normal._standard_normal = lambda shape, dtype, device: torch.from_numpy(draws.pop(0))
    paddle.randn = lambda shape, *args, **kwargs: paddle.to_tensor(draws.pop(0))
    rng = np.random.default_rng(0)
    try:
        for index in range(updates):
            obs, action, reward, next_obs, terminal = batches[index % len(batches)]
            at_obs, at_next = (rng.standard_normal((256, 3)).astype(np.float32) for _ in range(2))
            draws[:] = [at_next, at_obs]
            ours.learn(*(paddle.to_tensor(array) for array in (obs, action, reward, next_obs, terminal)))
            samples = ReplayBufferSamples(*(torch.from_numpy(array) for array in
                                            (obs, action, next_obs, terminal[:, None], reward[:, None])))
            sb3.replay_buffer.sample = lambda batch_size, env=None, samples=samples: samples
            draws[:] = [at_obs, at_next]
            sb3.train(gradient_steps=1, batch_size=256)
    finally:
        torch_normal._standard_normal, paddle.randn = torch_draw, paddle_randn
    mine = [layer.weight.numpy()[:, columns] for layer, _, columns in pairs]
    theirs = [layer.weight.detach().numpy().T for _, layer, _ in pairs]
    with torch.no_grad():
        q_sb3 = float(sb3.policy.critic(torch.from_numpy(obs), torch.from_numpy(action))[0].mean())
    q_ours = float(model.value(paddle.to_tensor(obs), paddle.to_tensor(action))[0].mean())
    def largest(left: list, right: list) -> float:
        return max(float(np.abs(a - b).max()) for a, b in zip(left, right, strict=True))

    return {"updates": updates, "max_abs_difference_ours_vs_sb3": largest(mine, theirs),
            "max_abs_weight_change": largest(mine, before),
            "log_alpha_ours": float(ours.temperature.log_alpha.numpy()[0]),
            "log_alpha_sb3": float(sb3.log_ent_coef.detach().numpy()[0]),
            "weight_distance_travelled_ours": _distance(mine, before),
            "weight_distance_travelled_sb3": _distance(theirs, before),
            "mean_q_ours": q_ours, "mean_q_sb3": q_sb3}


def _distance(weights: list, start: list) -> float:
    """L2 distance between two lists of arrays, over all of them."""
    return math.sqrt(sum(float(((now - then) ** 2).sum()) for now, then in zip(weights, start, strict=True)))


def _sac_layer_pairs(model, policy) -> list[tuple]:
    """``(our layer, SB3's layer, our columns it holds)`` for each linear layer of an MLPActorQ (twin,
    Gaussian): our actor's last layer is SB3's ``mu`` and ``log_std`` side by side."""
    actor = [layer for layer in model.actor if hasattr(layer, "weight")]
    critics = [[layer for layer in critic if hasattr(layer, "weight")] for critic in (model.critic1, model.critic2)]
    every = slice(None)
    pairs = [(actor[0], policy.actor.latent_pi[0], every), (actor[1], policy.actor.latent_pi[2], every),
             (actor[2], policy.actor.mu, slice(0, 3)), (actor[2], policy.actor.log_std, slice(3, 6))]
    for ours, theirs in zip(critics, (policy.critic.qf0, policy.critic.qf1), strict=True):
        pairs += [(ours[index], theirs[2 * index], every) for index in range(3)]
    return pairs


def _hopper_batches(size: int, count: int) -> list[tuple]:
    """``count`` batches of Hopper-v5 transitions under uniform random actions, float32."""
    import gymnasium as gym
    import numpy as np

    env, rng, rows = gym.make("Hopper-v5"), np.random.default_rng(0), []
    obs, _ = env.reset(seed=0)
    while len(rows) < size * count:
        action = rng.uniform(-1.0, 1.0, 3).astype(np.float32)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, reward, next_obs, terminated))
        obs = next_obs if not (terminated or truncated) else env.reset()[0]
    env.close()
    batches = [rows[index * size:(index + 1) * size] for index in range(count)]
    return [tuple(np.array(column, dtype=np.float32) for column in zip(*batch, strict=True)) for batch in batches]


def _recording(agent):
    """The rollout policy of :class:`parl_lite.train.OnPolicyTrainer`: sample, record log-probs."""
    def policy(obs):
        actions, log_probs = agent.sample(obs)
        return actions, {"log_probs": log_probs}
    return policy


# ---------------------------------------------------------------------------------- throughput
def rate(fn: Callable[[], int], seconds: float, warmup: int = 3) -> float:
    """Units per second of ``fn`` (which returns how many units one call did), timed for at least
    ``seconds`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    units, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        units += fn()
    return units / (time.perf_counter() - started)


def throughput_mode(seconds: float) -> dict:
    import gymnasium as gym
    import numpy as np
    import paddle

    import parl_lite
    from parl_lite import train
    from parl_lite.algorithms import A2C, DDPG, DDQN, IMPALA, PPO, SAC, TD3
    from parl_lite.core.samples import AdvantageBatch
    from parl_lite.utils.models import MLPActorCritic, MLPActorQ, MLPQNetwork
    from parl_lite.utils.rollout import VectorRollout

    paddle.seed(0)
    rng = np.random.default_rng(0)

    def random_steps(env_id: str, num_envs: int) -> int:
        rollout = VectorRollout(env_id, num_envs, seed=0)
        space = rollout.env.action_space
        return round(rate(lambda: (rollout.env.step(space.sample()), num_envs)[1], seconds))

    def on_policy(algorithm, env_id: str, num_envs: int, steps: int, batch: int) -> dict:
        agent = parl_lite.Agent(algorithm)
        rollout = VectorRollout(env_id, num_envs, seed=0)
        env_rate = rate(lambda: rollout.collect(_recording(agent), steps)["rewards"].size, seconds)
        data = AdvantageBatch.from_rollout(rollout.collect(_recording(agent), max(1, batch // num_envs)),
                                           algorithm.value, 0.99, 0.95)
        return {"env_steps_per_s": round(env_rate), "updates_per_s": round(rate(lambda: (agent.learn_from(data), 1)[1],
                                                                                  seconds)), "batch": batch}

    def off_policy(algorithm, env_id: str, exploration, batch: dict) -> dict:
        agent = parl_lite.Agent(algorithm)
        env = gym.make(env_id)
        scale = env.action_space.high if isinstance(env.action_space, gym.spaces.Box) else 1
        state = {"obs": env.reset(seed=0)[0], "step": 0}

        def act() -> int:
            state["step"] += 1
            obs, _, terminated, truncated, _ = env.step(exploration.act(agent, state["obs"], state["step"]) * scale)
            state["obs"] = env.reset()[0] if terminated or truncated else obs
            return 1
        size = len(batch["obs"])
        return {"env_steps_per_s": round(rate(act, seconds)),
                "updates_per_s": round(rate(lambda: (agent.learn(**batch), 1)[1], seconds)), "batch": size}

    def replay_batch(size: int, obs_dim: int, act_dim: int) -> dict:
        action = rng.integers(0, 2, size) if act_dim == 0 else rng.uniform(-1, 1, (size, act_dim)).astype("float32")
        return dict(obs=rng.normal(size=(size, obs_dim)).astype("float32"), action=action,
                    reward=np.ones(size, "float32"), next_obs=rng.normal(size=(size, obs_dim)).astype("float32"),
                    terminal=np.zeros(size, bool))

    def asynchronous(name: str) -> dict:
        model = MLPActorCritic(4, 2, 64)
        if name == "A3C":
            trainer = train.AsyncTrainer(A2C(model, 1.0, lr=7e-4, optimizer="rmsprop", max_grad_norm=0.5,
                                             reduction="mean"), "CartPole-v1", rollout_steps=5, gae_lambda=1.0,
                                         eval_every=10**9)
        else:
            trainer = train.AsyncTrainer(IMPALA(model, 11, max_grad_norm=0.5, reduction="mean"), "CartPole-v1",
                                         rollout_steps=10, eval_every=10**9)
        marks = {}

        class Timer(train.Callback):
            def on_step(self, t) -> bool:  # warm-up: the first 5 updates (and starting the actors)
                if t.updates >= 5 and "started" not in marks:
                    marks.update(started=time.perf_counter(), steps=t.steps, updates=t.updates)
                return "started" not in marks or time.perf_counter() - marks["started"] < 2 * seconds

        summary = trainer.learn(10**9, callback=Timer(), progress_bar=False)
        elapsed = time.perf_counter() - marks["started"]
        return {"env_steps_per_s": round((summary.steps - marks["steps"]) / elapsed),
                "updates_per_s": round((summary.updates - marks["updates"]) / elapsed), "actors": 2,
                "batch": trainer.num_envs * trainer.rollout_steps}

    return {
        "baseline": {"cartpole_8_envs_random_steps_per_s": random_steps("CartPole-v1", 8),
                     "cartpole_1_env_random_steps_per_s": random_steps("CartPole-v1", 1),
                     "pendulum_4_envs_random_steps_per_s": random_steps("Pendulum-v1", 4),
                     "pendulum_1_env_random_steps_per_s": random_steps("Pendulum-v1", 1)},
        "PPO_CartPole": on_policy(PPO(MLPActorCritic(4, 2, 64), use_clipped_value_loss=False), "CartPole-v1", 8, 32,
                                  256),
        "PPO_Pendulum": on_policy(PPO(MLPActorCritic(3, 1, 64, continuous=True), use_clipped_value_loss=False,
                                      continuous_action=True), "Pendulum-v1", 4, 32, 64),
        "A2C_CartPole": on_policy(A2C(MLPActorCritic(4, 2, 64), 1.0, lr=7e-4, optimizer="rmsprop", max_grad_norm=0.5,
                                      reduction="mean"), "CartPole-v1", 8, 5, 40),
        "DQN_CartPole": off_policy(DDQN(MLPQNetwork(4, 2, 256), gamma=0.99, lr=2.3e-3, loss="huber", max_grad_norm=10.0),
                                   "CartPole-v1", train.EpsilonGreedy(2, 0.04, 0.04, 1, seed=0), replay_batch(64, 4, 0)),
        "A3C_CartPole": asynchronous("A3C"),
        "IMPALA_CartPole": asynchronous("IMPALA"),
        "DDPG_Pendulum": off_policy(DDPG(MLPActorQ(3, 1, 64)), "Pendulum-v1",
                                    train.ContinuousExploration(1, 0.1, 0, seed=0), replay_batch(256, 3, 1)),
        "TD3_Pendulum": off_policy(TD3(MLPActorQ(3, 1, 64, twin_q=True)), "Pendulum-v1",
                                   train.ContinuousExploration(1, 0.1, 0, seed=0), replay_batch(256, 3, 1)),
        "SAC_Pendulum": off_policy(SAC(MLPActorQ(3, 1, 64, twin_q=True, gaussian=True), alpha=1.0, alpha_lr=1e-3),
                                   "Pendulum-v1", train.ContinuousExploration(1, None, 0, seed=0),
                                   replay_batch(256, 3, 1)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["threshold", "throughput", "parity"], default="threshold")
    parser.add_argument("--algos", nargs="+", choices=sorted(THRESHOLD_RUNS), default=sorted(THRESHOLD_RUNS),
                        help="threshold mode: algorithms to run")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1], help="threshold mode: seeds")
    parser.add_argument("--seconds", type=float, default=1.5, help="throughput mode: timing window of each figure")
    parser.add_argument("--sac-updates", type=int, default=4, help="parity mode: SAC updates side by side")
    parser.add_argument("--sb3-run", nargs=2, metavar=("ALGO", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sb3_run:
        print(json.dumps(sb3_to_threshold(args.sb3_run[0], int(args.sb3_run[1]))), flush=True)
        return
    load_before = os.getloadavg()
    if args.mode == "threshold":
        result = threshold_mode(args.algos, args.seeds)
    elif args.mode == "parity":
        result = {algo: one_update_side_by_side(algo) for algo in ("PPO", "A2C")}
        result["SAC_Hopper"] = sac_updates_side_by_side(args.sac_updates)
    else:
        result = throughput_mode(args.seconds)
        import parl_lite

        parl_lite.shutdown()
    result["machine"] = {"cpus": os.cpu_count(), "load_avg_before": [round(x, 2) for x in load_before],
                         "load_avg_after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
