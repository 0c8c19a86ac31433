"""A paddle model exported with parl_lite.export_onnx is an evokit_py policy: its weights become
the ES parameters, and es-train optimises them."""
import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

import parl_lite  # noqa: E402
from evokit_py.agent import ESAgent  # noqa: E402
from evokit_py.config import resolve_config  # noqa: E402
from evokit_py.policy import OnnxPolicy  # noqa: E402
from evokit_py.train import train  # noqa: E402


class CartpoleModel(parl_lite.Model):
    def __init__(self):
        super().__init__()
        self.fc1 = paddle.nn.Linear(4, 8)
        self.fc2 = paddle.nn.Linear(8, 2)

    def forward(self, obs):
        return self.fc2(paddle.tanh(self.fc1(obs)))


@pytest.mark.timeout(120)
def test_exported_paddle_model_is_an_es_policy(tmp_path):
    paddle.seed(3)
    model = CartpoleModel()
    path = parl_lite.export_onnx(model, tmp_path / "model.onnx", [None, 4])
    config = resolve_config(None, [f"policy.onnx={path}", "observation_normalization=false",
                                   f"train.log_dir={tmp_path}/run", f"train.checkpoint_dir={tmp_path}/run",
                                   "train.generations=2", "env.max_steps=50", "train.eval_episodes=1"])
    agent = ESAgent(config)
    weights = model.get_weights()
    policy, x0 = OnnxPolicy.from_file(path)
    assert sorted(policy.weight_names) == sorted(weights)  # the weights, named as in get_weights()
    assert np.array_equal(agent.parameters(), np.concatenate([weights[n].ravel() for n in policy.weight_names]))
    obs = np.array([0.01, -0.2, 0.03, 0.4], np.float32)
    expected = int(model(paddle.to_tensor(obs[None])).numpy()[0].argmax())
    assert agent.predict(obs) == expected
    agent.close()
    result = train(config, backend="inprocess", echo=lambda line: None)
    assert result.generations == 2 and result.onnx_path.is_file()
