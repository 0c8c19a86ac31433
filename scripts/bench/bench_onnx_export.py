"""Time ``export_onnx`` and measure how far each exported graph is from paddle; prints one JSON line.

For every model: wall-clock of the export (median of --repeats, verification included), and the
max abs difference between onnxruntime and paddle dygraph on a random batch of 256.
Routes: ``onnx`` (parl_lite's own translation) and ``paddle2onnx`` (child process) where installed.

    nice -n 10 python scripts/bench/bench_onnx_export.py --repeats 3
"""
import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime
import paddle

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from onnx_models import CnnPolicy, TwoHeadModel, cnn_sequential  # noqa: E402

import parl_lite  # noqa: E402


class MlpPolicy(parl_lite.Model):
    """A 4 -> 64 -> 64 -> 2 tanh MLP: the size of the RL policies of the examples (CartPole)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(4, 64)
        self.fc2 = paddle.nn.Linear(64, 64)
        self.fc3 = paddle.nn.Linear(64, 2)

    def forward(self, obs):
        return self.fc3(paddle.tanh(self.fc2(paddle.tanh(self.fc1(obs)))))


def measure(name, model, shape, backend, repeats, workdir):
    path = Path(workdir) / f"{name}-{backend}.onnx"
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        parl_lite.export_onnx(model, path, shape, backend=backend)
        seconds.append(time.perf_counter() - started)
    x = np.random.default_rng(0).standard_normal([256, *shape[1:]]).astype("float32")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    actual = session.run(None, {session.get_inputs()[0].name: x})
    model.eval()
    with paddle.no_grad():
        expected = model(paddle.to_tensor(x))
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    difference = max(float(np.abs(a - e.numpy()).max()) for a, e in zip(actual, expected))
    return {"model": name, "backend": backend, "export_s_median": round(statistics.median(seconds), 3),
            "export_s_all": [round(s, 3) for s in seconds], "max_abs_diff": difference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="exports per model and route")
    args = parser.parse_args()
    paddle.seed(0)
    models = [("mlp", MlpPolicy(), [None, 4]), ("cnn", CnnPolicy(), [None, 3, 16, 16]),
              ("two_head", TwoHeadModel(), [None, 4]), ("cnn_sequential", cnn_sequential(), [None, 3, 16, 16])]
    backends = ["onnx", "paddle2onnx"] if importlib.util.find_spec("paddle2onnx") else ["onnx"]
    cases = [(name, model, shape, backend) for name, model, shape in models for backend in backends]
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, model, shape, backend in cases:
            results.append(measure(name, model, shape, backend, args.repeats, workdir))
            print(f"# {results[-1]}", file=sys.stderr, flush=True)
    print(json.dumps({"bench": "onnx_export", "python": sys.version.split()[0], "repeats": args.repeats,
                      "results": results}))


if __name__ == "__main__":
    main()
