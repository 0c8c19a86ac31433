"""Update throughput of DDPG, TD3 and SAC, measured side by side in one run, plus the soft target
update against paddle's plain float lerp_.

    python scripts/bench/bench_continuous.py [--batch-size 256] [--hidden 64] [--updates 300]
    python scripts/bench/bench_continuous.py --sizes mujoco [--sb3]

``--sizes pendulum`` (default): the Pendulum-v1 models and defaults of the scripts
(:class:`parl_lite.utils.models.MLPActorQ`, ``--hidden`` units). ``--sizes mujoco``: Hopper-v5's
observation and action sizes with the RL Zoo's networks and learning rates (TD3 and DDPG
``[400, 300]``, SAC ``[256, 256]``, torch's initialisation). ``--sb3`` times Stable-Baselines3's
``train(gradient_steps=1)`` of the same algorithms with the same networks and batch beside ours
(torch on one thread, paddle on one; SB3 and torch are bench-only peers).

Prints ONE JSON line: updates per second of wall-clock and per CPU-second (the CPU figure is the
fairer one on a shared machine) for each algorithm, and microseconds per soft target update.
Everything is timed in interleaved rounds so that a load change hits all alike.
"""
import argparse
import json
import os
import time
from collections.abc import Callable

import numpy as np
import paddle

from parl_lite.algorithms import DDPG, SAC, TD3
from parl_lite.utils.models import MLPActorQ

SIZES = {"pendulum": (3, 1), "mujoco": (11, 3)}  # (observation, action) sizes: Pendulum-v1, Hopper-v5
MUJOCO = {"DDPG": ((400, 300), 1e-3), "TD3": ((400, 300), 1e-3), "SAC": ((256, 256), 3e-4)}  # RL Zoo: net_arch, lr


def networks(sizes: str, hidden: int) -> dict[str, tuple[tuple[int, ...], float]]:
    """Each algorithm's hidden layers and learning rate: the scripts' Pendulum defaults or the RL Zoo's."""
    if sizes == "pendulum":
        return dict.fromkeys(MUJOCO, ((hidden, hidden), 1e-3))
    return MUJOCO


def make_algorithms(sizes: str, hidden: int) -> dict:
    """The three algorithms with the networks and learning rates of :func:`networks`."""
    obs_dim, act_dim = SIZES[sizes]
    nets = networks(sizes, hidden)

    def model(name: str, **kinds) -> MLPActorQ:
        init = "default" if sizes == "pendulum" else "torch"
        return MLPActorQ(obs_dim, act_dim, net_arch=nets[name][0], init=init, **kinds)

    def lr(name: str) -> float:
        return nets[name][1]

    return {
        "DDPG": DDPG(model("DDPG"), gamma=0.99, tau=0.005, actor_lr=lr("DDPG"), critic_lr=lr("DDPG")),
        "TD3": TD3(model("TD3", twin_q=True), gamma=0.99, tau=0.005, actor_lr=lr("TD3"), critic_lr=lr("TD3")),
        "SAC": SAC(model("SAC", twin_q=True, gaussian=True), gamma=0.99, tau=0.005, actor_lr=lr("SAC"),
                   critic_lr=lr("SAC"), alpha=1.0, alpha_lr=lr("SAC")),
    }


def make_sb3_updates(sizes: str, hidden: int, batch_size: int) -> dict[str, Callable[[], None]]:
    """SB3's DDPG, TD3 and SAC on random transitions of the same sizes: one ``train`` step each."""
    import gymnasium as gym
    import stable_baselines3
    import torch

    torch.set_num_threads(1)
    obs_dim, act_dim = SIZES[sizes]

    class RandomTask(gym.Env):
        observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, False, False, {}

    updates = {}
    for name, (net, lr) in networks(sizes, hidden).items():
        model = getattr(stable_baselines3, name)("MlpPolicy", RandomTask(), learning_rate=lr, batch_size=batch_size,
                                                 learning_starts=batch_size, policy_kwargs={"net_arch": list(net)},
                                                 seed=0)
        model.learn(2 * batch_size)  # fills the buffer past learning_starts and sets up the logger
        updates[name] = lambda model=model: model.train(gradient_steps=1, batch_size=batch_size)
    return updates


def time_sync(model, target, repeats: int) -> dict:
    """Microseconds per soft update: Model.sync_weights_to vs lerp_ with a float weight per tensor."""
    pairs = list(zip(model.parameters(), target.parameters(), strict=True))
    started = time.perf_counter()
    for _ in range(repeats):
        model.sync_weights_to(target, decay=0.995)
    ours = (time.perf_counter() - started) / repeats
    started = time.perf_counter()
    with paddle.no_grad():
        for _ in range(repeats):
            for source, destination in pairs:
                destination.lerp_(source, 0.005)
    plain = (time.perf_counter() - started) / repeats
    return {"sync_weights_to_us": round(ours * 1e6), "plain_float_lerp_us": round(plain * 1e6),
            "parameters": len(pairs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", choices=sorted(SIZES), default="pendulum",
                        help="Pendulum's networks or the RL Zoo's MuJoCo ones on Hopper's sizes")
    parser.add_argument("--sb3", action="store_true", help="time Stable-Baselines3's updates beside ours")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64, help="units per hidden layer (--sizes pendulum)")
    parser.add_argument("--updates", type=int, default=300, help="timed updates per algorithm")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds the updates are split into")
    args = parser.parse_args()

    paddle.seed(0)
    rng = np.random.default_rng(0)
    size = args.batch_size
    obs_dim, act_dim = SIZES[args.sizes]
    batch = dict(obs=rng.standard_normal((size, obs_dim)).astype(np.float32),
                 action=rng.uniform(-1, 1, (size, act_dim)).astype(np.float32),
                 reward=rng.standard_normal(size).astype(np.float32),
                 next_obs=rng.standard_normal((size, obs_dim)).astype(np.float32),
                 terminal=np.zeros(size, dtype=bool))
    agents = make_algorithms(args.sizes, args.hidden)
    updates_by_name = {name: (lambda agent=agent: agent.learn(**batch)) for name, agent in agents.items()}
    if args.sb3:
        updates_by_name |= {f"sb3_{name}": update
                            for name, update in make_sb3_updates(args.sizes, args.hidden, size).items()}
    wall, cpu, updates = time_interleaved(updates_by_name, args.updates, args.rounds)

    sac = agents["SAC"]
    result = {
        "bench": "continuous_updates", "sizes": args.sizes, "batch_size": size, "updates": updates,
        "networks": {name: list(net) for name, (net, _) in networks(args.sizes, args.hidden).items()},
        "updates_per_second": {name: round(updates / wall[name], 1) for name in updates_by_name},
        "updates_per_cpu_second": {name: round(updates / cpu[name], 1) for name in updates_by_name},
        "soft_update": time_sync(sac.model, sac.target_model, repeats=200),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    if args.sb3:
        result["cpu_per_update_vs_sb3"] = {name: round(cpu[name] / cpu[f"sb3_{name}"], 3) for name in agents}
    print(json.dumps(result), flush=True)


def time_interleaved(updates_by_name: dict[str, Callable[[], object]], updates: int,
                     rounds: int) -> tuple[dict[str, float], dict[str, float], int]:
    """Wall and CPU seconds of ``updates`` calls of each, split into ``rounds`` interleaved rounds
    (after 10 warm-up calls each: optimizers create their accumulators, kernels get picked)."""
    for update in updates_by_name.values():
        for _ in range(10):
            update()
    wall = dict.fromkeys(updates_by_name, 0.0)
    cpu = dict.fromkeys(updates_by_name, 0.0)
    per_round = max(1, updates // rounds)
    for _ in range(rounds):
        for name, update in updates_by_name.items():
            wall_started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(per_round):
                update()
            wall[name] += time.perf_counter() - wall_started
            cpu[name] += time.process_time() - cpu_started
    return wall, cpu, per_round * rounds


if __name__ == "__main__":
    main()
