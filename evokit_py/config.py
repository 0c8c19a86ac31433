"""The ES configuration: EvoKit's fields in YAML, read into dataclasses and validated.

Every error names the offending key path (``solver.optimizer.adam.beta1``): unknown keys, wrong
types and out-of-range values are refused. Validation uses the dataclasses themselves (types from
the annotations, ranges from field metadata: :mod:`evokit_py.schema`), so the schema is written once.

The sections other than ``solver`` are in :mod:`evokit_py.sections`. The ``solver`` block is
composed here from the keys every solver has (:class:`~evokit_py.solvers.settings.SolverKeys`) and
the settings each solver declares in its own module, for the solvers the registry knows
(:mod:`evokit_py.solvers.registry`): the built-in ones always, and the plugin that ``solver.type``
names, whose settings are then a block of their own (``solver.<its config_key>``). The solver's
checks of several keys and its rule for asynchronous training are its own too.

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
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from evokit_py.schema import NON_NEGATIVE, ConfigError, build, load_yaml, read_yaml_file
from evokit_py.sections import EnvConfig, ObservationStatsConfig, PolicyConfig, TrainConfig, WorkerConfig
from evokit_py.solvers.base import Solver
from evokit_py.solvers.registry import BUILT_IN, solver_class
from evokit_py.solvers.settings import SolverKeys, SolverSettings

__all__ = ["ConfigError", "ESConfig", "SolverConfig", "load_config", "parse_config", "default_config",
           "config_from_yaml_text", "resolve_config"]


def _settings(solvers: Iterable[type[Solver]]) -> tuple[type[SolverSettings], ...]:
    """The settings dataclasses of ``solvers`` and of their base classes, each once."""
    found: dict[type[SolverSettings], None] = {}
    for solver in solvers:
        for cls in reversed(solver.__mro__):
            settings = vars(cls).get("settings")
            if settings is not None:
                found.setdefault(settings)
    return tuple(found)


def _check_solver_block(block: SolverKeys) -> None:
    """The checks of several keys by the solver ``solver.type`` names (``__post_init__`` of the block)."""
    solver_class(block.type).check_config(block)


@functools.cache
def _solver_block(settings: tuple[type[SolverSettings], ...]) -> type[SolverKeys]:
    """The dataclass of a ``solver`` block with ``settings``: a field per settings block, the settings
    whose ``config_key`` is ``""`` as bases (their keys in the block itself).

    Raises:
        ConfigError: two settings declare the same key.
    """
    owners: dict[str, Any] = {each.name: SolverKeys for each in dataclasses.fields(SolverKeys)}
    flat, blocks = [], []
    for kind in settings:
        keys = [kind.config_key] if kind.config_key else [each.name for each in dataclasses.fields(kind)]
        for key in keys:
            if key in owners:
                raise ConfigError(f"solver.{key}: declared by both {owners[key].__qualname__} and {kind.__qualname__}")
            owners[key] = kind
        if kind.config_key:
            blocks.append((kind.config_key, kind, field(default_factory=kind)))
        else:
            flat.append(kind)
    block = dataclasses.make_dataclass("SolverConfig", blocks, bases=(*reversed(flat), SolverKeys),
                                       namespace={"__post_init__": _check_solver_block})
    block.__module__ = __name__
    block.__doc__ = f"The ``solver`` block, keys {', '.join(owners)}."
    return cast(type[SolverKeys], block)


SolverConfig = _solver_block(_settings(BUILT_IN.values()))
"""The ``solver`` block with the settings of every built-in solver (and of plugins that add none)."""


def _solver_block_of(data: Any) -> type[SolverKeys]:
    """The dataclass to read the ``solver`` block ``data`` into: a plugin's ``solver.type`` adds its settings.

    Raises:
        ConfigError: no solver has that type; PluginError: its plugin does not load.
    """
    solver_type = data.get("type", SolverKeys.type) if isinstance(data, dict) else None
    if not isinstance(solver_type, str) or solver_type in BUILT_IN:
        return SolverConfig  # anything else than a type name is refused when the block is read
    return _solver_block(_settings([*BUILT_IN.values(), solver_class(solver_type)]))


@dataclass
class ESConfig:
    """The whole configuration (see the module docstring)."""
    seed: int = field(default=0, metadata=NON_NEGATIVE)  # environment seeds and initial weights
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    solver: SolverKeys = field(default_factory=SolverConfig, metadata={"dataclass": _solver_block_of})
    observation_normalization: bool = True
    observation_stats: ObservationStatsConfig = field(default_factory=ObservationStatsConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        solver = self.solver.type
        if self.train.mode == "async" and not solver_class(solver).accepts_stale:
            raise ConfigError(f"train.mode: async needs solver.type BASIC_ES ({solver} does not correct samples "
                              f"drawn around older parameters), got {solver}")

    def worker_config(self) -> WorkerConfig:
        """What a sampling worker reads of this config."""
        return WorkerConfig(self.env, self.policy, self.observation_stats)

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
        parl_lite.plugins.PluginError: the plugin ``solver.type`` names does not load.
    """
    return build(ESConfig, {} if data is None else data, "")


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
        data = read_yaml_file(path)
        data = {} if data is None else data  # an empty file: every default
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping at the top level, got {type(data).__name__}")
    for override in overrides:
        _override(data, override)
    try:
        return parse_config(data)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}" if path else str(error)) from None


def _override(data: dict, override: str) -> None:
    """Set the value of one ``KEY=VALUE`` override in the config mapping ``data``."""
    key, sep, text = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {override!r}: expected KEY=VALUE, e.g. train.workers=1")
    node = data
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{'.'.join(parts[:i + 1])}: is not a mapping, cannot set {key}")
    node[parts[-1]] = load_yaml(text, f"the value of override {override!r}")


def config_from_yaml_text(text: str) -> ESConfig:
    """Validate a config given as YAML text (e.g. the copy stored in a checkpoint)."""
    return parse_config(load_yaml(text, "the config text"))
