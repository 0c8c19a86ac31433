"""export_onnx: real ONNX files, checked with onnx.checker and run in onnxruntime against paddle."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import onnx
import onnxruntime
import paddle
import pytest

import parl_lite
from core_models import CartpoleModel, NormModel, fixed_batch, make_agent
from onnx_models import (CnnPolicy, LgammaModel, ManyOpsModel, NoisyModel, NotSelfModel, TwoHeadModel,
                         cnn_sequential, mlp_sequential)
from locations import ROOT, TESTS

needs_paddle2onnx = pytest.mark.skipif(
    importlib.util.find_spec("paddle2onnx") is None,
    reason="paddle2onnx is not installed (it has no wheel for Python 3.13); "
           "pip install 'paddle2onnx>=2.0' on Python 3.10-3.12",
)


def _run_onnx(path, feeds):
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session, session.run(None, feeds)


def _paddle(model, *inputs):
    model.eval()
    with paddle.no_grad():
        out = model(*[paddle.to_tensor(x) for x in inputs])
    return [t.numpy() for t in (out if isinstance(out, (list, tuple)) else [out])]


ROUTES = ["onnx", pytest.param("paddle2onnx", marks=needs_paddle2onnx)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ROUTES)
def test_mlp_matches_paddle_with_a_dynamic_batch(tmp_path, backend):
    model = CartpoleModel()
    path = parl_lite.export_onnx(model, tmp_path / "mlp.onnx", [None, 4], backend=backend)  # a plain shape
    for batch in (1, 7):
        obs = np.random.default_rng(batch).standard_normal((batch, 4)).astype("float32")
        session, (probs,) = _run_onnx(path, {"obs": obs})  # the input is named after forward's parameter
        np.testing.assert_allclose(probs, _paddle(model, obs)[0], rtol=0, atol=1e-5)
    assert [o.name for o in session.get_outputs()] == ["output_0"]
    assert [p.name for p in tmp_path.iterdir()] == ["mlp.onnx"]
    assert (onnx.load(str(path)).producer_name == "parl_lite") == (backend == "onnx")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ROUTES)
def test_cnn_matches_paddle(tmp_path, backend):
    model = CnnPolicy()
    spec = paddle.static.InputSpec([None, 3, 16, 16], "float32", "pixels")
    path = parl_lite.export_onnx(model, tmp_path / "cnn.onnx", [spec], backend=backend)
    image = np.random.default_rng(0).standard_normal((5, 3, 16, 16)).astype("float32")
    _, (probs,) = _run_onnx(path, {"pixels": image})
    np.testing.assert_allclose(probs, _paddle(model, image)[0], rtol=0, atol=1e-5)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ROUTES)
def test_shared_two_head_model_exports_both_outputs(tmp_path, backend):
    model = TwoHeadModel()
    path = parl_lite.export_onnx(model, tmp_path / "ac.onnx", [[None, 4]], output_names=["policy", "value"],
                                 backend=backend)
    obs = np.random.default_rng(1).standard_normal((6, 4)).astype("float32")
    session, (policy, value) = _run_onnx(path, {"obs": obs})
    assert [o.name for o in session.get_outputs()] == ["policy", "value"]
    expected_policy, expected_value = _paddle(model, obs)
    assert policy.shape == (6, 2) and value.shape == (6, 1)
    np.testing.assert_allclose(policy, expected_policy, rtol=0, atol=1e-5)
    np.testing.assert_allclose(value, expected_value, rtol=0, atol=1e-5)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ROUTES)
def test_initializers_are_the_model_weights_under_their_structured_names(tmp_path, backend):
    model = NormModel()  # parameters and batch-norm buffers
    path = parl_lite.export_onnx(model, tmp_path / "norm.onnx", [None, 3], backend=backend)
    initializers = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    weights = model.get_weights()
    assert sorted(initializers) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(initializers[name], value, err_msg=name)


@pytest.mark.timeout(120)
def test_evokit_loads_an_exported_policy_with_its_weights(tmp_path):
    from evokit_py.policy import OnnxPolicy

    model = CartpoleModel()
    parl_lite.export_onnx(model, tmp_path / "policy.onnx", [None, 4])
    policy, parameters = OnnxPolicy.from_file(tmp_path / "policy.onnx")
    assert parameters.size == sum(w.size for w in model.get_weights().values())
    policy.set_parameters(parameters)  # from_file hands the file's weights over as the initial parameters
    obs = fixed_batch(2)[0]
    np.testing.assert_allclose(policy(obs), _paddle(model, obs)[0], rtol=0, atol=1e-5)


@pytest.mark.timeout(120)
def test_agent_export_onnx_and_training_goes_on(tmp_path):
    agent = make_agent(0)
    agent.learn(*fixed_batch(0))
    agent.export_onnx(tmp_path / "agent.onnx", [paddle.static.InputSpec([None, 4], "float32", "obs")])
    obs = fixed_batch(3)[0]
    _, (probs,) = _run_onnx(tmp_path / "agent.onnx", {"obs": obs})
    np.testing.assert_allclose(probs, agent.predict(obs), rtol=0, atol=1e-5)
    before = agent.get_weights()["fc1.weight"]
    agent.learn(*fixed_batch(1))  # the export leaves the dygraph model trainable
    assert not np.allclose(before, agent.get_weights()["fc1.weight"])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ROUTES)
def test_export_runs_in_evaluation_mode_and_restores_the_training_mode(tmp_path, backend):
    model = NormModel()  # batch-norm and dropout
    model.bn._mean.set_value(np.linspace(-1, 1, 5).astype("float32"))
    model.train()
    parl_lite.export_onnx(model, tmp_path / "norm.onnx", [None, 3], backend=backend)
    assert model.training and model.bn.training and model.drop.training
    x = np.random.default_rng(2).standard_normal((4, 3)).astype("float32")
    _, (out,) = _run_onnx(tmp_path / "norm.onnx", {"x": x})
    np.testing.assert_allclose(out, _paddle(model, x)[0], rtol=0, atol=1e-5)  # running statistics, no dropout


@needs_paddle2onnx
@pytest.mark.timeout(120)
def test_unsupported_operator_raises_names_it_and_leaves_no_trace(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the export's temporary folder goes
    out = tmp_path / "out"
    out.mkdir()
    (out / "policy.onnx").write_bytes(b"previous export")
    with pytest.raises(parl_lite.OnnxExportError) as caught:
        parl_lite.export_onnx(LgammaModel(), out / "policy.onnx", [None, 4])
    message = str(caught.value)
    assert "LgammaModel" in message and "SIGABRT" in message
    assert "operators it does not support: lgamma (in forward itself" in message  # paddle2onnx's
    assert "own translation failed too: operator lgamma (in forward itself" in message
    # the caller survived paddle2onnx's abort, the old file is intact, nothing is left behind
    assert (out / "policy.onnx").read_bytes() == b"previous export"
    assert [p.name for p in out.iterdir()] == ["policy.onnx"]
    assert list(scratch.iterdir()) == []


@needs_paddle2onnx
@pytest.mark.timeout(120)
def test_verification_catches_a_graph_that_differs_from_paddle(tmp_path):
    with pytest.raises(parl_lite.OnnxExportError, match=r"NoisyModel.*output 'output_0'.*differs from paddle"):
        parl_lite.export_onnx(NoisyModel(), tmp_path / "noisy.onnx", [None, 4])
    assert not (tmp_path / "noisy.onnx").exists()


def test_forward_whose_first_parameter_is_not_self_is_refused_clearly(tmp_path):
    with pytest.raises(parl_lite.OnnxExportError, match=r"NotSelfModel.*first parameter of forward.*'this'.*'self'"):
        parl_lite.export_onnx(NotSelfModel(), tmp_path / "x.onnx", [None, 4])


@pytest.mark.parametrize("input_spec, match", [
    ([None, 0], r"input_spec must be an InputSpec or a shape of positive ints and None \(dynamic\), got \[None, 0\]"),
    ("obs", "input_spec must be"),
    ([[None, 4], [None, 4]], r"forward takes inputs \['obs'\] \(1 required\) but input_spec gives 2"),
    ([[None, 4.5]], r"input_spec\[0\] must be an InputSpec or a shape"),
])
def test_bad_input_spec_is_named(tmp_path, input_spec, match):
    with pytest.raises(parl_lite.OnnxExportError, match=match):
        parl_lite.export_onnx(CartpoleModel(), tmp_path / "x.onnx", input_spec)


@pytest.mark.parametrize("make, shape", [(mlp_sequential, [None, 4]), (cnn_sequential, [None, 3, 16, 16])])
def test_sequentials_translate_with_asymmetric_and_same_padding(tmp_path, make, shape):
    model = make()
    path = parl_lite.export_onnx(model, tmp_path / "seq.onnx", shape, backend="onnx")
    x = np.random.default_rng(4).standard_normal([5, *shape[1:]]).astype("float32")
    _, (out,) = _run_onnx(path, {"input": x})
    np.testing.assert_allclose(out, _paddle(model, x)[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 17, 18])  # reductions take their axes differently from opset 18 on
def test_every_translated_operator_matches_paddle(tmp_path, opset):
    model = ManyOpsModel()
    outputs = parl_lite.export_onnx(model, tmp_path / "ops.onnx", [[None, 4], [None, 10]], backend="onnx",
                                    opset_version=opset)
    rng = np.random.default_rng(opset)
    obs, mask = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal((3, 10)).astype("float32")
    _, actual = _run_onnx(outputs, {"obs": obs, "mask": mask})
    expected = _paddle(model, obs, mask)
    assert len(actual) == len(expected) == 8
    for got, want in zip(actual, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)


def test_untranslatable_operator_is_named_with_its_layer(tmp_path):
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.GELU())
    with pytest.raises(parl_lite.OnnxExportError, match=r"Sequential.*operator gelu \(in layer /GELU/\) "
                                                         r"has no translation \(supported: abs, add"):
        parl_lite.export_onnx(model, tmp_path / "x.onnx", [None, 4], backend="onnx")


@needs_paddle2onnx
@pytest.mark.timeout(120)
def test_auto_falls_back_to_paddle2onnx_for_an_untranslatable_operator(tmp_path):
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.GELU(), paddle.nn.Linear(8, 2))
    path = parl_lite.export_onnx(model, tmp_path / "gelu.onnx", [None, 4])
    assert onnx.load(str(path)).producer_name != "parl_lite"
    x = np.random.default_rng(5).standard_normal((3, 4)).astype("float32")
    _, (out,) = _run_onnx(path, {"input": x})
    np.testing.assert_allclose(out, _paddle(model, x)[0], rtol=0, atol=1e-5)


WITHOUT_PADDLE2ONNX = """
import sys
sys.modules["paddle2onnx"] = None  # as on Python 3.13, where paddle2onnx cannot be installed
sys.path.insert(0, {tests!r})
import parl_lite
from core_models import CartpoleModel
from onnx_models import LgammaModel
parl_lite.export_onnx(CartpoleModel(), {path!r}, [None, 4])
try:
    parl_lite.export_onnx(LgammaModel(), {path!r} + ".other", [None, 4])
except parl_lite.OnnxExportError as error:
    print("ERROR:", error)
try:
    parl_lite.export_onnx(CartpoleModel(), {path!r} + ".forced", [None, 4], backend="paddle2onnx")
except parl_lite.OnnxExportError as error:
    print("FORCED:", error)
"""


@pytest.mark.timeout(120)
def test_without_paddle2onnx_models_export_and_others_say_what_to_install(tmp_path):
    path = tmp_path / "mlp.onnx"
    script = WITHOUT_PADDLE2ONNX.format(tests=str(TESTS), path=str(path))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                            timeout=100, env=env)
    assert result.returncode == 0, result.stderr
    onnx.checker.check_model(onnx.load(str(path)))
    assert "ERROR: model LgammaModel" in result.stdout and "operator lgamma" in result.stdout
    assert "paddle2onnx is not installed" in result.stdout and "pip install 'paddle2onnx>=2.0'" in result.stdout
    assert "FORCED: model CartpoleModel (core_models): backend='paddle2onnx' was asked for, but paddle2onnx is not " \
           "installed" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.onnx"]
