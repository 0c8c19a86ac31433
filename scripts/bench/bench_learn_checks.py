"""What checking ``learn``'s arrays costs (:mod:`parl_lite.core.learn_inputs`), side by side in one run.

    python scripts/bench/bench_learn_checks.py [--calls 50] [--rounds 41]

Prints ONE JSON line. For each case, CPU microseconds (``time.process_time``: what the call
itself uses, which a busy machine disturbs less than the wall clock) per ``learn`` call, the median
of ``rounds`` short rounds that interleave the two paths (so that a change of load hits both):

- ``checked``: ``alg.learn(...)`` as a user calls it: the arrays checked, converted, the update;
- ``unchecked``: the same algorithm through a subclass that declares no ``learn_inputs``
  (converted, the update): the path of every ``learn`` call before the checks existed;
- ``overhead_percent``: the median over the rounds of ``checked / unchecked - 1``;
- ``checks_alone_us``: the declared checks of the batch alone, and ``action_range_us`` the check of
  the discrete actions against the number of actions, which runs inside the update in both paths.

Cases: DQN on a batch of 32 CartPole transitions (numpy, as the off-policy loop passes them, and
tensors, as PARL's agents do), PPO on a CartPole minibatch of 64 (tensors, as the on-policy loop
passes them).
"""
import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import paddle

from parl_lite.algorithms import DQN, PPO
from parl_lite.core.learn_inputs import check_action_indices
from parl_lite.utils.models import MLPActorCritic, MLPQNetwork


class UncheckedDQN(DQN):
    """DQN's update without declared inputs: only the numpy -> tensor conversion before it."""

    def learn(self, *args, **kwargs):
        return DQN.learn.__wrapped__(self, *args, **kwargs)


class UncheckedPPO(PPO):
    """PPO's update without declared inputs."""

    def learn(self, *args, **kwargs):
        return PPO.learn.__wrapped__(self, *args, **kwargs)


def dqn_batch(rng: np.random.Generator, size: int = 32) -> dict[str, np.ndarray]:
    return dict(obs=rng.normal(size=(size, 4)).astype(np.float32), action=rng.integers(0, 2, size).astype(np.int32),
                reward=np.ones(size, np.float32), next_obs=rng.normal(size=(size, 4)).astype(np.float32),
                terminal=rng.uniform(size=size) < 0.05)


def ppo_batch(rng: np.random.Generator, size: int = 64) -> dict[str, paddle.Tensor]:
    arrays = dict(batch_obs=rng.normal(size=(size, 4)), batch_action=rng.integers(0, 2, size),
                  batch_value=rng.normal(size=size), batch_return=rng.normal(size=size),
                  batch_logprob=rng.normal(-0.7, 0.1, size), batch_adv=rng.normal(size=size))
    return {key: paddle.to_tensor(value if value.dtype.kind == "i" else value.astype(np.float32))
            for key, value in arrays.items()}


def timed(fn: Callable[[], object], calls: int) -> float:
    """CPU microseconds per call of ``fn`` over ``calls`` calls."""
    started = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - started) / calls * 1e6


def side_by_side(checked: Callable[[], object], unchecked: Callable[[], object], calls: int, rounds: int) -> dict:
    for _ in range(50):
        checked(), unchecked()
    with_checks, without, ratios = [], [], []
    for round_ in range(rounds):
        first, second = (checked, unchecked) if round_ % 2 else (unchecked, checked)  # neither always first
        first_us, second_us = timed(first, calls), timed(second, calls)
        checked_us, unchecked_us = (first_us, second_us) if round_ % 2 else (second_us, first_us)
        with_checks.append(checked_us)
        without.append(unchecked_us)
        ratios.append(checked_us / unchecked_us - 1)
    return {"checked_us": round(statistics.median(with_checks), 1),
            "unchecked_us": round(statistics.median(without), 1),
            "overhead_percent": round(statistics.median(ratios) * 100, 2)}


def dqn_case(tensors: bool, calls: int, rounds: int) -> dict:
    batch = dqn_batch(np.random.default_rng(0))
    if tensors:
        batch = {key: paddle.to_tensor(value.astype(np.float32) if value.dtype == bool else value)
                 for key, value in batch.items()}
    paddle.seed(0)
    ours, plain = DQN(MLPQNetwork(4, 2, 64), 0.99, 1e-3), UncheckedDQN(MLPQNetwork(4, 2, 64), 0.99, 1e-3)
    figures = side_by_side(lambda: ours.learn(**batch), lambda: plain.learn(**batch), calls, rounds)
    inputs = DQN.learn_inputs.bind(DQN.learn.__wrapped__)
    figures["checks_alone_us"] = round(timed(lambda: inputs.check("DQN", (), batch), calls * 100), 1)
    action = paddle.to_tensor(batch["action"]) if not tensors else batch["action"]
    figures["action_range_us"] = round(timed(lambda: check_action_indices("DQN", "action", action, 2), calls * 100), 1)
    return figures


def ppo_case(calls: int, rounds: int) -> dict:
    batch = ppo_batch(np.random.default_rng(0))
    paddle.seed(0)
    ours, plain = PPO(MLPActorCritic(4, 2, 64)), UncheckedPPO(MLPActorCritic(4, 2, 64))
    figures = side_by_side(lambda: ours.learn(**batch), lambda: plain.learn(**batch), calls, rounds)
    inputs = PPO.learn_inputs.bind(PPO.learn.__wrapped__)
    figures["checks_alone_us"] = round(timed(lambda: inputs.check("PPO", (), batch), calls * 100), 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50, help="learn calls per timing")
    parser.add_argument("--rounds", type=int, default=41, help="interleaved timings of each path")
    args = parser.parse_args()
    load_before = os.getloadavg()
    result = {"dqn_batch32_numpy": dqn_case(False, args.calls, args.rounds),
              "dqn_batch32_tensors": dqn_case(True, args.calls, args.rounds),
              "ppo_minibatch64_tensors": ppo_case(args.calls, args.rounds),
              "machine": {"cpus": os.cpu_count(), "load_avg_before": [round(x, 2) for x in load_before],
                          "load_avg_after": [round(x, 2) for x in os.getloadavg()]}}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
