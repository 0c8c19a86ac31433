"""Helpers of the tests that run evokit_py: the solvers' test functions, a short run's config, es-train's
command line (in a child process or in this one), a checkpoint of a short run, and an ONNX file shaped
like paddle2onnx's output."""
import subprocess
import sys
from pathlib import Path

import numpy as np

from locations import CHILD_ENV

# a short es-train run: no target, 30 steps an episode, one evaluation episode, 4 candidates
SHORT_RUN = ("train.target_return=null", "env.max_steps=30", "train.eval_episodes=1", "solver.population_size=4")


def sphere(x: np.ndarray) -> float:
    return float(x @ x)


def rosenbrock(x: np.ndarray) -> float:
    return float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))


def run_config(folder: Path, *overrides: str):
    """The resolved config of a run writing in ``folder/run`` (checkpoints in ``run/ck``) with no target
    return; ``overrides`` as ``--set`` takes them, later ones winning."""
    from evokit_py.config import resolve_config

    return resolve_config(None, [f"train.log_dir={folder}/run", f"train.checkpoint_dir={folder}/run/ck",
                                 "train.target_return=null", *overrides])


def es_train_args(folder: Path, *overrides: str, in_process: bool = True) -> list:
    """``parl-lite``'s arguments for a :data:`SHORT_RUN` of es-train in ``folder/run``, then ``overrides``
    (each a ``--set``); its samplers in the trainer's process unless ``in_process`` is false."""
    args = ["es-train", *(["--in-process"] if in_process else []), "--set", f"train.log_dir={folder}/run",
            "--set", f"train.checkpoint_dir={folder}/run/ck"]
    for override in (*SHORT_RUN, *overrides):
        args += ["--set", override]
    return args


def parl_lite_cli(*args, timeout: float = 120, env=None, **run) -> subprocess.CompletedProcess:
    """``python -m parl_lite.cli ARGS`` in a child process with :data:`CHILD_ENV` (or ``env``); stdout and
    stderr captured as text unless ``run`` redirects them (``run`` goes to :func:`subprocess.run`)."""
    run.setdefault("stdout", subprocess.PIPE)
    run.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "parl_lite.cli", *map(str, args)], env=env or CHILD_ENV, text=True,
                          timeout=timeout, **run)


def es_train_here(folder: Path, *overrides: str, extra=()):
    """Run ``parl-lite es-train`` (:func:`es_train_args`, then ``extra``) in this process; a bare
    traceback fails the test, naming the exception."""
    from click.testing import CliRunner

    from parl_lite.cli import main

    result = CliRunner().invoke(main, es_train_args(folder, *overrides) + list(extra))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"bare exception from es-train: {result.exception!r}\n{result.output}") \
            from result.exception
    return result


def trained_checkpoint(folder: Path, *overrides: str) -> Path:
    """The solver checkpoint of a 2-generation run in ``folder/run`` (:func:`es_train_here`)."""
    result = es_train_here(folder, "train.generations=2", "train.checkpoint_every=1", *overrides)
    assert result.exit_code == 0, result.output
    return folder / "run" / "ck" / "solver.h5"


def paddle_like_onnx_file(path: Path):
    """Write a graph shaped like paddle2onnx output at ``path`` (float initializers, an int shape
    constant, output ``fetch_name_0``); returns its weight and bias."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((4, 2)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["obs", "linear_0.w_0"], ["mm"]),
             helper.make_node("Add", ["mm", "linear_0.b_0"], ["z"]),
             helper.make_node("Reshape", ["z", "shape"], ["fetch_name_0"])]
    graph = helper.make_graph(
        nodes, "paddle", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("fetch_name_0", TensorProto.FLOAT, [None, 2])],
        [numpy_helper.from_array(w, "linear_0.w_0"), numpy_helper.from_array(b, "linear_0.b_0"),
         numpy_helper.from_array(np.array([-1, 2], np.int64), "shape")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return w, b
