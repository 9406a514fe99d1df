"""Token usage and dollar cost of model calls."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Cost", "Usage"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Tokens one model response consumed.

    ``input_tokens`` counts uncached prompt tokens only; cached prompt tokens are in
    ``cache_read_tokens`` (OpenAI reports them inside ``prompt_tokens``; providers normalise).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """All tokens, prompt (cached or not) plus output."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    @property
    def prompt_tokens(self) -> int:
        """The prompt size as the context window sees it (cached and uncached)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Cost:
    """Dollar cost of a usage at a model's prices."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    @property
    def total(self) -> float:
        """The sum of the parts, in dollars."""
        return self.input + self.output + self.cache_read + self.cache_write

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
        )
