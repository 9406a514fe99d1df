"""The offline provider: the default when no model is configured.

Deterministic and local (no network, no cost). It says plainly that it is offline and how to
configure a model, and it understands a small explicit syntax so a newcomer can watch the whole
platform (streaming, tools, approvals) work without a key. In the last user message:

``/tool NAME {json}``
    Call tool ``NAME`` with the JSON object as arguments (``{}`` may be omitted). Several
    ``/tool`` lines make parallel tool calls. After the results come back, the offline model
    reports what each tool returned.
``/tools``
    List the tools the agent offers.
``/echo TEXT``
    Answer exactly ``TEXT`` (everything after ``/echo``, newlines included).

Anything else gets the offline notice (saying so when the message came with images: the
offline model takes no image input).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator

from lemon_ai._assembler import MessageAssembler
from lemon_ai.events import DoneEvent, StartEvent, StreamEvent
from lemon_ai.messages import AssistantMessage, Context, ToolResultMessage, UserMessage
from lemon_ai.models import Api, Model
from lemon_ai.provider import StreamOptions
from lemon_ai.usage import Usage

__all__ = ["DEFAULT_SETUP_HINT", "OfflineProvider"]

DEFAULT_SETUP_HINT = (
    "To talk to a real model, run `lemon setup`, or set a model in $LEMON_HOME/config.toml, "
    'for example `[defaults] model = "openai:gpt-4o-mini"` (with an OpenAI API key) or '
    '`model = "ollama:llama3.2"` for a local Ollama server.'
)

_TOOL_LINE = re.compile(r"^\s*/tool\s+(?P<name>[A-Za-z0-9_.:-]+)\s*(?P<args>.*)$")
_RESULT_PREVIEW = 2000
_WORD = re.compile(r"\S+\s*|\s+")


def _chunks(text: str) -> list[str]:
    return _WORD.findall(text) or [text]


class OfflineProvider:
    """A provider that needs no network and no key (see the module docstring for its syntax)."""

    api: Api = "offline"

    def __init__(self, *, setup_hint: str = DEFAULT_SETUP_HINT) -> None:
        self._hint = setup_hint

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the deterministic answer for ``context``."""
        assembler = MessageAssembler(model)
        yield StartEvent(model=model.id, provider=model.provider)
        text, calls = self._answer(context)
        for piece in _chunks(text) if text else ():
            yield assembler.text("text", piece)
        turn = sum(isinstance(message, AssistantMessage) for message in context.messages)
        for position, (name, raw) in enumerate(calls):
            key = ("tool", position)
            yield assembler.tool_start(key, f"offline_{turn}_{position}", name)
            if raw:
                yield assembler.tool_delta(key, raw)
            end = assembler.tool_end(key)
            if end is not None:
                yield end
        prompt_chars = len(context.system_prompt) + sum(
            len(getattr(message, "content", "") if not isinstance(message, AssistantMessage)
                else message.text)
            for message in context.messages
        )  # fmt: skip
        output_chars = len(text) + sum(len(name) + len(raw) for name, raw in calls)
        assembler.usage = Usage(
            input_tokens=(prompt_chars + 3) // 4, output_tokens=(output_chars + 3) // 4
        )
        yield DoneEvent(message=assembler.message("tool_use" if calls else "stop"))

    def _answer(self, context: Context) -> tuple[str, list[tuple[str, str]]]:
        messages = context.messages
        if messages and isinstance(messages[-1], ToolResultMessage):
            results: list[ToolResultMessage] = []
            for message in reversed(messages):
                if not isinstance(message, ToolResultMessage):
                    break
                results.append(message)
            return self._report(list(reversed(results))), []
        last = next(
            (message for message in reversed(messages) if isinstance(message, UserMessage)), None
        )
        prompt = last.content if last is not None else ""
        stripped = prompt.strip()
        if stripped.startswith("/echo"):
            return stripped.removeprefix("/echo").removeprefix(" "), []
        if stripped == "/tools":
            return self._list_tools(context), []
        tool_lines = [line for line in prompt.splitlines() if line.strip().startswith("/tool ")]
        if tool_lines:
            return self._tool_calls(context, tool_lines)
        notice = self._notice()
        count = len(last.images) if last is not None else 0
        if count:
            plural = "image" if count == 1 else "images"
            notice = f"I got {count} {plural}, but I cannot look at images. " + notice
        return notice, []

    def _notice(self) -> str:
        return (
            "I'm running offline: no model is configured, so I can't really answer. "
            f"{self._hint} Meanwhile you can try tools with `/tool NAME {{json arguments}}`, "
            "list them with `/tools`, or get an exact reply with `/echo TEXT`."
        )

    def _list_tools(self, context: Context) -> str:
        if not context.tools:
            return "Offline: this agent offers no tools."
        lines = [f"- {tool.name}: {tool.description}" for tool in context.tools]
        return "Offline: available tools (call one with `/tool NAME {json}`):\n" + "\n".join(lines)

    def _tool_calls(self, context: Context, lines: list[str]) -> tuple[str, list[tuple[str, str]]]:
        known = {tool.name for tool in context.tools}
        calls: list[tuple[str, str]] = []
        problems: list[str] = []
        for line in lines:
            match = _TOOL_LINE.match(line)
            if match is None:
                problems.append(f"cannot read {line.strip()!r}; write `/tool NAME {{json}}`")
                continue
            name, raw = match["name"], match["args"].strip()
            if name not in known:
                available = ", ".join(sorted(known)) or "none"
                problems.append(f"there is no tool {name!r} (available: {available})")
                continue
            try:
                value = json.loads(raw) if raw else {}
            except json.JSONDecodeError as exc:
                problems.append(f"the arguments of {name!r} are not valid JSON: {exc.msg}")
                continue
            if not isinstance(value, dict):
                problems.append(f"the arguments of {name!r} must be a JSON object")
                continue
            calls.append((name, raw))
        if problems:
            return "Offline: " + "; ".join(problems) + ".", []
        names = ", ".join(name for name, _ in calls)
        return f"Offline: calling {names}.", calls

    def _report(self, results: list[ToolResultMessage]) -> str:
        parts = []
        for result in results:
            preview = result.content
            if len(preview) > _RESULT_PREVIEW:
                preview = preview[:_RESULT_PREVIEW] + f"\n[... {len(result.content)} chars]"
            verb = "failed" if result.is_error else "returned"
            parts.append(f"Offline: tool `{result.tool_name}` {verb}:\n{preview}")
        return "\n\n".join(parts)
