"""What a role's hello must hold: each field's check, and the problem with a hello that fails one.

A hello is the first message of an authenticated connection (a JSON object, see
:func:`parl_lite.ext.cluster.wire.read_hello`); the server checks it against the fields of the role
it names before the role's handler sees it, and answers a failed check with an error naming the
field.
"""
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Field", "problem", "ID", "TEXT", "WHOLE", "COUNT", "ADDRESS", "MEGABYTES", "TEXTS", "optional"]

_ID = re.compile(r"[0-9a-f]{8,32}")  # client, node, actor and reservation ids (some name files)


@dataclass(frozen=True)
class Field:
    """A hello field: ``check(value)`` is true for a good value, ``what`` says what one is."""

    check: Callable[[Any], bool]
    what: str
    required: bool = True


def optional(field: Field) -> Field:
    """``field``, which may be left out or null."""
    return Field(lambda value: value is None or field.check(value), f"{field.what} or null", required=False)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _address(value: Any) -> bool:
    host, _, port = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


ID = Field(lambda value: isinstance(value, str) and _ID.fullmatch(value) is not None, "8 to 32 hex digits")
TEXT = Field(lambda value: isinstance(value, str), "a string")
WHOLE = Field(_whole, "an integer")
COUNT = Field(lambda value: _whole(value) and value >= 1, "a positive integer")
ADDRESS = Field(_address, "host:port")
MEGABYTES = Field(lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)
                  and math.isfinite(value) and value > 0, "a positive number of MB")
TEXTS = Field(lambda value: isinstance(value, list) and all(isinstance(item, str) for item in value),
              "a list of strings")


def problem(hello: dict[str, Any], fields: dict[str, Field]) -> str | None:
    """What is wrong with ``hello`` for a role with ``fields`` (every bad field named), or None."""
    wrong = []
    for name, field in fields.items():
        if name not in hello:
            if field.required:
                wrong.append(f"{name!r} is missing ({field.what})")
        elif not field.check(hello[name]):
            wrong.append(f"{name!r} must be {field.what}, got {_shown(hello[name])}")
    return "; ".join(wrong) or None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
