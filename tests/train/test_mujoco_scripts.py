"""The continuous-control scripts on a MuJoCo task with observation and reward normalisation on: a
short run, a resume, and the exported ONNX policy normalising raw observations as training did."""
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite.core.model import Model
from parl_lite.io import checkpoint
from locations import EXAMPLES

pytest.importorskip("mujoco")
onnxruntime = pytest.importorskip("onnxruntime")

OFF_POLICY = ["--learning-starts", "100", "--batch-size", "32", "--net-arch", "32,32"]
SCRIPTS = {
    "train_sac.py": OFF_POLICY,
    "train_td3.py": OFF_POLICY,
    "train_ddpg.py": OFF_POLICY,
    "train_ppo.py": ["--rollout-steps", "100", "--minibatch-size", "50", "--epochs", "2", "--pi-arch", "32,32",
                     "--vf-arch", "32,32"],
}


def _run(script: str, folder: Path, steps: int, *extra: str) -> dict:
    done = subprocess.run([sys.executable, str(EXAMPLES / script), "--env", "Hopper-v5", "--total-steps", str(steps),
                           "--eval-every", str(steps), "--eval-episodes", "1", "--normalize", "--normalize-reward",
                           "--save", str(folder / "run.h5"), *SCRIPTS[script], *extra],
                          capture_output=True, text=True, timeout=240, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _trained_model(path: Path) -> Model:
    """The checkpoint's policy model, rebuilt from its recorded class and arguments."""
    with checkpoint.open_checkpoint(path) as file:
        attrs = checkpoint.model_group(file, path, "model", role_option="role").attrs
        module, _, name = str(attrs["class"]).rpartition(".")
        kwargs = json.loads(attrs["constructor_args"])
    model = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    checkpoint.load(path, models={"model": model}, optimizers=None, strict=False)
    return model


@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_normalised_mujoco_run_resumes_and_its_onnx_policy_normalises_as_training_did(tmp_path, script):
    first = _run(script, tmp_path, 200)
    with h5py.File(tmp_path / "run.h5", "r") as file:
        count = float(file["models/model/obs_normalizer.count"][0])
        reward_count = float(file["trainer"].attrs["reward_count"])
    assert count > 100 and reward_count > 100  # both statistics were fed and saved
    resumed = _run(script, tmp_path, 400, "--resume", str(tmp_path / "run.h5"))
    assert first["steps"] == 200 and resumed["steps"] == 400 and resumed["updates"] > first["updates"]
    with h5py.File(tmp_path / "run.h5", "r") as file:
        assert float(file["models/model/obs_normalizer.count"][0]) > count  # went on from the saved statistics
        assert float(file["trainer"].attrs["reward_count"]) > reward_count

    model = _trained_model(tmp_path / "run.h5")
    model.eval()
    parl_lite.export_onnx(model, tmp_path / "policy.onnx", [paddle.static.InputSpec([None, 11], "float32", "obs")])
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"))
    env = gym.make("Hopper-v5")
    raw = np.stack([env.reset(seed=seed)[0] for seed in range(4)] + [env.step(env.action_space.sample())[0]
                                                                      for _ in range(4)]).astype(np.float32)
    env.close()
    exported = session.run(None, {"obs": raw})[0]
    with paddle.no_grad():
        trained = model(paddle.to_tensor(raw))
        trained = (trained[0] if isinstance(trained, tuple) else trained).numpy()
        normalizer, model.obs_normalizer = model.obs_normalizer, None
        unnormalised = model(paddle.to_tensor(raw))
        unnormalised = (unnormalised[0] if isinstance(unnormalised, tuple) else unnormalised).numpy()
        model.obs_normalizer = normalizer
    np.testing.assert_allclose(exported, trained, rtol=1e-4, atol=1e-5)
    assert not np.allclose(exported, unnormalised, atol=1e-3)  # the graph itself standardises the observations
