"""Tools and the tool registry: JSON-schema parameters, validated before a tool runs.

Validation uses the ``jsonschema`` library (the reference implementation of JSON Schema for
Python, drafts 4 to 2020-12): a tool's schema is checked when it is registered (a broken schema
is a programming error, raised at once), and the model's arguments are checked before every call
(a bad argument goes back to the model as an error result, so it can correct itself).

Checking a schema against its meta-schema costs about a millisecond per tool, so schemas that
passed are remembered (by their canonical JSON, a bounded set): a registry built per run for the
same tools checks nothing again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators
from jsonschema.protocols import Validator

from lemon_agent.abort import AbortSignal
from lemon_agent.errors import AgentUsageError
from lemon_ai import ImageContent, ToolSpec

__all__ = ["Tool", "ToolContext", "ToolExecute", "ToolRegistry", "ToolResult"]

_MAX_REPORTED_ERRORS = 5
_MAX_CHECKED_SCHEMAS = 512
#: Canonical JSON of schemas that passed ``check_schema`` (cleared when it reaches the bound).
_checked_schemas: set[str] = set()


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """What a tool returns: text for the model, an error flag, optional structured details,
    and images the model is shown with the text (a browser screenshot; checked images, as
    :func:`lemon_ai.decode_image` makes them)."""

    content: str
    is_error: bool = False
    details: Mapping[str, Any] | None = None
    images: tuple[ImageContent, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a running tool gets: its validated arguments, the abort signal, a progress channel.

    ``update(text)`` publishes a ``tool_execution_update`` event (awaiting applies the event
    stream's backpressure).
    """

    tool_call_id: str
    name: str
    arguments: Mapping[str, Any]
    signal: AbortSignal
    update: Callable[[str], Awaitable[None]]


ToolExecute = Callable[[ToolContext], Awaitable[ToolResult | str]]
"""A tool's body; a plain string result means success. Raise ``ToolError`` for a failure."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A tool the agent can call."""

    name: str
    description: str
    execute: ToolExecute
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


def _path(error: jsonschema_exceptions.ValidationError) -> str:
    parts = [str(part) for part in error.absolute_path]
    return "/".join(parts) if parts else "(root)"


class ToolRegistry:
    """Named tools with pre-compiled argument validators, in registration order."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Validator] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``; a duplicate name or an invalid schema raises :class:`AgentUsageError`."""
        if not tool.name or not tool.name.replace("_", "").replace("-", "").isalnum():
            raise AgentUsageError(
                f"tool name {tool.name!r} is invalid: use letters, digits, '_' or '-'"
            )
        if tool.name in self._tools:
            raise AgentUsageError(f"a tool named {tool.name!r} is already registered")
        schema = dict(tool.parameters)
        if schema.get("type") != "object":
            raise AgentUsageError(
                f'tool {tool.name!r}: parameters must be a JSON schema with "type": "object"'
            )
        cls = validators.validator_for(schema)
        try:
            key: str | None = json.dumps(schema, sort_keys=True)
        except (TypeError, ValueError):  # not JSON (checked every time)
            key = None
        if key is None or key not in _checked_schemas:
            try:
                cls.check_schema(schema)
            except jsonschema_exceptions.SchemaError as exc:
                raise AgentUsageError(
                    f"tool {tool.name!r} has an invalid parameters schema: {exc.message}"
                ) from exc
            if key is not None:
                if len(_checked_schemas) >= _MAX_CHECKED_SCHEMAS:
                    _checked_schemas.clear()
                _checked_schemas.add(key)
        self._tools[tool.name] = tool
        self._validators[tool.name] = cls(schema)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        """Tool names in registration order."""
        return tuple(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools as the model sees them."""
        return tuple(tool.spec() for tool in self._tools.values())

    def validate(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        """``None`` if ``arguments`` fit the tool's schema, else a message for the model."""
        validator = self._validators.get(name)
        if validator is None:
            return f"unknown tool {name!r}"
        errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
        if not errors:
            return None
        lines = [f"{_path(error)}: {error.message}" for error in errors[:_MAX_REPORTED_ERRORS]]
        if len(errors) > _MAX_REPORTED_ERRORS:
            lines.append(f"... and {len(errors) - _MAX_REPORTED_ERRORS} more")
        return "; ".join(lines)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)
