"""``output_schema`` of a task: a JSON Schema subset a child's final answer must match.

The subset: ``type`` (``object``, ``array``, ``string``, ``number``, ``integer``,
``boolean``, ``null``, or a list of them), ``properties``, ``required``,
``additionalProperties`` (a boolean), ``items``, ``enum``, ``minItems`` / ``maxItems``,
``minLength`` / ``maxLength``, ``minimum`` / ``maximum``. Any other keyword is refused when
the task is asked for (:func:`check_schema`), never silently ignored: a schema the checker
cannot enforce would pass answers it should not.

The answer is the child's final text: JSON, optionally inside one fenced code block.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["check_schema", "parse_answer", "validate"]

_KEYWORDS: Final = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "minItems",
    "maxItems", "minLength", "maxLength", "minimum", "maximum", "description", "title",
})  # fmt: skip
_TYPES: Final = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_MAX_ERRORS: Final = 10


def check_schema(schema: object, path: str = "$") -> None:
    """Raise ``ValueError`` (with the path) when ``schema`` leaves the supported subset."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{path}: a schema is a JSON object, got {type(schema).__name__}")
    unknown = sorted(set(schema) - _KEYWORDS)
    if unknown:
        raise ValueError(
            f"{path}: unsupported schema keywords {unknown}; supported: {sorted(_KEYWORDS)}"
        )
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []:
        if kind not in _TYPES:
            raise ValueError(f"{path}: unknown type {kind!r}; one of {sorted(_TYPES)}")
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        raise ValueError(f"{path}.properties must be an object")
    for name, sub in props.items():
        check_schema(sub, f"{path}.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValueError(f"{path}.required must be a list of names")
    if not isinstance(schema.get("additionalProperties", True), bool):
        raise ValueError(f"{path}.additionalProperties must be true or false")
    if "items" in schema:
        check_schema(schema["items"], f"{path}[]")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise ValueError(f"{path}.enum must be a list")


def parse_answer(text: str) -> tuple[Any, str | None]:
    """The JSON value of ``text`` (a fenced block's content if it is one) and None, or
    (None, why it is not JSON)."""
    body = text.strip()
    if body.startswith("```"):
        _fence, _, rest = body.partition("\n")
        body = rest.rsplit("```", 1)[0] if rest.rstrip().endswith("```") else rest
    try:
        return json.loads(body), None
    except ValueError as exc:
        return None, f"the answer is not JSON ({exc})"


def validate(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Where ``value`` does not match ``schema`` (empty: it matches); at most 10 findings."""
    errors: list[str] = []
    _check(value, schema, path, errors)
    return errors[:_MAX_ERRORS]


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _check(value: Any, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if len(errors) >= _MAX_ERRORS:
        return
    kinds = schema.get("type")
    if kinds is not None:
        allowed = set(kinds if isinstance(kinds, list) else [kinds])
        actual = _type_of(value)
        if not (actual in allowed or (actual == "integer" and "number" in allowed)):
            errors.append(f"{path}: expected {' or '.join(sorted(allowed))}, got {actual}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        for name, item in value.items():
            if name in props:
                _check(item, props[name], f"{path}.{name}", errors)
            elif schema.get("additionalProperties", True) is False:
                errors.append(f"{path}: property {name!r} is not allowed")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: at least {schema['minItems']} items, got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: at most {schema['maxItems']} items, got {len(value)}")
        if "items" in schema:
            for i, item in enumerate(value):
                _check(item, schema["items"], f"{path}[{i}]", errors)
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: at most {schema['maxLength']} characters")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} is above the maximum {schema['maximum']}")
