"""Separating a leading ``<think>…</think>`` section of streamed content from the answer.

Reasoning models behind OpenAI-compatible servers (DeepSeek-R1 and Qwen through Ollama,
llama.cpp server, vLLM without a reasoning parser) put their reasoning in the answer content
between ``<think>`` and ``</think>``. :class:`ThinkTagSplitter` is fed the content deltas as they
arrive and returns ``("thinking" | "text", piece)`` pairs, so the reasoning becomes thinking and
never part of the answer. Tags may be split across deltas at any character.

Only a section that opens the content (after optional whitespace) is reasoning: an answer that
mentions ``<think>`` later stays text. Whitespace between ``</think>`` and the answer is dropped.
A reasoning section the stream never closes stays thinking (the response was cut mid-thought).
"""

from __future__ import annotations

from typing import Literal

Piece = tuple[Literal["thinking", "text"], str]

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


def _held_prefix(buffer: str, tag: str) -> int:
    """The length of the longest end of ``buffer`` that is a proper prefix of ``tag``."""
    for size in range(min(len(buffer), len(tag) - 1), 0, -1):
        if buffer.endswith(tag[:size]):
            return size
    return 0


class ThinkTagSplitter:
    """A small state machine over content deltas (see the module docstring)."""

    def __init__(self) -> None:
        self._state: Literal["start", "thinking", "after", "text"] = "start"
        self._buffer = ""

    def feed(self, delta: str) -> list[Piece]:
        """The thinking and text pieces ``delta`` completes (a tag prefix is held back)."""
        if self._state == "text":
            return [("text", delta)] if delta else []
        self._buffer += delta
        out: list[Piece] = []
        while self._buffer:
            if self._state == "start":
                stripped = self._buffer.lstrip()
                if stripped.startswith(OPEN_TAG):
                    self._buffer = stripped[len(OPEN_TAG) :]
                    self._state = "thinking"
                elif not stripped or OPEN_TAG.startswith(stripped):
                    return out  # still only whitespace, or the start of the tag
                else:
                    self._state = "text"
            elif self._state == "thinking":
                end = self._buffer.find(CLOSE_TAG)
                if end >= 0:
                    if end:
                        out.append(("thinking", self._buffer[:end]))
                    self._buffer = self._buffer[end + len(CLOSE_TAG) :]
                    self._state = "after"
                    continue
                held = _held_prefix(self._buffer, CLOSE_TAG)
                cut = len(self._buffer) - held
                if cut:
                    out.append(("thinking", self._buffer[:cut]))
                self._buffer = self._buffer[cut:]
                return out
            elif self._state == "after":
                stripped = self._buffer.lstrip()
                self._buffer = stripped
                if stripped:
                    self._state = "text"
            else:
                out.append(("text", self._buffer))
                self._buffer = ""
        return out

    def close(self) -> list[Piece]:
        """Flush what is held back at the end of the stream."""
        buffer, self._buffer = self._buffer, ""
        if not buffer:
            return []
        if self._state == "thinking":
            return [("thinking", buffer)]
        if self._state == "after":
            return []
        return [("text", buffer)]
