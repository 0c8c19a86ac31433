"""The ES configuration: EvoKit's fields in YAML, read into dataclasses and validated.

Every error names the offending key path (``solver.optimizer.adam.beta1``): unknown keys, wrong
types and out-of-range values are refused. Validation uses the dataclasses themselves (types from
the annotations, ranges from field metadata), so the schema is written once, below.

A minimal file::

    env: {id: CartPole-v1}
    solver:
      type: BASIC_ES
      population_size: 16
      optimizer: {type: ADAM, base_lr: 0.05}
      sampling: {gaussian_sampling: {std: 0.05, seed: 7}}
    train: {generations: 50, target_return: 475}
"""
import dataclasses
import math
import os
import re
import stat
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from parl_lite.common.paths import describe_file_type

__all__ = ["ConfigError", "ESConfig", "load_config", "parse_config", "default_config", "config_from_yaml_text",
           "resolve_config"]


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


def _check(predicate: Callable[[Any], bool], requirement: str) -> dict:
    return {"check": (predicate, requirement)}


_POSITIVE = _check(lambda v: v > 0, "must be > 0")
_NON_NEGATIVE = _check(lambda v: v >= 0, "must be >= 0")
_UNIT_OPEN = _check(lambda v: 0 <= v < 1, "must be in [0, 1)")
# a shift cancels a per-step bonus, of a reward's order; one of 1e300 leaves float64 returns holding only
# the episode lengths (returns differing by 1 need |shift| * steps < 2**52): no learning signal at all
_MAX_REWARD_SHIFT = 1e6
_REWARD_SHIFT = _check(lambda v: abs(v) <= _MAX_REWARD_SHIFT,
                       f"must be within [-{_MAX_REWARD_SHIFT:g}, {_MAX_REWARD_SHIFT:g}] (it is subtracted from every "
                       f"step's reward; a larger shift drowns the rewards' differences in float64 rounding)")


@dataclass
class EnvConfig:
    """The gymnasium environment a candidate is evaluated on."""
    id: str = "CartPole-v1"
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_steps: int | None = field(default=None, metadata=_POSITIVE)  # None: the env's own limit
    episodes_per_candidate: int = field(default=1, metadata=_POSITIVE)
    # every candidate of a generation starts from the same states (common random numbers)
    common_episode_seeds: bool = True
    # subtracted from every step's reward of the candidates' episodes (a survival bonus cancelled during
    # training, as ARS does); evaluations and the reported returns are the environment's own
    reward_shift: float = field(default=0.0, metadata=_REWARD_SHIFT)


@dataclass
class MLPConfig:
    """A multilayer perceptron built into an ONNX graph (``hidden: []`` is a linear policy)."""
    hidden: list[int] = field(default_factory=list)
    activation: Literal["tanh", "relu"] = "tanh"
    # "auto": none (argmax) for discrete actions, tanh (scaled to the bounds) for continuous ones
    output_activation: Literal["auto", "none", "tanh", "softmax"] = "auto"
    init_std: float = field(default=0.0, metadata=_NON_NEGATIVE)  # 0: all-zero initial weights
    bias: bool = True  # false: no bias in any layer (ARS's linear policy is x @ W)

    def __post_init__(self) -> None:
        bad = [size for size in self.hidden if size <= 0]
        if bad:
            raise ConfigError(f"hidden: layer sizes must be > 0, got {self.hidden}")


@dataclass
class PolicyConfig:
    """Either an ONNX file (its float weights become the parameters) or an MLP spec."""
    onnx: str | None = None
    mlp: MLPConfig = field(default_factory=MLPConfig)


@dataclass
class MomentumConfig:
    mu: float = field(default=0.9, metadata=_UNIT_OPEN)


@dataclass
class AdamConfig:
    beta1: float = field(default=0.9, metadata=_UNIT_OPEN)
    beta2: float = field(default=0.999, metadata=_UNIT_OPEN)
    epsilon: float = field(default=1e-8, metadata=_POSITIVE)


@dataclass
class OptimizerConfig:
    """EvoKit's optimizer block; used by BASIC_ES."""
    type: Literal["SGD", "MOMENTUM", "ADAM"] = "SGD"
    base_lr: float = field(default=0.05, metadata=_POSITIVE)
    momentum: MomentumConfig = field(default_factory=MomentumConfig)
    adam: AdamConfig = field(default_factory=AdamConfig)


@dataclass
class GaussianSamplingConfig:
    std: float = field(default=0.1, metadata=_POSITIVE)
    cached: bool = True  # True: a shared noise table; False: noise regenerated from a per-sample seed
    seed: int = field(default=7, metadata=_NON_NEGATIVE)
    cache_size: int = field(default=1_000_000, metadata=_POSITIVE)


@dataclass
class SamplingConfig:
    type: Literal["GAUSSIAN_SAMPLING"] = "GAUSSIAN_SAMPLING"
    gaussian_sampling: GaussianSamplingConfig = field(default_factory=GaussianSamplingConfig)


@dataclass
class CMAESConfig:
    """CMA-ES: the initial step size is ``solver.sampling.gaussian_sampling.std``; termination
    thresholds are pycma's defaults (0 disables one)."""
    mu: int | None = field(default=None, metadata=_POSITIVE)  # None: population_size // 2
    active: bool = True  # negative weights for the worst candidates (active CMA)
    diagonal: bool = False  # separable CMA-ES: diagonal covariance (as solver.type SEP_CMA_ES)
    restarts: int = field(default=0, metadata=_NON_NEGATIVE)  # IPOP: each restart doubles the population
    tolfun: float = field(default=1e-11, metadata=_NON_NEGATIVE)
    tolx: float = field(default=1e-11, metadata=_NON_NEGATIVE)
    tolconditioncov: float = field(default=1e14, metadata=_NON_NEGATIVE)
    tolstagnation: int | None = field(default=None, metadata=_NON_NEGATIVE)  # None: 100 + 100 n^1.5 / lambda


@dataclass
class GAConfig:
    """GA: mutation std is ``solver.sampling.gaussian_sampling.std``."""
    elite_count: int = field(default=1, metadata=_NON_NEGATIVE)
    truncation: float = field(default=0.2, metadata=_check(lambda v: 0 < v <= 1, "must be in (0, 1]"))


@dataclass
class ARSConfig:
    """ARS: N = population_size / 2 directions, step size ``solver.optimizer.base_lr`` (SGD), noise
    std ``solver.sampling.gaussian_sampling.std``."""
    top_directions: int | None = field(default=None, metadata=_POSITIVE)  # b; None: all N (V1/V2, not -t)


@dataclass
class SolverConfig:
    # a built-in solver or one an evokit_py.solvers plugin registers (checked when the solver is built)
    type: str = "BASIC_ES"
    population_size: int = field(default=16, metadata=_check(lambda v: v >= 2, "must be >= 2"))
    mirrored_sampling: bool = True  # BASIC_ES only
    fitness_shaping: Literal["centered_rank", "none"] = "centered_rank"
    weight_decay: float = field(default=0.0, metadata=_NON_NEGATIVE)
    # asynchronous updates: samples up to this many versions old are corrected (BASIC_ES), older refused
    max_staleness: int = field(default=4, metadata=_NON_NEGATIVE)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    cma_es: CMAESConfig = field(default_factory=CMAESConfig)
    ga: GAConfig = field(default_factory=GAConfig)
    ars: ARSConfig = field(default_factory=ARSConfig)

    def __post_init__(self) -> None:
        if self.type == "ARS":
            self._check_ars()
        if self.type == "BASIC_ES" and self.mirrored_sampling and self.population_size % 2:
            raise ConfigError(f"population_size: must be even with mirrored_sampling, got {self.population_size}")
        if self.type == "GA" and self.ga.elite_count >= self.population_size:
            raise ConfigError(f"ga.elite_count: must be < population_size ({self.population_size}), "
                              f"got {self.ga.elite_count}")

    def _check_ars(self) -> None:
        if self.population_size % 2:
            raise ConfigError(f"population_size: ARS evaluates each of its directions at +delta and -delta, so "
                              f"it must be even (2 N), got {self.population_size}")
        top, directions = self.ars.top_directions, self.population_size // 2
        if top is not None and top > directions:
            raise ConfigError(f"ars.top_directions: must be <= the {directions} directions (population_size / 2), "
                              f"got {top}")
        if self.optimizer.type != "SGD":
            raise ConfigError(f"optimizer.type: ARS steps by optimizer.base_lr (its alpha) with SGD, "
                              f"got {self.optimizer.type}")


@dataclass
class TrainConfig:
    # sync: whole generations, exact resume; async: every worker takes the next candidate as soon as
    # it is free, the solver updates whenever population_size results arrived (BASIC_ES only)
    mode: Literal["sync", "async"] = "sync"
    # async: a candidate handed out once the next batch is complete without it is drawn around a preview
    # of the next update (the results in so far), not around the current parameters; false: EvoKit's way
    lookahead: bool = True
    generations: int = field(default=100, metadata=_POSITIVE)
    target_return: float | None = 475.0  # stop when the evaluation mean reaches it (null: never)
    eval_every: int = field(default=1, metadata=_POSITIVE)
    eval_episodes: int = field(default=5, metadata=_POSITIVE)
    # an evaluation at the target is confirmed on this many fresh episodes before training stops (0: not)
    confirm_episodes: int = field(default=0, metadata=_NON_NEGATIVE)
    workers: int = field(default=2, metadata=_POSITIVE)
    # local pool: allow more than evokit_py.limits.WORKERS_PER_CPU workers per CPU (memory still bounds them)
    oversubscribe: bool = False
    address: str | None = None  # where the workers run (parl_lite.connect); None: the local pool
    # the most workers: more are added, up to this, while a cluster has free CPUs (a node joined); null: workers
    max_workers: int | None = field(default=None, metadata=_POSITIVE)
    # seconds the run may have no worker left while one is being made, before it stops with its checkpoint
    capacity_wait: float = field(default=60.0, metadata=_NON_NEGATIVE)
    checkpoint_every: int = field(default=10, metadata=_POSITIVE)
    checkpoint_dir: str = "runs/es_cartpole/checkpoints"
    log_dir: str = "runs/es_cartpole"

    def __post_init__(self) -> None:
        if self.max_workers is not None and self.max_workers < self.workers:
            raise ConfigError(f"max_workers: must be >= train.workers ({self.workers}), got {self.max_workers}")


@dataclass
class ObservationStatsConfig:
    """How ``observation_normalization`` scales an observation: ``(obs - mean) / max(std, std_floor)``,
    clipped to ``[-clip, clip]``. The defaults are OpenAI ES's; ARS's filter is ``std_floor: 1.0e-4``
    (only a guard against a zero std) and ``clip: null``."""
    std_floor: float = field(default=0.1, metadata=_POSITIVE)
    clip: float | None = field(default=5.0, metadata=_POSITIVE)  # null: not clipped


@dataclass
class ESConfig:
    """The whole configuration (see the module docstring)."""
    seed: int = field(default=0, metadata=_NON_NEGATIVE)  # environment seeds and initial weights
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    observation_normalization: bool = True
    observation_stats: ObservationStatsConfig = field(default_factory=ObservationStatsConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if self.train.mode == "async" and self.solver.type != "BASIC_ES":
            raise ConfigError(f"train.mode: async needs solver.type BASIC_ES ({self.solver.type} does not correct "
                              f"samples drawn around older parameters), got {self.solver.type}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def load_config(path: "str | Path") -> ESConfig:
    """Read and validate a YAML config file.

    Raises:
        ConfigError: the file is missing or not YAML, or a value is wrong (the message names the key).
    """
    return resolve_config(path)


def parse_config(data: dict | None) -> ESConfig:
    """Validate a config given as a mapping (e.g. parsed YAML); missing keys take their defaults.

    Raises:
        ConfigError: naming the key path of the first problem found.
    """
    return _build(ESConfig, {} if data is None else data, "")


def _build(cls: type, data: Any, path: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(data).__name__} {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(map(str, data)) - set(fields))
    if unknown:
        raise ConfigError(f"{_join(path, unknown[0])}: unknown key (known keys here: {', '.join(fields)})")
    values = {}
    for name, value in data.items():
        key = _join(path, name)
        values[name] = _convert(hints[name], value, key)
        check = fields[name].metadata.get("check")
        if check is not None and values[name] is not None and not check[0](values[name]):
            raise ConfigError(f"{key}: {check[1]}, got {value!r}")
    try:
        return cls(**values)
    except ConfigError as error:
        raise ConfigError(_join(path, str(error))) from None


def _convert(hint: Any, value: Any, key: str) -> Any:
    """``value`` checked against the annotation ``hint`` (the config key ``key`` in messages)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value, key)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):  # X | None (typing.Optional[X] in older spellings)
        return None if value is None else _convert(next(a for a in args if a is not type(None)), value, key)
    if origin is Literal:
        return _to_choice(args, value, key)
    if origin is list:
        return _to_list(args[0], value, key)
    if origin is dict:
        return _to_mapping(value, key)
    scalar = _SCALARS.get(hint)
    if scalar is None:
        raise TypeError(f"config schema: unsupported annotation {hint!r} at {key}")
    return scalar(value, key)


def _to_choice(choices: tuple, value: Any, key: str) -> Any:
    if value not in choices:
        raise ConfigError(f"{key}: must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def _to_list(item_hint: Any, value: Any, key: str) -> list:
    if not isinstance(value, list):
        raise ConfigError(f"{key}: expected a list, got {type(value).__name__} {value!r}")
    return [_convert(item_hint, item, f"{key}[{i}]") for i, item in enumerate(value)]


def _to_mapping(value: Any, key: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{key}: expected a mapping, got {type(value).__name__} {value!r}")
    return dict(value)


def _to_bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _to_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}: expected an integer, got {type(value).__name__} {value!r}")
    return value


def _to_float(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{key}: expected a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{key}: must be a finite number, got {value!r}")
    return float(value)


def _to_str(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {type(value).__name__} {value!r}")
    return value


def _as_is(value: Any, key: str) -> Any:
    return value


# converters of the scalar annotations, by annotation
_SCALARS: dict[Any, Callable[[Any, str], Any]] = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str,
                                                   Any: _as_is}


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else str(name)


def default_config() -> ESConfig:
    """The built-in job of ``parl-lite es-train`` without ``--config``: every key at its default (a
    linear policy on CartPole-v1, Gaussian ES with SGD, target return 475)."""
    return ESConfig()


def resolve_config(path: "str | Path | None", overrides: "tuple | list" = ()) -> ESConfig:
    """The config at ``path`` (or the built-in default) with ``KEY=VALUE`` overrides applied;
    values are parsed as YAML (``train.workers=1``, ``policy.mlp.hidden=[16]``).

    Raises:
        ConfigError: a bad file, override or value (naming the key).
    """
    if path is None:
        data = ESConfig().to_dict()
    else:
        path = Path(path)
        try:
            info = os.stat(path)  # stat, not open: a FIFO would block the open
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except OSError as error:
            raise ConfigError(f"config file {path}: {error.strerror or error}") from error
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"config file {path} is {describe_file_type(info.st_mode)}, not a file")
        if info.st_size > MAX_YAML_BYTES:
            raise ConfigError(f"config file {path} is larger than {MAX_YAML_BYTES // 2**20} MiB; a config is a few KB")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ConfigError(f"config file {path} is not UTF-8 text: {error}") from error
        data = _load_yaml(text, f"config file {path}")
        data = {} if data is None else data  # an empty file: every default
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping at the top level, got {type(data).__name__}")
    for override in overrides:
        key, sep, text = override.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {override!r}: expected KEY=VALUE, e.g. train.workers=1")
        node = data
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{'.'.join(parts[:i + 1])}: is not a mapping, cannot set {key}")
        node[parts[-1]] = _load_yaml(text, f"the value of override {override!r}")
    try:
        return parse_config(data)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}" if path else str(error)) from None


def config_from_yaml_text(text: str) -> ESConfig:
    """Validate a config given as YAML text (e.g. the copy stored in a checkpoint)."""
    return parse_config(_load_yaml(text, "the config text"))


MAX_YAML_BYTES = 2**20  # a config is a few KB
MAX_YAML_VALUES = 10_000  # values of a config once its aliases are expanded (a config has about a hundred)
MAX_YAML_DEPTH = 64  # nesting of collections (a config has five levels, env.kwargs a few more)


class _TooDeep(Exception):
    """The document nests collections deeper than ``MAX_YAML_DEPTH``."""


class _ConfigLoader(yaml.SafeLoader):
    """YAML 1.1's safe loader, but numbers in exponent form without a dot (``1e-3``, ``1e300``) are
    numbers, as in YAML 1.2 (YAML 1.1 reads them as strings), and composing stops at
    ``MAX_YAML_DEPTH`` levels (the composer recurses once per level)."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self._depth >= MAX_YAML_DEPTH:
            raise _TooDeep
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def _load_yaml(text: str, source: str) -> Any:
    """Parse YAML ``text``, refusing a key given twice in one mapping (YAML itself keeps the last),
    and a document that nests deeper than ``MAX_YAML_DEPTH`` or holds more than ``MAX_YAML_VALUES``
    values once its aliases are expanded (an alias bomb: a few lines that expand to billions),
    before anything walks the expanded values; and a text longer than ``MAX_YAML_BYTES``.

    Raises:
        ConfigError: not valid YAML, too large, or a duplicate key (named by its key path); ``source``
            says where the text came from.
    """
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"{source} is longer than {MAX_YAML_BYTES // 2**20} MiB; a config is a few KB")
    loader = _ConfigLoader(text)
    try:
        root = loader.get_single_node()
        _check_nodes(root, "", source, [0], ())
        return None if root is None else loader.construct_document(root)
    except yaml.YAMLError as error:
        raise ConfigError(f"{source} is not valid YAML: {error}") from error
    except _TooDeep:
        raise ConfigError(f"{source}: nested more than {MAX_YAML_DEPTH} levels deep") from None
    finally:
        loader.dispose()


def _check_nodes(node: yaml.Node | None, path: str, source: str, count: list[int],
                 ancestors: tuple[yaml.Node, ...]) -> None:
    """Walk the composed document as the loaded values will be walked (an alias once per use),
    counting the values in ``count[0]``; see :func:`_load_yaml`."""
    count[0] += 1
    if count[0] > MAX_YAML_VALUES:
        raise ConfigError(f"{source}: more than {MAX_YAML_VALUES} values once its aliases (*name) are expanded; "
                          f"refused (an alias bomb?)")
    if not isinstance(node, yaml.CollectionNode):
        return
    if any(node is ancestor for ancestor in ancestors):
        raise ConfigError(f"{path or 'config'}: an alias in {source} refers to a collection that contains it")
    if len(ancestors) >= MAX_YAML_DEPTH:
        raise ConfigError(f"{path or 'config'}: {source} is nested more than {MAX_YAML_DEPTH} levels deep")
    ancestors = (*ancestors, node)
    if isinstance(node, yaml.MappingNode):
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in lines:
                raise ConfigError(f"{_join(path, key)}: duplicate key in {source} (lines {lines[key] + 1} and "
                                  f"{key_node.start_mark.line + 1})")
            if key is not None:
                lines[key] = key_node.start_mark.line
            _check_nodes(key_node, path, source, count, ancestors)
            _check_nodes(value_node, _join(path, str(key)), source, count, ancestors)
    else:
        for index, item in enumerate(node.value):
            _check_nodes(item, f"{path}[{index}]", source, count, ancestors)
