"""Input schemas: refs inlined (bounded), unsupported keywords dropped, never invalid."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from jsonschema import validators

from lemon_mcp._schema import normalise_schema


def test_local_refs_are_inlined_and_meta_keywords_dropped() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {"p": {"$ref": "#/$defs/Point"}, "q": {"$ref": "#/$defs/Missing"}},
    }
    out = normalise_schema(schema)
    assert out == {
        "type": "object",
        "properties": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}, "q": {}},
    }


def test_a_recursive_ref_ends_in_the_empty_schema() -> None:
    schema = {
        "type": "object",
        "definitions": {
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}
        },
        "properties": {"root": {"$ref": "#/definitions/Node"}},
    }
    out = normalise_schema(schema)
    assert out["properties"]["root"]["properties"]["next"] == {}


def test_an_invalid_or_missing_schema_is_the_empty_object_schema() -> None:
    empty = {"type": "object", "properties": {}}
    assert normalise_schema(None) == empty
    assert normalise_schema({"type": "string"}) == empty
    assert normalise_schema({"type": "object", "properties": {"a": {"type": 12}}}) == empty


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.sampled_from(["type", "properties", "required", "$ref", "$defs", "items", "x"]),
        _json,
        max_size=5,
    )
)
def test_the_result_is_always_a_valid_object_schema(raw: dict[str, Any]) -> None:
    out = normalise_schema({**raw, "type": "object"})
    assert out["type"] == "object"
    validators.validator_for(out).check_schema(out)
