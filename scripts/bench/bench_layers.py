"""The cost of one dense layer in paddle, with and without parl_lite's two fixes, side by side.

    python scripts/bench/bench_layers.py [--calls 20000]

Prints ONE JSON line:
- ``matmul_us``: a ``[batch, 64] x [64, 64]`` product (``paddle.matmul``) under Intel MKL's own
  code choice (``MKL_DEBUG_CPU_TYPE`` set empty) and under what importing ``parl_lite.Model`` picks
  (:mod:`parl_lite.mkl`: AVX2 code on AMD processors), each in a fresh process since MKL reads
  the setting once; torch's ``F.linear`` on one thread beside them when torch is importable.
- ``linear_us``: one call of ``paddle.nn.Linear(64, 64)`` against ``parl_lite.utils.layers.Linear``
  (without ``F.linear``'s per-call flag lookup; the bias inside the product), interleaved, in this
  process.
- ``mlp_step_us``: forward and backward of the RL Zoo's off-policy critics on a batch of 256
  (Hopper's 11 + 3 inputs; TD3's ``[400, 300]`` and SAC's ``[256, 256]`` ReLU layers, one output)
  with ``paddle.nn.Linear``, with parl_lite's ``Linear`` (bias added and summed in matrix products)
  and with torch's ``nn.Linear`` on one thread, interleaved.
- ``nature_cnn_step_us``: forward and backward of the Nature DQN's three convolutions on a batch of
  32 stacked 84x84 frames, with ``paddle.nn.Conv2D`` and with parl_lite's ``Conv2D`` (its channel
  bias added as ``[C, 1, 1]``), interleaved.
- ``adam_step_us``: one Adam step over the Nature DQN's parameters (1.7M, 10 tensors) with
  ``paddle.optimizer.Adam`` (a kernel call per parameter), parl_lite's ``Adam`` (one multi-tensor
  call) and torch's ``Adam`` on one thread as Stable-Baselines3 builds it, interleaved.
- ``dqn_update_cpu_ms``: CPU milliseconds of one ``DQN.learn`` on the Nature DQN (a batch of 32
  stacked 84x84 frames) under glibc's own malloc thresholds and under the ones importing
  ``parl_lite.Model`` sets (:mod:`parl_lite.malloc`), six fresh processes of each taken in turn (the
  setting is the process's); glibc's are kept by a ``glibc.malloc`` tunable that changes nothing
  (``GLIBC_TUNABLES=glibc.malloc.check=0``), which makes parl_lite leave malloc alone. Medians, the
  page faults per update, and the CPU saved per update, paired by round, with its 95% t-interval.
"""
import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from bench_mujoco_rl import mean_and_interval

from parl_lite.mkl import prefer_avx2_on_amd

BATCHES = (1, 8, 256)


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    """Microseconds per call of ``fn``, the best of three timings of ``calls`` calls."""
    for _ in range(100):
        fn()
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - started) / calls)
    return round(best * 1e6, 2)


def matmul_child(calls: int) -> dict:
    """Run in a child: matmul timings under this process's MKL setting (and torch's)."""
    import paddle

    figures = {}
    weight = paddle.randn([64, 64])
    for batch in BATCHES:
        x = paddle.randn([batch, 64])
        figures[f"batch{batch}"] = per_call_us(lambda x=x: paddle.matmul(x, weight), calls)
    try:
        import torch
    except ImportError:
        return {"paddle": figures}
    torch.set_num_threads(1)
    torch_weight = torch.randn(64, 64)
    torch_figures = {}
    for batch in BATCHES:
        tx = torch.randn(batch, 64)
        torch_figures[f"batch{batch}"] = per_call_us(lambda tx=tx: torch.nn.functional.linear(tx, torch_weight), calls)
    return {"paddle": figures, "torch": torch_figures}


def dqn_update_child(updates: int) -> dict:
    """Run in a child: CPU milliseconds and page faults per DQN update under this process's malloc."""
    import resource

    import numpy as np
    import paddle

    from parl_lite.algorithms import DQN
    from parl_lite.utils.models import CNNQNetwork

    paddle.seed(0)
    dqn = DQN(CNNQNetwork((4, 84, 84), 6), gamma=0.99, lr=1e-4, loss="huber", max_grad_norm=10.0)
    rng = np.random.default_rng(0)
    obs = paddle.to_tensor(rng.integers(0, 256, (32, 4, 84, 84), dtype=np.uint8))
    action, zeros = paddle.to_tensor(rng.integers(0, 6, 32)), paddle.zeros([32])
    for _ in range(5):
        dqn.learn(obs, action, zeros, obs, zeros)
    faults, started = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
    for _ in range(updates):
        dqn.learn(obs, action, zeros, obs, zeros)
    return {"cpu_ms": (time.process_time() - started) / updates * 1e3,
            "page_faults": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / updates}


def run_child(kind: str, calls: int, **environ: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in ("MKL_DEBUG_CPU_TYPE", "GLIBC_TUNABLES")}
    env.update(environ)
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--calls", str(calls)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def dqn_updates(calls: int, rounds: int = 6) -> dict:
    """``rounds`` children per malloc setting, taken in turn: each setting's CPU-ms per update and
    page faults (medians, and every child's CPU-ms), and the paired difference with its 95% t-interval."""
    settings = {"glibc_thresholds": {"GLIBC_TUNABLES": "glibc.malloc.check=0"}, "parl_lite_thresholds": {}}
    runs: dict[str, list[dict]] = {name: [] for name in settings}
    for _ in range(rounds):
        for name, environ in settings.items():
            runs[name].append(run_child("dqn", max(1, calls // 400), **environ))
    figures: dict = {name: {"cpu_ms_median": round(statistics.median(run["cpu_ms"] for run in each), 1),
                            "page_faults_median": round(statistics.median(run["page_faults"] for run in each), 1),
                            "cpu_ms_each": [round(run["cpu_ms"], 1) for run in each]} for name, each in runs.items()}
    pairs = zip(runs["glibc_thresholds"], runs["parl_lite_thresholds"], strict=True)
    difference, half_width = mean_and_interval([theirs["cpu_ms"] - ours["cpu_ms"] for theirs, ours in pairs])
    figures["cpu_ms_saved"] = round(difference, 1)
    figures["cpu_ms_saved_95"] = None if half_width is None else round(half_width, 1)
    return figures


def linear_layers(calls: int) -> dict:
    import paddle

    from parl_lite.utils.layers import Linear

    figures = {}
    for batch in BATCHES:
        x = paddle.randn([batch, 64])
        theirs, ours = paddle.nn.Linear(64, 64), Linear(64, 64)
        ours.set_state_dict(theirs.state_dict())
        figures[f"batch{batch}"] = interleaved_us({"paddle_nn_Linear": lambda theirs=theirs, x=x: theirs(x),
                                                   "parl_lite_Linear": lambda ours=ours, x=x: ours(x)}, calls // 2)
    return figures


MLP_ARCHS = {"td3_400x300": (400, 300), "sac_256x256": (256, 256)}


def mlp_steps(calls: int) -> dict:
    """Microseconds per forward + backward of each critic of ``MLP_ARCHS``, per layer kind."""
    import paddle

    from parl_lite.utils.layers import Linear

    def paddle_step(layer_cls, widths):
        sizes = (14, *widths, 1)
        layers = [layer_cls(a, b) for a, b in itertools.pairwise(sizes)]
        x = paddle.randn([256, 14])

        def step():
            out = x
            for i, layer in enumerate(layers):
                out = layer(out) if i == len(layers) - 1 else paddle.nn.functional.relu(layer(out))
            (out ** 2).mean().backward()
            for layer in layers:
                layer.clear_gradients()
        return step

    steps = {name: {"paddle_nn_Linear": paddle_step(paddle.nn.Linear, widths),
                    "parl_lite_Linear": paddle_step(Linear, widths)} for name, widths in MLP_ARCHS.items()}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)
        for name, widths in MLP_ARCHS.items():
            sizes = (14, *widths, 1)
            net = torch.nn.Sequential(*[module for a, b in itertools.pairwise(sizes)
                                        for module in (torch.nn.Linear(a, b), torch.nn.ReLU())][:-1])
            tx = torch.randn(256, 14)

            def torch_step(net=net, tx=tx):
                (net(tx) ** 2).mean().backward()
                net.zero_grad()
            steps[name]["torch_nn_Linear"] = torch_step
    return {name: interleaved_us(kinds, max(1, calls // 100)) for name, kinds in steps.items()}


def nature_cnn_steps(calls: int) -> dict:
    """Microseconds per forward + backward of the Nature DQN's convolutions, per layer kind."""
    import paddle

    from parl_lite.utils.layers import Conv2D

    x = paddle.rand([32, 4, 84, 84])

    def step_of(conv_cls):
        convs = [conv_cls(4, 32, 8, stride=4), conv_cls(32, 64, 4, stride=2), conv_cls(64, 64, 3, stride=1)]

        def step():
            out = x
            for conv in convs:
                out = paddle.nn.functional.relu(conv(out))
            out.mean().backward()
            for conv in convs:
                conv.clear_gradients()
        return step

    return interleaved_us({"paddle_nn_Conv2D": step_of(paddle.nn.Conv2D), "parl_lite_Conv2D": step_of(Conv2D)},
                          max(1, calls // 500))


def adam_steps(calls: int) -> dict:
    """Microseconds per Adam step over the Nature DQN's parameters, per optimizer."""
    import paddle

    from parl_lite.algorithms.optimizers import Adam
    from parl_lite.utils.models import CNNQNetwork

    def step_of(optimizer_cls):
        model = CNNQNetwork((4, 84, 84), 6)
        optimizer = optimizer_cls(learning_rate=1e-4, parameters=model.parameters())
        paddle.add_n([(parameter ** 2).sum() for parameter in model.parameters()]).backward()  # gradients kept
        return optimizer.step

    steps = {"paddle_Adam": step_of(paddle.optimizer.Adam), "parl_lite_Adam": step_of(Adam)}
    try:
        import torch
    except ImportError:
        return interleaved_us(steps, max(1, calls // 200))
    torch.set_num_threads(1)
    shapes = [parameter.shape for parameter in CNNQNetwork((4, 84, 84), 6).parameters()]
    tensors = [torch.nn.Parameter(torch.randn(*shape)) for shape in shapes]
    for tensor in tensors:
        tensor.grad = torch.randn_like(tensor)
    steps["torch_Adam"] = torch.optim.Adam(tensors, lr=1e-4).step
    return interleaved_us(steps, max(1, calls // 200))


def interleaved_us(fns: dict[str, Callable[[], object]], calls: int, rounds: int = 5) -> dict[str, float]:
    """Microseconds per call of each of ``fns``, the best of ``rounds`` rounds that time each in turn."""
    for fn in fns.values():
        for _ in range(10):
            fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            started = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - started) / calls)
    return {name: round(seconds * 1e6, 1) for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20_000, help="calls per timing")
    parser.add_argument("--child", choices=["matmul", "dqn"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import parl_lite.core.model  # noqa: F401 - applies parl_lite.mkl and parl_lite.malloc unless the user's are set
        print(json.dumps(matmul_child(args.calls) if args.child == "matmul" else dqn_update_child(args.calls)))
        return
    import parl_lite.core.model  # noqa: F401 - the layers below run under the MKL code parl_lite picks
    load_before = os.getloadavg()
    mkl_default = run_child("matmul", args.calls, MKL_DEBUG_CPU_TYPE="")
    ours = run_child("matmul", args.calls)
    result = {"matmul_us": {"mkl_own_choice": mkl_default["paddle"], "parl_lite": ours["paddle"],
                            "torch": ours.get("torch", "not installed")},
              "linear_us": linear_layers(args.calls),
              "mlp_step_us": mlp_steps(args.calls),
              "nature_cnn_step_us": nature_cnn_steps(args.calls),
              "adam_step_us": adam_steps(args.calls),
              "dqn_update_cpu_ms": dqn_updates(args.calls),
              "machine": {"cpus": os.cpu_count(), "parl_lite_picks_mkl_avx2": prefer_avx2_on_amd(environ={}),
                          "load_avg_before": [round(x, 2) for x in load_before],
                          "load_avg_after": [round(x, 2) for x in os.getloadavg()]}}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
