"""ES sampling benchmark; prints ONE JSON line.

- policy step latency (batch 1, a 4-64-64-2 tanh MLP, numpy in and out): evokit_py's ONNX policy
  vs paddle dygraph with the same weights (paddle is imported here only, never by evokit_py);
- episodes/s evaluating the same candidates of CartPole-v1 with 1 and 2 pool workers (remote
  actors), and in this process for reference; beside it, the speed-up of a plain CPU-bound loop in
  2 processes over 1, measured in the same run: the ceiling the other jobs on the machine leave.

    python scripts/bench_es.py [--candidates 64] [--repeats 3]
"""
import json
import multiprocessing
import os
import time

import click
import numpy as np

from evokit_py.agent import ESAgent
from evokit_py.config import resolve_config
from evokit_py.policy import OnnxPolicy, build_mlp
from evokit_py.pool import EvaluationPool
from evokit_py.rollout import episode_seed


def _median_us(function, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e6)


def _spin(n: int) -> None:
    total = 0
    for i in range(n):
        total += i


def raw_process_speedup(n: int = 3_000_000) -> float:
    """The same CPU-bound loop in 1 and in 2 plain processes: the parallelism the machine gives us
    right now (other jobs on the 2 cores cap it), the ceiling for the worker speed-up."""
    context = multiprocessing.get_context("fork")
    times = {}
    for count in (1, 2, 1, 2):
        processes = [context.Process(target=_spin, args=(n,)) for _ in range(count)]
        start = time.perf_counter()
        for process in processes:
            process.start()
        for process in processes:
            process.join()
        elapsed = time.perf_counter() - start
        times[count] = min(times.get(count, elapsed), elapsed)
    return round(2 * times[1] / times[2], 2)


def policy_latency(calls: int) -> dict:
    import paddle

    paddle.set_device("cpu")
    policy = OnnxPolicy(build_mlp(4, 2, [64, 64], "tanh", "none"))
    params = np.random.default_rng(0).standard_normal(policy.param_size).astype(np.float32) * 0.1
    policy.set_parameters(params)
    net = paddle.nn.Sequential(paddle.nn.Linear(4, 64), paddle.nn.Tanh(), paddle.nn.Linear(64, 64),
                               paddle.nn.Tanh(), paddle.nn.Linear(64, 2))
    offset = 0
    for layer in (net[0], net[2], net[4]):  # paddle's Linear weight is [in, out], as in the ONNX graph
        for tensor in (layer.weight, layer.bias):
            size = int(np.prod(tensor.shape))
            tensor.set_value(params[offset:offset + size].reshape(tensor.shape))
            offset += size
    obs = np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32)

    def paddle_step():
        with paddle.no_grad():
            return net(paddle.to_tensor(obs)).numpy()

    assert np.allclose(paddle_step(), policy(obs), atol=1e-5), "ONNX and paddle disagree"
    for _ in range(200):
        policy(obs), paddle_step()
    onnx_us, paddle_us = _median_us(lambda: policy(obs), calls), _median_us(paddle_step, calls)
    return {"onnx_step_us": round(onnx_us, 2), "paddle_dygraph_step_us": round(paddle_us, 2),
            "onnx_speedup": round(paddle_us / onnx_us, 2)}


def episodes_per_second(candidates: int, repeats: int) -> dict:
    config = resolve_config(None, ["env.max_steps=200"])
    agent = ESAgent(config)
    agent.load_inference_model()
    agent.init_solver()
    solver = agent.solver
    infos = [i.to_list() for i in (solver.ask() * (candidates // config.solver.population_size + 1))[:candidates]]
    basis = solver.basis()
    basis.centers[0, 1:8:2] = [0.0, 0.0, 1.0, 1.0]  # push right when the pole falls right: long episodes
    seeds = [[episode_seed(0, 0, i, 0)] for i in range(candidates)]
    configurations = {"inprocess": (1, "inprocess"), "1_worker": (1, "remote"), "2_workers": (2, "remote")}
    pools = {}
    best = dict.fromkeys(configurations, 0.0)
    steps = 0
    try:
        for label, (workers, backend) in configurations.items():
            pools[label] = EvaluationPool(config, agent.policy_bytes(), agent.noise_spec(), workers, backend)
            pools[label].evaluate(basis.to_dict(), None, None, infos[:4], seeds[:4])  # warm-up
        for _ in range(repeats):  # interleaved, so that every configuration sees the same background load
            for label, pool in pools.items():
                start = time.perf_counter()
                steps = pool.evaluate(basis.to_dict(), None, None, infos, seeds)["steps"]
                best[label] = max(best[label], candidates / (time.perf_counter() - start))
    finally:
        for pool in pools.values():
            pool.close()
        agent.close()
    results = {}
    for label, rate in best.items():
        results[f"episodes_per_s_{label}"] = round(rate, 1)
        results[f"steps_per_s_{label}"] = round(rate * steps / candidates)
    results["speedup_2_vs_1_worker"] = round(results["episodes_per_s_2_workers"] / results["episodes_per_s_1_worker"], 2)
    return results


@click.command()
@click.option("--calls", default=3000, show_default=True, help="Policy calls timed per engine.")
@click.option("--candidates", default=64, show_default=True, help="Candidates (episodes) per evaluation.")
@click.option("--repeats", default=5, show_default=True, help="Evaluations per configuration (best kept).")
def main(calls: int, candidates: int, repeats: int) -> None:
    """Print one JSON line of ES sampling figures."""
    load_before = os.getloadavg()[0]
    figures = episodes_per_second(candidates, repeats)
    figures["raw_process_speedup_2_vs_1"] = raw_process_speedup()
    figures.update(policy_latency(calls))
    figures["load_avg_1min_before"] = round(load_before, 2)  # other jobs on the 2 cores skew the speed-up
    click.echo(json.dumps(figures))


if __name__ == "__main__":
    main()
