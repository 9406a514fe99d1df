"""A server's ``inputSchema`` made safe for the model's wire and the agent's validator.

Local ``$ref``s (``#/$defs/X``, ``#/definitions/X``) are inlined up to ``MAX_DEPTH`` levels (a
deeper or a recursive one becomes the empty schema: anything goes there); ``$schema``,
``$id``, ``$defs``, ``definitions`` and keywords the providers reject are dropped. The result
is always an object schema that ``jsonschema`` accepts: a schema that is still invalid is
replaced by the empty object schema (the server checks the arguments itself), so one server's
bad schema can never fail a run or cause a provider's 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators

__all__ = ["MAX_DEPTH", "normalise_schema"]

MAX_DEPTH: Final = 8
_DROPPED: Final = frozenset(
    {"$schema", "$id", "$defs", "definitions", "$comment", "$anchor", "$dynamicRef",
     "$dynamicAnchor", "$vocabulary", "examples", "deprecated", "readOnly", "writeOnly"}
)  # fmt: skip
_EMPTY: Final[dict[str, Any]] = {"type": "object", "properties": {}}


def normalise_schema(schema: object) -> dict[str, Any]:
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return dict(_EMPTY)
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        table = schema.get(key)
        if isinstance(table, Mapping):
            defs.update({f"#/{key}/{name}": value for name, value in table.items()})
    out = _walk(schema, defs, 0, ())
    if not isinstance(out, dict):
        return dict(_EMPTY)
    out["type"] = "object"
    out.setdefault("properties", {})
    try:
        validators.validator_for(out).check_schema(out)
    except (jsonschema_exceptions.SchemaError, TypeError, ValueError):
        return dict(_EMPTY)
    return out


def _walk(node: object, defs: Mapping[str, Any], depth: int, seen: tuple[str, ...]) -> object:
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = defs.get(ref)
            if target is None or ref in seen or depth >= MAX_DEPTH:
                return {}
            return _walk(target, defs, depth + 1, (*seen, ref))
        return {str(k): _walk(v, defs, depth, seen) for k, v in node.items() if k not in _DROPPED}
    if isinstance(node, list):
        return [_walk(v, defs, depth, seen) for v in node]
    return node
