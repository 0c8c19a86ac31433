"""Update throughput of DDPG, TD3 and SAC (the Pendulum-v1 models and defaults of the scripts:
:class:`parl_lite.utils.models.MLPActorQ`),
measured side by side in one run, plus the soft target update against paddle's plain float lerp_.

    python scripts/bench/bench_continuous.py [--batch-size 256] [--hidden 64] [--updates 300]

Prints ONE JSON line: updates per second of wall-clock and per CPU-second (the CPU figure is the
fairer one on a shared machine) for each algorithm, and microseconds per soft target update.
The algorithms are timed in interleaved rounds so that a load change hits all of them alike.
"""
import argparse
import json
import time

import numpy as np
import paddle

from parl_lite.algorithms import DDPG, SAC, TD3
from parl_lite.utils.models import MLPActorQ

OBS_DIM, ACT_DIM = 3, 1  # Pendulum-v1


def make_algorithms(hidden: int) -> dict:
    """The three algorithms with the scripts' defaults."""
    return {
        "DDPG": DDPG(MLPActorQ(OBS_DIM, ACT_DIM, hidden), gamma=0.99, tau=0.005, actor_lr=1e-3, critic_lr=1e-3),
        "TD3": TD3(MLPActorQ(OBS_DIM, ACT_DIM, hidden, twin_q=True), gamma=0.99, tau=0.005, actor_lr=1e-3,
                   critic_lr=1e-3),
        "SAC": SAC(MLPActorQ(OBS_DIM, ACT_DIM, hidden, twin_q=True, gaussian=True), gamma=0.99, tau=0.005,
                   actor_lr=1e-3, critic_lr=1e-3, alpha=1.0, alpha_lr=1e-3),
    }


def time_sync(model, target, repeats: int) -> dict:
    """Microseconds per soft update: Model.sync_weights_to vs lerp_ with a float weight per tensor."""
    pairs = list(zip(model.parameters(), target.parameters()))
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
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--updates", type=int, default=300, help="timed updates per algorithm")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds the updates are split into")
    args = parser.parse_args()

    paddle.seed(0)
    rng = np.random.default_rng(0)
    size = args.batch_size
    batch = dict(obs=rng.standard_normal((size, OBS_DIM)).astype(np.float32),
                 action=rng.uniform(-1, 1, (size, ACT_DIM)).astype(np.float32),
                 reward=rng.standard_normal(size).astype(np.float32),
                 next_obs=rng.standard_normal((size, OBS_DIM)).astype(np.float32),
                 terminal=np.zeros(size, dtype=bool))
    agents = make_algorithms(args.hidden)
    for agent in agents.values():  # warm-up: Adam creates its accumulators, kernels get picked
        for _ in range(10):
            agent.learn(**batch)

    wall = dict.fromkeys(agents, 0.0)
    cpu = dict.fromkeys(agents, 0.0)
    per_round = max(1, args.updates // args.rounds)
    for _ in range(args.rounds):
        for name, agent in agents.items():
            wall_started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(per_round):
                agent.learn(**batch)
            wall[name] += time.perf_counter() - wall_started
            cpu[name] += time.process_time() - cpu_started
    updates = per_round * args.rounds

    sac = agents["SAC"]
    result = {
        "bench": "continuous_updates", "batch_size": size, "hidden": args.hidden, "updates": updates,
        "updates_per_second": {name: round(updates / wall[name], 1) for name in agents},
        "updates_per_cpu_second": {name: round(updates / cpu[name], 1) for name in agents},
        "soft_update": time_sync(sac.model, sac.target_model, repeats=200),
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
