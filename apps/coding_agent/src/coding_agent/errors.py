"""The error hierarchy of coding_agent.

::

    CodingAgentError
    ├── CodingAgentUsageError           configured wrongly (a workspace that is not a directory)
    ├── CompactionError                 a session could not be compacted (``code`` says why)
    └── TranscriptError                 a session transcript cannot be used
        ├── SessionNotFoundError        no transcript with that session id
        └── CorruptTranscriptError      a transcript that does not parse (names the line)

A test (``test_coding_error_tree.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

__all__ = [
    "CodingAgentError",
    "CodingAgentUsageError",
    "CompactionError",
    "CorruptTranscriptError",
    "SessionNotFoundError",
    "TranscriptError",
]


class CodingAgentError(Exception):
    """Base class of every error raised by coding_agent."""


class CodingAgentUsageError(CodingAgentError):
    """coding_agent was configured wrongly (for example a workspace that is not a directory)."""


class TranscriptError(CodingAgentError):
    """A session transcript cannot be used."""


class SessionNotFoundError(TranscriptError):
    """The session to resume has no transcript (or its id is not a valid session id)."""


class CorruptTranscriptError(TranscriptError):
    """The session's transcript exists but cannot be loaded (the message names the line)."""


class CompactionError(CodingAgentError):
    """A session could not be compacted; ``code`` says why in one word.

    ``config_invalid`` (the configuration), ``model_unavailable`` (the model reference),
    ``empty_summary`` (the model wrote no summary), or a provider error kind from lemon_ai
    (``context_overflow``, ``rate_limit``, ``auth``, ...) for the summarisation request.
    """

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code
