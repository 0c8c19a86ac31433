"""How a config is read and checked, whatever its sections: YAML text to mappings (safely, within
bounds), mappings to dataclasses (every key known, every value of its type and range), and the
:class:`ConfigError` that names the key at fault.

A section of the config is a dataclass whose annotations give the types and whose field metadata
(:func:`check`, :data:`POSITIVE`, ...) give the ranges; ``__post_init__`` checks what involves
several keys, raising :class:`ConfigError` with the key path below the section
(``ga.elite_count: ...``), which :func:`build` prefixes with the section's path. A solver's own
settings are written the same way (:mod:`evokit_py.solvers`).
"""
import dataclasses
import math
import os
import re
import stat
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, cast

import yaml

from parl_lite.common.paths import describe_file_type

__all__ = ["ConfigError", "check", "POSITIVE", "NON_NEGATIVE", "UNIT_OPEN", "build", "join", "read_yaml_file",
           "load_yaml", "MAX_YAML_BYTES", "MAX_YAML_VALUES", "MAX_YAML_DEPTH"]

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


def check(predicate: Callable[[Any], bool], requirement: str) -> dict:
    """Field metadata: a value of the field must satisfy ``predicate`` (``requirement`` says how, in
    the error: ``must be > 0``); ``None`` is not checked."""
    return {"check": (predicate, requirement)}


POSITIVE = check(lambda v: v > 0, "must be > 0")
NON_NEGATIVE = check(lambda v: v >= 0, "must be >= 0")
UNIT_OPEN = check(lambda v: 0 <= v < 1, "must be in [0, 1)")


def build(cls: type[T], data: Any, path: str) -> T:
    """The dataclass ``cls`` made from the mapping ``data`` (the config keys under ``path``): every
    key known, every value of its field's annotated type and range (field metadata :func:`check`),
    missing keys at their defaults; the ``__post_init__`` checks of ``cls`` run last. A field whose
    metadata has ``"dataclass"``, a function of the field's value, is read into the dataclass it
    returns (a subclass of its annotation: the ``solver`` block, by ``solver.type``).

    Raises:
        ConfigError: naming the key path of the first problem found.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(data).__name__} {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cast(Any, cls))}
    unknown = sorted(set(map(str, data)) - set(fields))
    if unknown:
        raise ConfigError(f"{join(path, unknown[0])}: unknown key (known keys here: {', '.join(fields)})")
    values = {}
    for name, value in data.items():
        key = join(path, name)
        choose = fields[name].metadata.get("dataclass")  # a section whose dataclass depends on its contents
        values[name] = _convert(hints[name] if choose is None else choose(value), value, key)
        rule = fields[name].metadata.get("check")
        if rule is not None and values[name] is not None and not rule[0](values[name]):
            raise ConfigError(f"{key}: {rule[1]}, got {value!r}")
    try:
        return cls(**values)
    except ConfigError as error:
        raise ConfigError(join(path, str(error))) from None


def _convert(hint: Any, value: Any, key: str) -> Any:
    """``value`` checked against the annotation ``hint`` (the config key ``key`` in messages)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return build(hint, value, key)
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


def join(path: str, name: str) -> str:
    """The key path of ``name`` under ``path`` (``solver`` + ``ga`` -> ``solver.ga``)."""
    return f"{path}.{name}" if path else str(name)


def read_yaml_file(path: Path) -> Any:
    """The YAML document of the config file ``path`` (:func:`load_yaml`); ``None`` for an empty file.

    Raises:
        ConfigError: the file is missing, not a regular file, larger than :data:`MAX_YAML_BYTES`, not
            UTF-8 or not YAML (naming the file).
    """
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
    return load_yaml(text, f"config file {path}")


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


def load_yaml(text: str, source: str) -> Any:
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
    counting the values in ``count[0]``; see :func:`load_yaml`."""
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
                raise ConfigError(f"{join(path, key)}: duplicate key in {source} (lines {lines[key] + 1} and "
                                  f"{key_node.start_mark.line + 1})")
            if key is not None:
                lines[key] = key_node.start_mark.line
            _check_nodes(key_node, path, source, count, ancestors)
            _check_nodes(value_node, join(path, str(key)), source, count, ancestors)
    else:
        for index, item in enumerate(node.value):
            _check_nodes(item, f"{path}[{index}]", source, count, ancestors)
