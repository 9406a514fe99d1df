"""The error hierarchy of coding_agent."""

from __future__ import annotations

__all__ = ["CodingAgentError", "CodingAgentUsageError"]


class CodingAgentError(Exception):
    """Base class of every error raised by coding_agent."""


class CodingAgentUsageError(CodingAgentError):
    """coding_agent was configured wrongly (for example a workspace that is not a directory)."""
