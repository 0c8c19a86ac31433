"""Agent.save / Agent.restore in HDF5: layout, exact resume, atomicity, validation."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import paddle
import pytest

import parl_lite
from parl_lite.common.datasets import write_dataset
from core_models import CartpoleModel, NormModel, SharedActorCritic, fixed_batch, make_agent
from locations import TESTS



def _assert_same_weights(first: dict, second: dict, **tolerance) -> None:
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_allclose(first[name], second[name], err_msg=name, **tolerance)


def test_save_writes_the_documented_layout(tmp_path):
    agent = make_agent(0)
    agent.learn(*fixed_batch())  # Adam creates its accumulators on the first step
    path = tmp_path / "agent.h5"
    agent.save(path, with_optimizer=True)
    with h5py.File(path, "r") as file:
        assert file.attrs["format"] == "parl_lite.checkpoint"
        assert file.attrs["format_version"] == 2
        assert file.attrs["parl_lite_version"] == parl_lite.__version__
        assert file.attrs["model_class"] == "core_models.CartpoleModel"
        assert file.attrs["owner_class"] == "core_models.CartpoleAgent"
        assert sorted(file["models/model"]) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
        assert file["models/model/fc1.weight"].shape == (4, 20)
        assert "optimizers/optimizer/model/fc1.weight/moment1_0" in file
    assert [p.name for p in tmp_path.iterdir()] == ["agent.h5"]  # no temporary left behind


def test_restore_round_trip(tmp_path):
    saved, fresh = make_agent(0), make_agent(1)
    saved.save(tmp_path / "a.h5")
    fresh.restore(tmp_path / "a.h5")
    _assert_same_weights(saved.get_weights(), fresh.get_weights(), rtol=0, atol=0)


def test_training_resumes_exactly_with_optimizer_state(tmp_path):
    batches = [fixed_batch(seed) for seed in range(5)]
    agent = make_agent(0)
    for batch in batches[:3]:
        agent.learn(*batch)
    agent.save(tmp_path / "mid.h5", with_optimizer=True)
    for batch in batches[3:]:
        agent.learn(*batch)

    resumed = make_agent(7)
    resumed.restore(tmp_path / "mid.h5")
    for batch in batches[3:]:
        resumed.learn(*batch)
    _assert_same_weights(agent.get_weights(), resumed.get_weights(), rtol=0, atol=1e-6)


def test_without_optimizer_state_adam_restarts(tmp_path):
    batches = [fixed_batch(seed) for seed in range(4)]
    agent = make_agent(0)
    for batch in batches[:2]:
        agent.learn(*batch)
    agent.save(tmp_path / "w.h5")
    resumed = make_agent(0)
    resumed.restore(tmp_path / "w.h5")
    for batch in batches[2:]:
        agent.learn(*batch)
        resumed.learn(*batch)
    assert not np.allclose(agent.get_weights()["fc1.weight"], resumed.get_weights()["fc1.weight"], atol=1e-6)


def test_shared_model_checkpoint_covers_every_head(tmp_path):
    saved, fresh = make_agent(0, model_cls=SharedActorCritic), make_agent(1, model_cls=SharedActorCritic)
    saved.save(tmp_path / "shared.h5")
    fresh.restore(tmp_path / "shared.h5")
    with h5py.File(tmp_path / "shared.h5", "r") as file:
        assert {"trunk.weight", "policy_head.weight", "value_head.weight"} <= set(file["models/model"])
    _assert_same_weights(saved.get_weights(), fresh.get_weights(), rtol=0, atol=0)


@pytest.mark.timeout(120)
def test_restores_into_a_fresh_agent_in_another_process(tmp_path):
    agent = make_agent(3)
    agent.save(tmp_path / "a.h5")
    obs = fixed_batch(9)[0]
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        sys.path.insert(0, {str(TESTS)!r})
        from core_models import make_agent, fixed_batch
        agent = make_agent(42)
        agent.restore({str(tmp_path / 'a.h5')!r})
        print(json.dumps(agent.predict(fixed_batch(9)[0]).tolist()))
    """)
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=100, check=True)
    np.testing.assert_allclose(np.array(json.loads(output.stdout.splitlines()[-1])), agent.predict(obs), atol=1e-7)


KILLED_WRITER = """
import sys
import numpy as np
import paddle
import parl_lite
from parl_lite.algorithms import PolicyGradient

class Big(parl_lite.Model):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4000, 4000)   # 16M parameters: a save takes a while

class BigAgent(parl_lite.Agent):
    pass

agent = BigAgent(PolicyGradient(Big(), lr=1e-3))
path = sys.argv[1]
for version in range(1000):
    agent.alg.model.fc.weight.set_value(np.full([4000, 4000], version, "float32"))
    agent.alg.model.fc.bias.set_value(np.full([4000], version, "float32"))
    print("saving", version, flush=True)
    agent.save(path)
    print("saved", version, flush=True)
"""


@pytest.mark.timeout(180)
def test_kill_during_save_leaves_previous_checkpoint_intact(tmp_path):
    path = tmp_path / "big.h5"
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in writer.stdout:
            if line.strip() == "saving 2":  # versions 0 and 1 are on disk; 2 is being written now
                os.kill(writer.pid, signal.SIGKILL)
                break
    finally:
        writer.kill()
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    from parl_lite.io import checkpoint
    import paddle

    class Big(parl_lite.Model):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(4000, 4000)

    model = Big()
    checkpoint.load(path, models={"model": model}, optimizers={})
    weight = model.fc.weight.numpy()
    assert weight[0, 0] in (1.0, 2.0)  # the last complete save, or the one that just finished
    assert np.all(weight == weight[0, 0])


def test_missing_file_is_named(tmp_path):
    with pytest.raises(parl_lite.CheckpointError, match="nope.h5 does not exist"):
        make_agent(0).restore(tmp_path / "nope.h5")


def test_non_hdf5_file_gives_clear_error(tmp_path):
    path = tmp_path / "notes.h5"
    path.write_text("this is not HDF5")
    with pytest.raises(parl_lite.CheckpointError, match="notes.h5 is truncated or corrupted"):
        make_agent(0).restore(path)


def test_truncated_file_gives_clear_error(tmp_path):
    agent = make_agent(0)
    agent.save(tmp_path / "full.h5")
    data = (tmp_path / "full.h5").read_bytes()
    (tmp_path / "cut.h5").write_bytes(data[: len(data) // 2])
    with pytest.raises(parl_lite.CheckpointError, match="cut.h5"):
        agent.restore(tmp_path / "cut.h5")


def test_corrupted_bytes_give_clear_error(tmp_path):
    agent = make_agent(0)
    agent.save(tmp_path / "bad.h5")
    data = bytearray((tmp_path / "bad.h5").read_bytes())
    for offset in range(0, 512):
        data[offset] ^= 0xFF
    (tmp_path / "bad.h5").write_bytes(bytes(data))
    with pytest.raises(parl_lite.CheckpointError, match="bad.h5"):
        agent.restore(tmp_path / "bad.h5")


def test_hdf5_that_is_not_a_checkpoint(tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as file:
        file["x"] = np.zeros(3)
    with pytest.raises(parl_lite.CheckpointError, match="not a parl_lite checkpoint"):
        make_agent(0).restore(tmp_path / "other.h5")


def test_mismatched_parameters_are_named_and_nothing_changes(tmp_path):
    agent = make_agent(0)
    agent.save(tmp_path / "a.h5")
    with h5py.File(tmp_path / "a.h5", "r+") as file:  # with valid checksums: only the shapes are wrong
        del file["models/model/fc1.bias"]
        write_dataset(file["models/model"], "extra.weight", np.zeros(2, "float32"))
        del file["models/model/fc2.weight"]
        write_dataset(file["models/model"], "fc2.weight", np.zeros((3, 3), "float32"))
    other = make_agent(1)
    before = other.get_weights()
    with pytest.raises(parl_lite.CheckpointError) as info:
        other.restore(tmp_path / "a.h5")
    for name in ("fc1.bias", "extra.weight", "fc2.weight"):
        assert name in str(info.value)
    _assert_same_weights(before, other.get_weights(), rtol=0, atol=0)


def test_checkpoint_of_another_model_class_is_refused(tmp_path):
    make_agent(0).save(tmp_path / "a.h5")
    with pytest.raises(parl_lite.CheckpointError, match="missing parameters"):
        make_agent(0, model_cls=NormModel).restore(tmp_path / "a.h5")


def _set_value(tensor, index: int, value: float) -> None:
    values = tensor.numpy()
    values.flat[index] = value
    tensor.set_value(values)


def test_save_refuses_weights_that_are_not_finite_and_the_previous_checkpoint_stays(tmp_path):
    """Before, a diverged agent's NaN weights were written, and restore refused the file: the run's
    last good checkpoint was gone and nothing said so."""
    agent = make_agent(0)
    agent.learn(*fixed_batch())
    path = tmp_path / "a.h5"
    agent.save(path, with_optimizer=True)
    good = agent.get_weights()
    _set_value(agent.alg.model.state_dict()["fc2.bias"], 1, np.inf)
    with pytest.raises(ValueError, match=r"Agent.save\('.*a.h5'\): model parameter 'fc2.bias' holds inf \(1 of 2 "
                                         r"values are not finite\), so nothing was written and the previous file stays"):
        agent.save(path, with_optimizer=True)
    with pytest.raises(ValueError, match="model parameter 'fc2.bias' holds inf"):
        agent.save(tmp_path / "b.h5", agent.alg.model)  # PARL's model argument
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5"]
    fresh = make_agent(1)
    fresh.restore(path)
    _assert_same_weights(good, fresh.get_weights(), rtol=0, atol=0)


def test_save_refuses_optimizer_state_that_is_not_finite_naming_the_parameter(tmp_path):
    """An overflowing second moment (inf) with finite weights made a checkpoint restore refused."""
    agent = make_agent(0)
    agent.learn(*fixed_batch())
    moment = next(key for key in agent.alg.optimizer.state_dict() if key.endswith("moment2_0"))
    _set_value(agent.alg.optimizer.state_dict()[moment], 0, np.inf)
    agent.save(tmp_path / "weights.h5")  # the weights alone are finite: written
    with pytest.raises(ValueError, match=r"optimizer 'optimizer' accumulator 'moment2_0' of model parameter "
                                         r"'fc\d\.(weight|bias)' holds inf"):
        agent.save(tmp_path / "a.h5", with_optimizer=True)
    assert not (tmp_path / "a.h5").exists()


def test_save_agent_with_memory_refuses_weights_that_are_not_finite(tmp_path):
    from parl_lite.io.checkpoint import save_agent_with_memory
    from parl_lite.utils.replay_memory import ReplayMemory

    agent = make_agent(0)
    _set_value(agent.alg.model.state_dict()["fc1.weight"], 5, np.nan)
    with pytest.raises(ValueError, match=r"save_agent_with_memory\('.*a.h5'\): model parameter 'fc1.weight' holds "
                                         r"nan"):
        save_agent_with_memory(agent, tmp_path / "a.h5", ReplayMemory(4, 4, 0))
    assert list(tmp_path.iterdir()) == []


def _dqn_agent(seed: int = 0) -> parl_lite.Agent:
    from parl_lite.algorithms import DQN

    paddle.seed(seed)
    return parl_lite.Agent(DQN(CartpoleModel(), gamma=0.9, lr=1e-3))


def test_restore_refuses_a_checkpoint_of_other_models_naming_what_is_extra_and_missing(tmp_path):
    """Before, a DQN checkpoint restored into a PolicyGradient agent ignored its target_model."""
    dqn = _dqn_agent()
    dqn.save(tmp_path / "dqn.h5", with_optimizer=True)
    pg = make_agent(1)
    before = pg.get_weights()
    with pytest.raises(parl_lite.CheckpointError, match=r"holds model\(s\) \['model', 'target_model'\], the "
                                                        r"algorithm has \['model'\]: extra in the file "
                                                        r"\['target_model'\], missing from it \[\]"):
        pg.restore(tmp_path / "dqn.h5")
    _assert_same_weights(before, pg.get_weights(), rtol=0, atol=0)
    make_agent(2).save(tmp_path / "pg.h5")
    with pytest.raises(parl_lite.CheckpointError, match=r"extra in the file \[\], missing from it \['target_model'\]"):
        _dqn_agent(3).restore(tmp_path / "pg.h5")


def test_a_partial_restore_loads_the_models_both_have(tmp_path):
    dqn = _dqn_agent()
    dqn.learn(*fixed_batch()[:2], np.ones(16, "float32"), fixed_batch()[0], np.zeros(16, bool))
    dqn.save(tmp_path / "dqn.h5", with_optimizer=True)
    pg = make_agent(1)
    pg.restore(tmp_path / "dqn.h5", strict=False)  # model and its optimizer; target_model ignored
    _assert_same_weights(dqn.get_weights(), pg.get_weights(), rtol=0, atol=0)
    pg.save(tmp_path / "pg_again.h5", with_optimizer=True)
    with h5py.File(tmp_path / "dqn.h5", "r") as saved, h5py.File(tmp_path / "pg_again.h5", "r") as again:
        moments = list(again["optimizers/optimizer/model/fc1.weight"])
        assert "moment1_0" in moments
        for name in moments:
            np.testing.assert_array_equal(again[f"optimizers/optimizer/model/fc1.weight/{name}"][()],
                                          saved[f"optimizers/optimizer/model/fc1.weight/{name}"][()])

    make_agent(2).save(tmp_path / "pg.h5")
    other = _dqn_agent(3)
    target_before = other.alg.target_model.get_weights()
    other.restore(tmp_path / "pg.h5", strict=False)
    _assert_same_weights(make_agent(2).get_weights(), other.get_weights(), rtol=0, atol=0)
    _assert_same_weights(target_before, other.alg.target_model.get_weights(), rtol=0, atol=0)  # left as it was
