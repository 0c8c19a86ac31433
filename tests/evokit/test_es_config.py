"""evokit_py config: defaults, and errors that name the key path."""
import pytest

from evokit_py.config import ConfigError, default_config, load_config, parse_config, resolve_config


def test_defaults_and_round_trip_through_yaml(tmp_path):
    config = default_config()
    assert config.env.id == "CartPole-v1" and config.solver.type == "BASIC_ES"
    path = tmp_path / "es.yaml"
    path.write_text(config.to_yaml())
    assert load_config(path) == config


@pytest.mark.parametrize("data, key", [
    ({"solver": {"optimizer": {"adam": {"beta1": 1.5}}}}, "solver.optimizer.adam.beta1"),
    ({"solver": {"optimizer": {"adam": {"beta1": "high"}}}}, "solver.optimizer.adam.beta1"),
    ({"solver": {"optimizer": {"adam": {"gamma": 0.5}}}}, "solver.optimizer.adam.gamma"),
    ({"solver": {"sampling": {"gaussian_sampling": {"std": -1}}}}, "solver.sampling.gaussian_sampling.std"),
    ({"solver": {"sampling": {"gaussian_sampling": {"cached": "yes"}}}}, "solver.sampling.gaussian_sampling.cached"),
    ({"solver": {"population_size": 7}}, "solver.population_size"),
    ({"solver": {"type": "GA", "population_size": 4, "ga": {"elite_count": 4}}}, "solver.ga.elite_count"),
    ({"train": {"workers": 0}}, "train.workers"),
    ({"train": {"generations": True}}, "train.generations"),
    ({"train": {"workers": 3, "max_workers": 2}}, "train.max_workers"),
    ({"train": {"max_workers": 0}}, "train.max_workers"),
    ({"train": {"capacity_wait": -1}}, "train.capacity_wait"),
    ({"train": {"capacity_wait": float("inf")}}, "train.capacity_wait"),
    ({"train": {"capacity_wait": float("nan")}}, "train.capacity_wait"),
    ({"policy": {"mlp": {"hidden": [16, "x"]}}}, "policy.mlp.hidden[1]"),
    ({"policy": {"mlp": {"hidden": [0]}}}, "policy.mlp.hidden"),
    ({"env": {"kwargs": [1]}}, "env.kwargs"),
    ({"evn": {}}, "evn"),
    ({"env": 3}, "env"),
    ({"observation_stats": {"std_floor": 0}}, "observation_stats.std_floor"),
    ({"observation_stats": {"clip": -1}}, "observation_stats.clip"),
    ({"observation_stats": {"clip": "none"}}, "observation_stats.clip"),
    ({"env": {"reward_shift": 1e300}}, "env.reward_shift"),  # all returns -1e300 * steps: no signal left
    ({"env": {"reward_shift": -2e6}}, "env.reward_shift"),
])
def test_bad_values_name_the_key(data, key):
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    assert str(error.value).startswith(key + ":"), str(error.value)


def test_a_reward_shift_within_a_million_is_taken():
    assert parse_config({"env": {"reward_shift": -1e6}}).env.reward_shift == -1e6
    assert parse_config({"env": {"reward_shift": 1.0}}).env.reward_shift == 1.0


def test_file_errors_name_the_file_and_key(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("solver:\n  optimizer: {adam: {beta1: 2}}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: solver.optimizer.adam.beta1: must be in \[0, 1\)"):
        load_config(bad)
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        load_config(bad)
    bad.write_text("")
    assert load_config(bad).solver.type == "BASIC_ES"  # an empty file: every default
    bad.write_text("solver: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_overrides_are_parsed_as_yaml_and_validated():
    config = resolve_config(None, ["train.workers=1", "policy.mlp.hidden=[16, 16]", "solver.optimizer.type=SGD"])
    assert config.train.workers == 1 and config.policy.mlp.hidden == [16, 16] and config.solver.optimizer.type == "SGD"
    with pytest.raises(ConfigError, match="^train.workers: must be > 0"):
        resolve_config(None, ["train.workers=-2"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        resolve_config(None, ["train.workers"])


def test_optional_keys_written_as_x_or_none_take_a_value_or_null(tmp_path):
    # the schema spells optional keys ``int | None`` (types.UnionType), not typing.Optional
    path = tmp_path / "optional.yaml"
    path.write_text("env: {max_steps: 50}\ntrain: {target_return: null, address: null}\n"
                    "solver: {cma_es: {mu: 3, tolstagnation: 7}}\n")
    config = load_config(path)
    assert config.env.max_steps == 50 and config.train.target_return is None and config.train.address is None
    assert config.solver.cma_es.mu == 3 and config.solver.cma_es.tolstagnation == 7
    assert resolve_config(None, ["train.target_return=100"]).train.target_return == 100.0
    with pytest.raises(ConfigError, match=r"env\.max_steps: expected an integer"):
        resolve_config(None, ["env.max_steps=many"])
