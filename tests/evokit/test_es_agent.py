"""ESAgent: EvoKit's interface (clone, add_noise, predict, update, save/load)."""
import numpy as np
import onnxruntime as ort
import pytest

from evokit_py.agent import ESAgent
from evokit_py.checkpoint import SolverCheckpointError
from evokit_py.config import parse_config
from evokit_py.noise import SamplingInfo
from es_helpers import paddle_like_onnx_file
from locations import EXAMPLES


def _agent_config(**solver):
    return parse_config({"env": {"id": "CartPole-v1"}, "policy": {"mlp": {"hidden": [8], "init_std": 0.1}},
                         "solver": {"population_size": 4, **solver,
                                    "sampling": {"gaussian_sampling": {"std": 0.1, "seed": 3, "cache_size": 20000}}}})


@pytest.fixture
def agent():
    agent = ESAgent(_agent_config())
    yield agent
    agent.close()


def test_add_noise_info_reproduces_the_noise(agent):
    center = agent.parameters()
    a, b = agent.clone(), agent.clone()
    info = a.add_noise()
    assert isinstance(info, SamplingInfo) and info.sign in (1, -1)
    noise = agent.solver.noise.table.values[info.offset:info.offset + len(center)]
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
    other = ESAgent(_agent_config())
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
    cma = ESAgent(_agent_config(type="CMA_ES"))
    with pytest.raises(SolverCheckpointError, match="holds a BASIC_ES solver"):
        cma.load_solver(tmp_path / "solver.h5")
    cma.close()
    (tmp_path / "junk.h5").write_bytes(b"junk")
    with pytest.raises(SolverCheckpointError, match="truncated or corrupted"):
        agent.load_solver(tmp_path / "junk.h5")
    with pytest.raises(SolverCheckpointError, match="does not exist"):
        agent.load_solver(tmp_path / "none.h5")


def test_agent_loads_a_user_onnx_file(tmp_path):
    path = tmp_path / "paddle.onnx"
    w, b = paddle_like_onnx_file(path)
    agent = ESAgent(_agent_config(), model=path)
    assert np.array_equal(agent.parameters(), np.concatenate([w.ravel(), b]))
    assert agent.predict(np.ones(4)) == int((np.ones(4) @ w + b).argmax())
    agent.close()


def test_an_agent_from_a_config_file_owns_its_noise_table_and_close_releases_it(tmp_path):
    from pathlib import Path
    path = tmp_path / "es.yaml"
    path.write_text("solver: {type: GA, population_size: 6}\n")
    agent = ESAgent(path)
    table = Path("/dev/shm", agent.noise_spec().table_name.lstrip("/"))
    assert agent.config.solver.type == "GA" and agent.solver.generation == 0 and table.exists()
    clone = agent.clone()
    clone.close()  # a clone only drops its reference
    assert table.exists()
    agent.close()
    assert not table.exists()


def _onnx_file(tmp_path, obs_dim, act_dim, output="none"):
    from evokit_py.policy import OnnxPolicy, build_mlp
    policy = OnnxPolicy(build_mlp(obs_dim, act_dim, [], "tanh", output))
    path = tmp_path / f"policy_{obs_dim}x{act_dim}_{output}.onnx"
    path.write_bytes(policy.to_onnx(np.zeros(policy.param_size)).SerializeToString())
    return path


@pytest.mark.parametrize("env_id, obs_dim, act_dim, output, message", [
    ("CartPole-v1", 4, 1, "none", r"has 1 output\(s\), the action space Discrete\(2\) needs 2"),
    ("Pendulum-v1", 3, 3, "tanh", r"has 3 output\(s\), the action space Box\(-2.0, 2.0, \(1,\), float32\) needs 1"),
    ("Pendulum-v1", 3, 1, "softmax", r"ends in a softmax, which cannot drive the continuous action space Box"),
    ("CartPole-v1", 3, 2, "none", r"does not take the observations of Box\(.*\(4,\), float32\)"),
])
def test_a_policy_that_does_not_fit_the_env_is_refused_naming_file_and_space(tmp_path, env_id, obs_dim, act_dim,
                                                                             output, message):
    path = _onnx_file(tmp_path, obs_dim, act_dim, output)
    with pytest.raises(ValueError, match=f"policy.onnx {path}: .*" + message):
        ESAgent(parse_config({"env": {"id": env_id}, "policy": {"onnx": str(path)}}))


def test_a_softmax_mlp_on_a_box_space_is_refused():
    with pytest.raises(ValueError, match="policy.mlp: ends in a softmax"):
        ESAgent(parse_config({"env": {"id": "Pendulum-v1"}, "policy": {"mlp": {"output_activation": "softmax"}}}))


def test_the_exported_policy_carries_the_statistics_of_the_best_weights(tmp_path):
    from onnx import numpy_helper, load

    from evokit_py.checkpoint import read_checkpoint
    from evokit_py.config import resolve_config
    from evokit_py.train import train

    config = resolve_config(None, [f"train.log_dir={tmp_path}/run", f"train.checkpoint_dir={tmp_path}/run/ck",
                                   "train.target_return=null", "train.generations=8", "train.eval_episodes=2",
                                   "seed=1"])  # evaluation returns 52, 101, 360, 500 (best), 500, 500, 500, 500
    result = train(config, backend="inprocess", echo=lambda line: None)
    _, groups = read_checkpoint(result.checkpoint_path)
    best, final = groups["extra"], groups["obs_stats"]
    initializers = {t.name: numpy_helper.to_array(t) for t in load(str(result.onnx_path)).graph.initializer}
    best_mean = best["best_obs_stats/sum"] / best["best_obs_stats/count"]
    assert np.allclose(initializers["obs_mean"], best_mean, atol=1e-6)
    assert not np.allclose(best_mean, final["sum"] / final["count"])  # this run's best is not its last generation


def test_one_source_of_defaults():
    from evokit_py.config import ESConfig, default_config, resolve_config
    # an empty config file, the built-in job and the dataclass defaults are the same job
    assert parse_config({}) == default_config() == resolve_config(None) == ESConfig()
    assert parse_config(__import__("yaml").safe_load(default_config().to_yaml())) == ESConfig()
    solver = ESConfig().solver
    assert (solver.optimizer.type, solver.optimizer.base_lr) == ("SGD", 0.05)
    assert (solver.sampling.gaussian_sampling.std, solver.sampling.gaussian_sampling.seed) == (0.1, 7)


def test_the_cartpole_example_file_is_the_built_in_job():
    from evokit_py.config import ESConfig, load_config
    assert load_config(EXAMPLES / "es_cartpole.yaml") == ESConfig()


def test_a_checkpoint_missing_solver_state_is_a_clear_error(tmp_path, agent):
    import h5py
    path = tmp_path / "solver.h5"
    agent.save_solver(path)
    with h5py.File(path, "a") as file:
        del file["solver/theta"]
    with pytest.raises(SolverCheckpointError, match="BASIC_ES state has no 'theta'"):
        agent.load_solver(path)


@pytest.mark.parametrize("stats", [{}, {"std_floor": 1e-4, "clip": None}])  # OpenAI ES's filter, ARS's
@pytest.mark.parametrize("mlp", [{"hidden": [8], "init_std": 0.5},
                                 {"hidden": [], "output_activation": "none", "bias": False, "init_std": 0.5}])
def test_predict_plays_bit_for_bit_the_episode_a_sampling_worker_plays(mlp, stats):
    """One normalisation (float32 throughout) for the workers and predict, and a linear policy that
    the workers run in numpy gives onnxruntime's bits: a continuous action feeds any difference in
    the last bit back into the trajectory, so equal returns mean equal inputs."""
    import gymnasium as gym

    from evokit_py.obs_stats import normalisation
    from evokit_py.sampler import Sampler

    config = parse_config({"env": {"id": "Pendulum-v1"}, "policy": {"mlp": mlp}, "observation_stats": stats})
    agent = ESAgent(config)
    agent.obs_stats.add(np.array([7.0, -14.0, 21.0]), np.array([35.0, 63.0, 63.1]), 7.0)  # std 1e-2 in the third
    sampler = Sampler(config, agent.policy_bytes(), agent.noise_spec())
    env = gym.make("Pendulum-v1")
    try:
        sampler.policy.set_parameters(agent.parameters())
        for seed in range(3):
            normalised = normalisation(agent.obs_stats, True, config.observation_stats.std_floor)
            worker_return, observations = sampler.run_episode(seed, *normalised)
            obs, _ = env.reset(seed=seed)
            seen, total, done = [], 0.0, False
            while not done:
                seen.append(obs)
                obs, reward, terminated, truncated, _ = env.step(agent.predict(obs))
                total, done = total + float(reward), terminated or truncated
            assert total == worker_return and np.array_equal(np.asarray(seen, np.float64), observations)
    finally:
        env.close()
        sampler.release()
        agent.close()


def test_the_observation_stats_floor_the_std_and_clip_the_normalised_observation_as_configured():
    """OpenAI ES's filter (std at least 0.1, clipped to +-5) by default; ARS's (a std of 1e-3 kept,
    nothing clipped) with ``observation_stats: {std_floor: 1.0e-4, clip: null}``."""
    from evokit_py.obs_stats import ObsStats, normalisation, normalise

    stats = ObsStats(2)
    stats.add(np.array([0.0, 10.0]), np.array([1e-6 * 10, 1010.0]), 10.0)  # std 1e-3 and 10
    obs = np.array([0.01, 0.0])
    assert np.allclose(normalisation(stats, True, 0.1)[1], [0.1, 10.0])
    assert np.allclose(normalise(obs, *normalisation(stats, True, 0.1), 5.0), [[0.1, -0.1]])
    assert np.allclose(normalisation(stats, True, 1e-4)[1], [1e-3, 10.0])
    assert np.allclose(normalise(obs, *normalisation(stats, True, 1e-4), None), [[10.0, -0.1]])
    assert np.allclose(normalise(obs, *normalisation(stats, True, 1e-4), 5.0), [[5.0, -0.1]])
    assert normalisation(stats, False, 0.1) == (None, None)
