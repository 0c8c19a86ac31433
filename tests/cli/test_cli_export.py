"""`parl-lite export`: a real checkpoint through the real command line to a real ONNX file."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import paddle
import pytest
from click.testing import CliRunner

from core_models import fixed_batch, make_agent
from onnx_models import TwoHeadModel
from parl_lite.algorithms import PolicyGradient
from parl_lite.cli import main
from parl_lite.core.agent import Agent
from locations import ROOT, TESTS



def _cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "parl_lite.cli", "export", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=150, env=env)


def _run(path, feeds):
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session, session.run(None, feeds)


@pytest.mark.timeout(180)
def test_export_with_the_class_recorded_in_the_checkpoint(tmp_path):
    agent = make_agent(5)
    agent.learn(*fixed_batch(0))
    agent.save(tmp_path / "pg.h5")
    result = _cli("pg.h5", "--input-shape", "None,4", "--import-recorded-class", "--app-dir", TESTS,
                  "-o", "policy.onnx", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "wrote policy.onnx (core_models.CartpoleModel, role 'model')" in result.stdout
    obs = fixed_batch(8)[0]
    _, (probs,) = _run(tmp_path / "policy.onnx", {"obs": obs})
    np.testing.assert_allclose(probs, agent.predict(obs), rtol=0, atol=1e-5)


@pytest.mark.timeout(180)
def test_export_a_two_head_model_with_class_kwargs_and_output_names(tmp_path):
    model = TwoHeadModel(obs_dim=6, act_dim=3, hidden=16)
    Agent(PolicyGradient(model, lr=1e-3)).save(tmp_path / "ac.h5")
    result = _cli("ac.h5", "--model-class", "onnx_models:TwoHeadModel",
                  "--model-kwargs", json.dumps({"obs_dim": 6, "act_dim": 3, "hidden": 16}),
                  "--input-shape", "None,6", "--output-name", "policy", "--output-name", "value",
                  "--app-dir", TESTS, "--output", "ac.onnx", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    obs = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
    session, (policy, value) = _run(tmp_path / "ac.onnx", {"obs": obs})
    assert [o.name for o in session.get_outputs()] == ["policy", "value"]
    model.eval()
    expected_policy, expected_value = model(paddle.to_tensor(obs))
    np.testing.assert_allclose(policy, expected_policy.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(value, expected_value.numpy(), rtol=0, atol=1e-5)


SCRIPT = """
import paddle
import parl_lite as parl
from parl_lite.algorithms import PolicyGradient

class Policy(parl.Model):
    def __init__(self, obs_dim, act_dim, hidden=8):
        super().__init__()
        self.fc1 = paddle.nn.Linear(obs_dim, hidden)
        self.fc2 = paddle.nn.Linear(hidden, act_dim)

    def forward(self, obs):
        return paddle.nn.functional.softmax(self.fc2(paddle.tanh(self.fc1(obs))), axis=-1)

if __name__ == "__main__":
    parl.Agent(PolicyGradient(Policy(4, 3, hidden=5), lr=1e-3)).save("script.h5")
"""


@pytest.mark.timeout(240)
def test_a_class_of_a_script_is_exported_from_the_script_s_module_with_the_recorded_arguments(tmp_path):
    """A checkpoint written by a script records its model class as __main__.Policy: naming the
    script's module with --model-class takes the recorded arguments (it built Policy() and failed);
    --import-recorded-class, which cannot import __main__, says what to give instead."""
    (tmp_path / "my_script.py").write_text(SCRIPT)
    made = subprocess.run([sys.executable, "my_script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert made.returncode == 0, made.stderr
    result = _cli("script.h5", "--input-shape", "None,4", "--model-class", "my_script:Policy", "--app-dir", ".",
                  "-o", "policy.onnx", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    session, (probs,) = _run(tmp_path / "policy.onnx", {"obs": np.zeros((2, 4), np.float32)})
    assert probs.shape == (2, 3)
    recorded = _cli("script.h5", "--input-shape", "None,4", "--import-recorded-class", cwd=tmp_path)
    assert recorded.returncode == 1 and "Traceback" not in recorded.stderr
    assert ("records the model class '__main__.Policy' for role 'model': a class of the script that was run (module "
            "__main__), which cannot be imported by that name; name the script's module instead: --model-class "
            "SCRIPT:Policy --app-dir FOLDER for FOLDER/SCRIPT.py") in " ".join(recorded.stderr.split())


@pytest.fixture
def checkpoint(tmp_path):
    make_agent(0).save(tmp_path / "pg.h5")
    return tmp_path / "pg.h5"


@pytest.mark.parametrize("extra, message", [
    (["--input-shape", "None,x"], "Invalid value for '--input-shape': 'None,x': each dimension must be"),
    (["--input-shape", "None,4", "--model-class", "no_such_module:Model"],
     "Invalid value for --model-class: cannot import module 'no_such_module' of 'no_such_module:Model'"),
    (["--input-shape", "None,4", "--model-class", "core_models:NoSuchModel"],
     "module 'core_models' has no class 'NoSuchModel'"),
    (["--input-shape", "None,4", "--model-class", "core_models:fixed_batch"], "is not a paddle.nn.Layer class"),
    (["--input-shape", "None,4", "--model-kwargs", "[4]"], "Invalid value for '--model-kwargs': must be a JSON object"),
    (["--input-shape", "None,4", "--model-kwargs", '{"obs_dim": 5}', "--import-recorded-class"],
     "does not fit: model: parameter 'fc1.weight' has shape (4, 20), expected (5, 20)"),
    (["--input-shape", "None,4", "--role", "target_model"], "has no model role 'target_model' (it holds ['model'])"),
])
def test_bad_arguments_get_clear_errors(checkpoint, extra, message):
    result = CliRunner().invoke(main, ["export", str(checkpoint), "--app-dir", str(TESTS), *extra])
    assert result.exit_code != 0
    assert message in result.output
    assert not checkpoint.with_suffix(".onnx").exists()


def test_missing_and_non_checkpoint_files_are_named(tmp_path):
    missing = CliRunner().invoke(main, ["export", str(tmp_path / "nope.h5"), "--input-shape", "None,4"])
    assert missing.exit_code == 2 and "nope.h5' does not exist" in missing.output
    (tmp_path / "notes.txt").write_text("not HDF5")
    wrong = CliRunner().invoke(main, ["export", str(tmp_path / "notes.txt"), "--input-shape", "None,4"])
    assert wrong.exit_code == 1 and "notes.txt is truncated or corrupted" in wrong.output


def test_an_input_shape_the_checkpoint_does_not_take_is_named_before_any_trace(checkpoint):
    """--input-shape None,17 for a model of 4 inputs printed about 80 lines of paddle's traces, twice."""
    result = _cli(checkpoint, "--input-shape", "None,17", "--model-class", "core_models:CartpoleModel",
                  "--app-dir", TESTS, cwd=checkpoint.parent)
    assert result.returncode == 2, result.stderr
    error = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert error == [f"Error: Invalid value for --input-shape: None,17 gives inputs of width 17, but the model's "
                     f"first layer fc1 takes width 4 (its weight fc1.weight in {checkpoint} has shape [4, 20]); use "
                     f"--input-shape None,4"], result.stderr
    assert "In transformed code" not in result.stderr and "Traceback" not in result.stderr
    assert not checkpoint.with_suffix(".onnx").exists()
