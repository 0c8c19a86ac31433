"""ReplayMemory: PARL's interface, ring buffer, seeded sampling, checks, HDF5 round trips and bad files."""
import h5py
import numpy as np
import pytest

from parl_lite.io.checkpoint import save_agent_with_memory
from parl_lite.utils.replay_memory import ReplayMemory, ReplayMemoryError


def _fill(memory: ReplayMemory, count: int, start: int = 0) -> None:
    """Transition i has obs == i everywhere, action == -i, reward == i, terminal == i is odd."""
    for i in range(start, start + count):
        memory.append(np.full(memory.obs_shape, i), np.full(memory.act_shape, -i, memory.action.dtype),
                      float(i), np.full(memory.obs_shape, i + 1), i % 2 == 1)


def test_sampling_an_empty_memory_is_a_clear_error():
    with pytest.raises(ValueError, match="empty"):
        ReplayMemory(10, 3, 1).sample_batch(4)


def test_sample_before_full_draws_only_stored_transitions():
    memory = ReplayMemory(100, 3, 1, seed=0)
    _fill(memory, 5)
    assert memory.size() == len(memory) == 5
    obs, action, reward, next_obs, terminal = memory.sample_batch(1000)
    assert set(reward.tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}  # all of them, nothing unfilled
    np.testing.assert_array_equal(obs[:, 0], reward)
    np.testing.assert_array_equal(action[:, 0], -reward)
    np.testing.assert_array_equal(next_obs[:, 0], reward + 1)
    np.testing.assert_array_equal(terminal, reward % 2 == 1)


def test_wrap_around_overwrites_the_oldest():
    memory = ReplayMemory(4, 2, 1, seed=0)
    _fill(memory, 6)  # 0..5: 0 and 1 overwritten by 4 and 5
    assert len(memory) == 4
    np.testing.assert_array_equal(memory.reward, [4, 5, 2, 3])
    assert set(memory.sample_batch(200)[2].tolist()) == {2.0, 3.0, 4.0, 5.0}


def test_shapes_and_dtypes_of_a_batch():
    memory = ReplayMemory(10, (2, 3), 2, seed=0)
    _fill(memory, 3)
    obs, action, reward, next_obs, terminal = memory.sample_batch(7)
    assert obs.shape == next_obs.shape == (7, 2, 3) and obs.dtype == np.float32
    assert action.shape == (7, 2) and action.dtype == np.float32
    assert reward.shape == (7,) and reward.dtype == np.float32
    assert terminal.shape == (7,) and terminal.dtype == np.bool_


def test_parls_interface_names_order_and_dtypes():
    """PARL's ReplayMemory(max_size, obs_dim, act_dim), append(obs, act, reward, next_obs, terminal),
    sample_batch -> (obs, action, reward, next_obs, terminal), int32 discrete actions."""
    memory = ReplayMemory(max_size=10, obs_dim=4, act_dim=0)
    memory.append(obs=np.ones(4), act=1, reward=2.0, next_obs=np.full(4, 3.0), terminal=True)
    obs, action, reward, next_obs, terminal = memory.sample_batch(2)
    assert action.dtype == np.int32 and action.shape == (2,)  # PARL's discrete actions
    np.testing.assert_array_equal(obs, np.ones((2, 4)))
    np.testing.assert_array_equal(action, [1, 1])
    np.testing.assert_array_equal(reward, [2.0, 2.0])
    np.testing.assert_array_equal(next_obs, np.full((2, 4), 3.0))
    np.testing.assert_array_equal(terminal, [True, True])
    assert memory.size() == len(memory) == 1
    index = memory.make_index(3)
    assert index.shape == (3,) and set(index.tolist()) == {0}
    for part, expected in zip(memory.sample_batch_by_index(index), (obs[0], action[0], reward[0], next_obs[0])):
        np.testing.assert_array_equal(part[0], expected)
    with pytest.raises(ValueError, match="act has dtype float64"):
        memory.append(np.zeros(4), 1.5, 1.0, np.zeros(4), False)
    with pytest.raises(TypeError):
        ReplayMemory(10, 4, 0, np.float64)  # the extras are keyword-only: nothing positional beyond PARL's three


def test_np_random_seed_makes_an_unseeded_memory_repeat():
    """PARL's memory samples with numpy's global generator, which PARL's scripts seed."""
    batches = []
    for _ in range(2):
        np.random.seed(7)
        memory = ReplayMemory(50, 3, 1)
        _fill(memory, 30)
        batches.append(memory.sample_batch(16)[2])
    np.testing.assert_array_equal(*batches)


def test_load_from_d4rl_replaces_the_contents():
    memory = ReplayMemory(10, 2, 1, seed=0)
    _fill(memory, 4)
    dataset = {"observations": np.zeros((6, 2), np.float32), "actions": np.ones((6, 1), np.float32),
               "rewards": np.arange(6, dtype=np.float32), "next_observations": np.ones((6, 2), np.float32),
               "terminals": np.arange(6) == 5}
    memory.load_from_d4rl(dataset)
    assert len(memory) == 6
    np.testing.assert_array_equal(memory.reward[:6], np.arange(6))
    np.testing.assert_array_equal(memory.terminal[:6], np.arange(6) == 5)
    with pytest.raises(ValueError, match="terminals"):
        memory.load_from_d4rl({key: value for key, value in dataset.items() if key != "terminals"})
    with pytest.raises(ValueError, match="do not fit in max_size=3"):
        ReplayMemory(3, 2, 1).load_from_d4rl(dataset)


@pytest.mark.parametrize("field, kwargs, message", [
    ("obs", dict(obs=np.zeros(4)), r"obs has shape \(4,\), expected \(3,\)"),
    ("next_obs", dict(next_obs=np.zeros((1, 3))), r"next_obs has shape \(1, 3\), expected \(3,\)"),
    ("act", dict(act=np.zeros(2)), r"act has shape \(2,\), expected \(1,\)"),
])
def test_append_refuses_wrong_shapes(field, kwargs, message):
    memory = ReplayMemory(10, 3, 1)
    transition = dict(obs=np.zeros(3), act=np.zeros(1), reward=0.0, next_obs=np.zeros(3), terminal=False)
    transition.update(kwargs)
    with pytest.raises(ValueError, match=message):
        memory.append(**transition)
    assert len(memory) == 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(terminal="yes"), "terminal must be a bool \\(or 0/1\\), got str 'yes'"),  # before: stored as True
    (dict(terminal=5.0), "terminal must be a bool \\(or 0/1\\), got float 5.0"),
    (dict(terminal=np.array([True, False])), "terminal must be a bool"),
    (dict(reward="1.5"), "reward must be a number, got str '1.5'"),  # before: stored as 1.5
    (dict(reward=None), "reward must be a number, got NoneType None"),
    (dict(reward=np.ones(2)), "reward must be a number"),
])
def test_append_refuses_a_reward_or_terminal_flag_of_another_type(kwargs, message):
    memory = ReplayMemory(10, 3, 1)
    transition = dict(obs=np.zeros(3), act=np.zeros(1), reward=0.0, next_obs=np.zeros(3), terminal=False)
    with pytest.raises(ValueError, match=message):
        memory.append(**dict(transition, **kwargs))
    assert len(memory) == 0 and memory._next_index == 0
    memory.append(**dict(transition, reward=np.float32(2.0), terminal=1))  # numpy scalars and 0/1 are fine
    memory.append(**dict(transition, reward=np.array([3.0]), terminal=np.bool_(False)))
    np.testing.assert_array_equal(memory.reward[:2], [2.0, 3.0])
    np.testing.assert_array_equal(memory.terminal[:2], [True, False])


@pytest.mark.parametrize("kwargs, name", [
    (dict(max_size=0, obs_dim=3, act_dim=1), "max_size"),
    (dict(max_size=10, obs_dim=-1, act_dim=1), "obs_dim"),
    (dict(max_size=10, obs_dim=3, act_dim=(2, 0)), "act_dim"),
    (dict(max_size=10, obs_dim=4.0, act_dim=1), "obs_dim"),  # before: 'float' object is not iterable
    (dict(max_size=10, obs_dim=3, act_dim=1.5), "act_dim"),
    (dict(max_size=10, obs_dim=True, act_dim=1), "obs_dim"),
    (dict(max_size=10, obs_dim="3", act_dim=1), "obs_dim"),
])
def test_bad_constructor_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ReplayMemory(**kwargs)


def test_bad_batch_size_is_named():
    memory = ReplayMemory(10, 3, 1)
    _fill(memory, 2)
    with pytest.raises(ValueError, match="batch_size"):
        memory.sample_batch(0)


def test_extend_equals_appending_one_by_one_across_the_wrap():
    one_by_one, batched = ReplayMemory(5, 2, 1, seed=3), ReplayMemory(5, 2, 1, seed=3)
    _fill(one_by_one, 8)
    i = np.arange(8)
    batched.extend(np.repeat(i[:3, None], 2, 1), -i[:3, None].astype(np.float32), i[:3].astype(np.float32),
                   np.repeat(i[:3, None] + 1, 2, 1), i[:3] % 2 == 1)
    batched.extend(np.repeat(i[3:, None], 2, 1), -i[3:, None].astype(np.float32), i[3:].astype(np.float32),
                   np.repeat(i[3:, None] + 1, 2, 1), i[3:] % 2 == 1)
    assert len(batched) == len(one_by_one) == 5
    for first, second in zip(batched.sample_batch(50), one_by_one.sample_batch(50)):
        np.testing.assert_array_equal(first, second)
    with pytest.raises(ValueError, match="reward has shape"):
        batched.extend(np.zeros((2, 2)), np.zeros((2, 1)), np.zeros(3), np.zeros((2, 2)), np.zeros(2, bool))


def test_same_seed_same_batches():
    first, second = ReplayMemory(50, 3, 1, seed=11), ReplayMemory(50, 3, 1, seed=11)
    _fill(first, 30)
    _fill(second, 30)
    np.testing.assert_array_equal(first.sample_batch(16)[2], second.sample_batch(16)[2])


def test_save_load_round_trip_continues_identically(tmp_path):
    memory = ReplayMemory(8, 3, 1, seed=5)
    _fill(memory, 11)  # wrapped
    memory.sample_batch(4)  # advance the RNG
    memory.save(tmp_path / "memory.h5")
    assert [p.name for p in tmp_path.iterdir()] == ["memory.h5"]  # no temporary left behind

    restored = ReplayMemory(8, 3, 1, seed=999)
    restored.load(tmp_path / "memory.h5")
    assert len(restored) == 8
    for name in ("obs", "action", "reward", "next_obs", "terminal"):
        np.testing.assert_array_equal(getattr(restored, name), getattr(memory, name), err_msg=name)
    _fill(memory, 3, start=11)
    _fill(restored, 3, start=11)
    for first, second in zip(memory.sample_batch(20), restored.sample_batch(20)):
        np.testing.assert_array_equal(first, second)


def test_partial_memory_round_trip(tmp_path):
    memory = ReplayMemory(100, 2, 0, seed=1)
    _fill(memory, 3)
    memory.save(tmp_path / "m.h5")
    restored = ReplayMemory(100, 2, 0)
    restored.load(tmp_path / "m.h5")
    assert len(restored) == 3
    np.testing.assert_array_equal(restored.action[:3], [0, -1, -2])


def test_load_missing_file_names_it(tmp_path):
    with pytest.raises(ReplayMemoryError, match="nope.h5 does not exist"):
        ReplayMemory(8, 3, 1).load(tmp_path / "nope.h5")


def test_load_corrupted_file_names_it(tmp_path):
    memory = ReplayMemory(8, 3, 1)
    _fill(memory, 8)
    path = tmp_path / "memory.h5"
    memory.save(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # truncated
    before = ReplayMemory(8, 3, 1)
    with pytest.raises(ReplayMemoryError, match="memory.h5 is truncated or corrupted"):
        before.load(path)
    assert len(before) == 0
    path.write_bytes(b"not hdf5 at all")
    with pytest.raises(ReplayMemoryError, match="memory.h5 is truncated or corrupted"):
        before.load(path)


def test_load_mismatched_memory_is_refused_without_change(tmp_path):
    memory = ReplayMemory(8, 3, 1)
    _fill(memory, 4)
    memory.save(tmp_path / "m.h5")
    with pytest.raises(ReplayMemoryError, match="max_size 8 differs"):
        ReplayMemory(16, 3, 1).load(tmp_path / "m.h5")
    other = ReplayMemory(8, 4, 1)
    with pytest.raises(ReplayMemoryError, match=r"dataset 'obs' is \(4, 3\) float32, expected \(4, 4\) float32"):
        other.load(tmp_path / "m.h5")
    assert len(other) == 0
    with pytest.raises(ReplayMemoryError, match="dataset 'action'"):
        ReplayMemory(8, 3, 1, act_dtype=np.float64).load(tmp_path / "m.h5")


def test_file_without_a_memory_is_refused(tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as file:
        file.create_dataset("x", data=np.zeros(3))
    with pytest.raises(ReplayMemoryError, match="other.h5 holds no parl_lite replay memory"):
        ReplayMemory(8, 3, 1).load(tmp_path / "other.h5")


def test_memory_inside_the_agent_checkpoint(tmp_path):
    from core_models import fixed_batch, make_agent

    agent = make_agent(0)
    agent.learn(*fixed_batch())
    memory = ReplayMemory(8, 4, 0, seed=2)
    _fill(memory, 5)
    path = tmp_path / "agent.h5"
    save_agent_with_memory(agent, path, memory)
    with h5py.File(path, "r") as file:
        assert file["replay_memory"].attrs["format_version"] == 2 and "terminal" in file["replay_memory"]
    with h5py.File(path, "r") as file:
        assert {"models", "optimizers", "replay_memory"} <= set(file)

    fresh, restored = make_agent(1), ReplayMemory(8, 4, 0)
    fresh.restore(path)
    restored.load(path)
    for name, value in agent.get_weights().items():
        np.testing.assert_array_equal(fresh.get_weights()[name], value)
    np.testing.assert_array_equal(restored.sample_batch(10)[2], memory.sample_batch(10)[2])


def test_format_1_files_load(tmp_path):
    """Format 1 named the terminal flags "terminated"."""
    memory = ReplayMemory(8, 3, 1, seed=1)
    _fill(memory, 5)
    path = tmp_path / "old.h5"
    memory.save(path)
    with h5py.File(path, "r+") as file:
        group = file["replay_memory"]
        group.attrs["format_version"] = 1
        group.move("terminal", "terminated")
    restored = ReplayMemory(8, 3, 1)
    restored.load(path)
    np.testing.assert_array_equal(restored.terminal, memory.terminal)


@pytest.mark.parametrize("rng_state, message", [
    # a PCG64 state whose numbers are text: before, the contents were loaded, then TypeError
    ('{"bit_generator": "PCG64", "state": {"state": "x", "inc": "y"}, "has_uint32": 0, "uinteger": 0}',
     "attribute rng_state is not a valid PCG64 state"),
    ('{"bit_generator": "PCG64"}', "attribute rng_state is not a valid PCG64 state"),
    ("[1, 2]", "attribute rng_state is a JSON list, not the object of a numpy PCG64 state"),  # before: AttributeError
    ("[" * 100_000 + "]" * 100_000, "attribute rng_state is not valid JSON: RecursionError"),  # before: RecursionError
    ("{not json", "attribute rng_state is not valid JSON"),
    ('{"bit_generator": "MT19937"}', "RNG 'MT19937' differs from 'PCG64'"),
])
def test_load_checks_the_rng_state_before_changing_anything(tmp_path, rng_state, message):
    source = ReplayMemory(8, 3, 1, seed=1)
    _fill(source, 5)
    path = tmp_path / "memory.h5"
    source.save(path)
    with h5py.File(path, "r+") as file:
        file["replay_memory"].attrs["rng_state"] = rng_state
    memory = ReplayMemory(8, 3, 1, seed=2)
    _fill(memory, 2, start=10)
    contents = {name: getattr(memory, name).copy() for name in ("obs", "action", "reward", "next_obs", "terminal")}
    rng = memory.rng.bit_generator.state
    with pytest.raises(ReplayMemoryError, match=message):
        memory.load(path)
    assert len(memory) == 2 and memory.rng.bit_generator.state == rng
    for name, values in contents.items():
        np.testing.assert_array_equal(getattr(memory, name), values, err_msg=name)


def test_load_refuses_a_replay_memory_that_is_not_a_group(tmp_path):
    with h5py.File(tmp_path / "m.h5", "w") as file:
        file.create_dataset("replay_memory", data=np.zeros(3))
        file["replay_memory"].attrs["format"] = "parl_lite.replay_memory"
    with pytest.raises(ReplayMemoryError, match="m.h5 holds no parl_lite replay memory"):
        ReplayMemory(8, 3, 1).load(tmp_path / "m.h5")
