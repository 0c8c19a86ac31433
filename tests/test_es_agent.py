"""ESAgent: EvoKit's interface (clone, add_noise, predict, update, save/load)."""
import numpy as np
import onnxruntime as ort
import pytest

from evokit_py.agent import ESAgent
from evokit_py.checkpoint import SolverCheckpointError
from evokit_py.config import parse_config
from evokit_py.noise import SamplingInfo


def _config(**solver):
    return parse_config({"env": {"id": "CartPole-v1"}, "policy": {"mlp": {"hidden": [8], "init_std": 0.1}},
                         "solver": {"population_size": 4, **solver,
                                    "sampling": {"gaussian_sampling": {"std": 0.1, "seed": 3, "cache_size": 20000}}}})


@pytest.fixture
def agent():
    agent = ESAgent(_config())
    agent.load_inference_model()
    agent.init_solver()
    yield agent
    agent.close()


def test_add_noise_info_reproduces_the_noise(agent):
    center = agent.parameters()
    a, b = agent.clone(), agent.clone()
    info = a.add_noise()
    assert isinstance(info, SamplingInfo) and info.sign in (1, -1)
    noise = agent._shared.table.values[info.offset:info.offset + len(center)]
    assert np.allclose(a.parameters(), center + 0.1 * info.sign * noise, atol=1e-6)
    assert b.add_noise(info) == info and np.array_equal(b.parameters(), a.parameters())
    mirrored = b.add_noise()
    assert mirrored.offset == info.offset and mirrored.sign == -info.sign  # mirrored pair


def test_clones_see_updates_and_predict(agent):
    clone = agent.clone()
    before = clone.parameters()
    infos = [clone.add_noise() for _ in range(4)]
    with pytest.raises(RuntimeError, match="are out"):
        clone.add_noise()
    assert clone.predict(np.zeros(4)) in (0, 1)
    agent.update(infos, [1.0, 0.0, 3.0, 2.0])
    assert np.array_equal(clone.parameters(), agent.parameters())
    assert not np.array_equal(clone.parameters(), before)
    assert agent.solver.generation == 1


def test_solver_round_trip_and_inference_model(tmp_path, agent):
    clone = agent.clone()
    infos = [clone.add_noise() for _ in range(4)]
    agent.update(infos, [1.0, 0.0, 3.0, 2.0])
    agent.obs_stats.add(np.ones(4), np.ones(4) * 2, 1.0)
    agent.save_solver(tmp_path / "solver.h5")
    other = ESAgent(_config())
    other.load_inference_model()
    other.init_solver()
    other.load_solver(tmp_path / "solver.h5")
    assert other.solver.generation == 1 and np.array_equal(other.parameters(), agent.parameters())
    assert np.array_equal(other.obs_stats.total_sq, agent.obs_stats.total_sq)
    state_a, state_b = agent.solver.state_dict(), other.solver.state_dict()
    assert all(np.array_equal(state_a[k], state_b[k]) for k in state_a)  # optimizer moments too
    other.close()
    agent.save_inference_model(tmp_path / "policy.onnx")
    session = ort.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    out = session.run(None, {"obs": np.zeros((1, 4), np.float32)})[0]
    assert int(out[0].argmax()) == agent.predict(np.zeros(4))
    assert list(tmp_path.glob(".*tmp*")) == []  # atomic writes leave no temporary file


def test_load_solver_refuses_other_solvers_and_bad_files(tmp_path, agent):
    agent.save_solver(tmp_path / "solver.h5")
    cma = ESAgent(_config(type="CMA_ES"))
    cma.load_inference_model()
    cma.init_solver()
    with pytest.raises(SolverCheckpointError, match="holds a BASIC_ES solver"):
        cma.load_solver(tmp_path / "solver.h5")
    cma.close()
    (tmp_path / "junk.h5").write_bytes(b"junk")
    with pytest.raises(SolverCheckpointError, match="truncated or corrupted"):
        agent.load_solver(tmp_path / "junk.h5")
    with pytest.raises(SolverCheckpointError, match="does not exist"):
        agent.load_solver(tmp_path / "none.h5")


def test_agent_loads_a_user_onnx_file(tmp_path):
    from test_es_policy import _paddle_like_file
    path = tmp_path / "paddle.onnx"
    w, b = _paddle_like_file(path)
    agent = ESAgent(_config())
    agent.load_inference_model(path)
    agent.init_solver()
    assert np.array_equal(agent.parameters(), np.concatenate([w.ravel(), b]))
    assert agent.predict(np.ones(4)) == int((np.ones(4) @ w + b).argmax())
    agent.close()


def test_load_config_resets_the_agent_and_releases_its_table(tmp_path, agent):
    from pathlib import Path
    table = agent._shared.table.name.lstrip("/")
    path = tmp_path / "es.yaml"
    path.write_text("solver: {type: GA, population_size: 6}\n")
    agent.load_config(path)
    assert agent.config.solver.type == "GA" and agent._shared.solver is None
    assert not Path("/dev/shm", table).exists()
