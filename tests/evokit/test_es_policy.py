"""The ONNX policy: weights as inputs (no session rebuild), user files converted, export."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from es_helpers import paddle_like_onnx_file
from evokit_py.policy import OnnxPolicy, build_mlp


def _numpy_mlp(params, obs, sizes):
    x, offset = obs, 0
    for layer, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = params[offset:offset + fan_in * fan_out].reshape(fan_in, fan_out)
        offset += fan_in * fan_out
        b = params[offset:offset + fan_out]
        offset += fan_out
        x = x @ w + b
        x = np.tanh(x) if layer < len(sizes) - 2 else np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    return x


def test_mlp_matches_numpy_and_swaps_weights_without_a_new_session():
    sizes = [4, 8, 8, 3]
    policy = OnnxPolicy(build_mlp(4, 3, [8, 8], "tanh", "softmax"))
    session = policy.session
    assert policy.param_size == 4 * 8 + 8 + 8 * 8 + 8 + 8 * 3 + 3
    obs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    for seed in range(3):
        params = np.random.default_rng(seed).standard_normal(policy.param_size).astype(np.float32)
        policy.set_parameters(params)
        assert np.allclose(policy(obs), _numpy_mlp(params, obs, sizes), atol=1e-5)
    assert policy.session is session
    with pytest.raises(ValueError, match="shape"):
        policy.set_parameters(np.zeros(3))


def test_user_onnx_file_float_initializers_become_parameters(tmp_path):
    path = tmp_path / "paddle.onnx"
    w, b = paddle_like_onnx_file(path)
    policy, x0 = OnnxPolicy.from_file(path)
    assert policy.output_name == "fetch_name_0" and policy.weight_names == ["linear_0.w_0", "linear_0.b_0"]
    assert np.array_equal(x0, np.concatenate([w.ravel(), b]))
    obs = np.ones((1, 4), np.float32)
    policy.set_parameters(x0)
    assert np.allclose(policy(obs), obs @ w + b, atol=1e-6)
    with pytest.raises(ValueError, match="does not exist"):
        OnnxPolicy.from_file(tmp_path / "none.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not an ONNX model"):
        OnnxPolicy.from_file(tmp_path / "junk.onnx")


@pytest.mark.parametrize("clip", [5.0, None])
def test_export_folds_weights_and_normalisation_into_a_standalone_model(tmp_path, clip):
    policy = OnnxPolicy(build_mlp(3, 2, [4]))
    params = np.random.default_rng(2).standard_normal(policy.param_size).astype(np.float32)
    mean, std = np.array([1.0, -1.0, 0.5]), np.array([2.0, 0.5, 1.0])
    path = tmp_path / "policy.onnx"
    onnx.save(policy.to_onnx(params, mean, std, clip), str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs"]
    obs = np.array([[3.0, 0.0, 40.0]], np.float32)
    policy.set_parameters(params)
    scaled = (obs - mean) / std  # the third input is 39.5 std above its mean
    expected = policy((scaled if clip is None else np.clip(scaled, -clip, clip)).astype(np.float32))
    assert np.allclose(session.run(None, {"obs": obs})[0], expected, atol=1e-5)


@pytest.mark.parametrize("clip", [5.0, None])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("obs_dim, act_dim", [(8, 2), (11, 3), (17, 6), (376, 17)])
def test_the_numpy_linear_policy_gives_the_bits_of_the_graph_and_of_the_exported_file(obs_dim, act_dim, bias, clip):
    """Workers run a linear policy in numpy; ESAgent.predict and the exported file run the graph in
    onnxruntime: every output must be the same float32, or replaying a policy would not give the
    return reported for it (MuJoCo feeds the last bit back into the trajectory)."""
    from evokit_py.obs_stats import normalise
    from evokit_py.policy import LinearPolicy

    rng = np.random.default_rng(obs_dim + bias)
    graph = OnnxPolicy(build_mlp(obs_dim, act_dim, [], output_activation="none", bias=bias))
    fast = LinearPolicy(obs_dim, act_dim, bias)
    assert fast.param_size == graph.param_size == obs_dim * act_dim + (act_dim if bias else 0)
    params = rng.standard_normal(graph.param_size) * 0.3  # float64, rounded to float32 by both
    graph.set_parameters(params)
    fast.set_parameters(params)
    mean = rng.standard_normal(obs_dim).astype(np.float32)
    std = rng.uniform(0.1, 3.0, obs_dim).astype(np.float32)
    exported = ort.InferenceSession(graph.to_onnx(params, mean, std, clip).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
    observations = rng.standard_normal((500, obs_dim)) * 4.0
    for obs in observations:
        x = normalise(obs, mean, std, clip)
        expected = fast(x)
        assert expected.dtype == np.float32 and expected.shape == (1, act_dim)
        assert np.array_equal(graph(x), expected)
        assert np.array_equal(exported.run(None, {"obs": obs[None].astype(np.float32)})[0], expected)
    batch = observations.astype(np.float32)
    assert np.array_equal(fast(batch), graph(batch))


def test_a_policy_without_bias_has_only_weights():
    policy = OnnxPolicy(build_mlp(3, 2, [4], bias=False))
    assert policy.weight_names == ["w0", "w1"] and policy.param_size == 3 * 4 + 4 * 2
    params = np.random.default_rng(3).standard_normal(policy.param_size).astype(np.float32)
    policy.set_parameters(params)
    obs = np.random.default_rng(4).standard_normal((5, 3)).astype(np.float32)
    hidden = np.tanh(obs @ params[:12].reshape(3, 4))
    assert np.allclose(policy(obs), hidden @ params[12:].reshape(4, 2), atol=1e-6)
    assert OnnxPolicy(build_mlp(3, 2, [], bias=False)).weight_names == ["w0"]


@pytest.mark.parametrize("mlp, numpy_policy", [
    ({"hidden": [], "output_activation": "none"}, True),
    ({"hidden": [], "output_activation": "none", "bias": False}, True),
    ({"hidden": [], "output_activation": "auto"}, False),  # tanh on a Box: onnxruntime's Tanh
    ({"hidden": [4], "output_activation": "none"}, False),
])
def test_workers_run_in_numpy_only_the_linear_policy_without_output_activation(mlp, numpy_policy):
    from evokit_py.config import parse_config
    from evokit_py.envs import make_env
    from evokit_py.policy import LinearPolicy, make_policy, sampling_policy

    config = parse_config({"env": {"id": "Pendulum-v1"}, "policy": {"mlp": mlp}})
    env = make_env(config.env)
    try:
        graph, _ = make_policy(config.policy, 0, env)
        policy = sampling_policy(config.policy, graph.to_bytes(), env)
    finally:
        env.close()
    assert isinstance(policy, LinearPolicy) == numpy_policy
    assert policy.param_size == graph.param_size
