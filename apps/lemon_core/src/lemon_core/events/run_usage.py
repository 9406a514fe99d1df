"""``RunUsage``: what a run consumed, nested in :class:`Completion` (never published alone)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lemon_core.events._payload import Payload

__all__ = ["RunUsage"]


class RunUsage(Payload, frozen=True, kw_only=True):
    """Tokens, dollars and model calls of one run (all attempts' model calls added up)."""

    event_type: ClassVar[str] = "run_usage"

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    model: str | None = None
    turns: int = 0
    context_tokens: int = 0
    """The prompt tokens (cached or not) of the run's last model call: what its context held
    then (0: not known, e.g. a record from before this field or a run with no model call)."""

    @property
    def total_tokens(self) -> int:
        """Prompt (cached or not) plus output tokens."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    @classmethod
    def _lenient_input(cls, value: Mapping[str, Any]) -> Mapping[str, Any]:
        # ``total_tokens`` is derived; older records carried it as a key.
        return {k: v for k, v in value.items() if k != "total_tokens"}
