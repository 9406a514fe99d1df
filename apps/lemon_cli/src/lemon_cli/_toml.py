"""A small TOML writer for the config shapes ``lemon setup`` writes (tables, strings, numbers,
booleans, lists of those)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps"]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def dumps(data: Mapping[str, Any]) -> str:
    """``data`` as TOML text (nested mappings become ``[a.b]`` tables)."""
    lines: list[str] = []

    def table(prefix: list[str], body: Mapping[str, Any]) -> None:
        scalars = [(k, v) for k, v in body.items() if not isinstance(v, Mapping)]
        tables = [(k, v) for k, v in body.items() if isinstance(v, Mapping)]
        if prefix and (scalars or not tables):
            if lines:
                lines.append("")
            lines.append("[" + ".".join(_key(p) for p in prefix) + "]")
        for k, v in scalars:
            lines.append(f"{_key(k)} = {_value(v)}")
        for k, v in tables:
            table([*prefix, k], v)

    table([], data)
    return "\n".join(lines) + "\n"
