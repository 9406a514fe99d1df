"""The ``output_schema`` subset: what it checks, what it refuses to pretend to check."""

from __future__ import annotations

from typing import Any

import pytest

from coding_agent._output_schema import check_schema, parse_answer, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "files": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "count": {"type": "integer", "minimum": 0},
        "kind": {"enum": ["bug", "feature"]},
        "score": {"type": "number", "maximum": 1},
    },
    "required": ["files", "count"],
    "additionalProperties": False,
}


def test_a_matching_answer_has_no_findings() -> None:
    check_schema(SCHEMA)
    value = {"files": ["a.py"], "count": 2, "kind": "bug", "score": 1}  # an int is a number
    assert validate(value, SCHEMA) == []


def test_each_mismatch_is_named_with_its_path() -> None:
    value = {"files": [], "count": -1, "kind": "chore", "score": 2.5, "extra": True}
    assert validate(value, SCHEMA) == [
        "$.files: at least 1 items, got 0",
        "$.count: -1 is below the minimum 0",
        "$.kind: 'chore' is not one of ['bug', 'feature']",
        "$.score: 2.5 is above the maximum 1",
        "$: property 'extra' is not allowed",
    ]
    assert validate({"files": ["x"]}, SCHEMA) == ["$: missing required property 'count'"]
    assert validate({"files": [1], "count": True}, SCHEMA) == [
        "$.files[0]: expected string, got integer",
        "$.count: expected integer, got boolean",
    ]


def test_json_is_read_from_a_fenced_block_and_prose_is_not_json() -> None:
    assert parse_answer('```json\n{"a": 1}\n```') == ({"a": 1}, None)
    assert parse_answer(" [1, 2] ") == ([1, 2], None)
    value, error = parse_answer("forty-two")
    assert value is None
    assert error is not None
    assert error.startswith("the answer is not JSON")


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string", "pattern": "^a"}, "unsupported schema keywords ['pattern']"),
        ({"type": "text"}, "unknown type 'text'"),
        ({"properties": {"a": {"oneOf": []}}}, "$.a: unsupported schema keywords"),
        ({"required": "a"}, "required must be a list"),
        ([], "a schema is a JSON object"),
    ],
)
def test_a_schema_outside_the_subset_is_refused(schema: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("$", r"\$")):
        check_schema(schema)
