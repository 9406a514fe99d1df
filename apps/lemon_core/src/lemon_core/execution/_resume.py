"""ResumeToken: the persisted discriminator of a resumable native session."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from lemon_core.execution.errors import ExecutionContractError, require_text

__all__ = ["NATIVE_ENGINE", "ResumeToken"]

#: The fixed provenance of every gateway run; the only engine a top-level run may resume.
NATIVE_ENGINE: Final = "lemon"

_RESUME_RE: Final = re.compile(r"`?lemon\s+resume\s+([A-Za-z0-9_-]+)`?", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumeToken:
    """A resume token: which engine wrote it (``engine``) and its opaque ``value``.

    ``engine`` is a persisted discriminator, never a runner selection: only tokens whose
    engine is :data:`NATIVE_ENGINE` may resume a top-level run. Non-native historical
    tokens may still be read and kept, they are just never executed.
    """

    engine: str
    value: str

    def __post_init__(self) -> None:
        require_text("ResumeToken", "engine", self.engine)
        require_text("ResumeToken", "value", self.value)

    @classmethod
    def native(cls, value: str) -> ResumeToken:
        """A token for the native engine (``engine="lemon"``)."""
        return cls(engine=NATIVE_ENGINE, value=value)

    @property
    def is_native(self) -> bool:
        """True when this token may resume a top-level run."""
        return self.engine.strip() == NATIVE_ENGINE

    def display(self) -> str:
        """The user-facing resume command, e.g. ```lemon resume abc```."""
        return f"`{self.engine} resume {self.value}`"

    def to_dict(self) -> dict[str, str]:
        """The wire/store form: exactly ``{"engine": ..., "value": ...}``."""
        return {"engine": self.engine, "value": self.value}

    @classmethod
    def from_dict(cls, data: object) -> ResumeToken:
        """Parse the wire/store form; raise :class:`ExecutionContractError` on a bad shape."""
        if not isinstance(data, dict):
            raise ExecutionContractError(
                f"a resume token must be a mapping with 'engine' and 'value', got {data!r}"
            )
        extra = set(data) - {"engine", "value"}
        if extra:
            raise ExecutionContractError(f"unknown resume token keys: {sorted(extra)}")
        return cls(engine=data.get("engine"), value=data.get("value"))  # type: ignore[arg-type]  # validated in __post_init__

    @classmethod
    def extract(cls, text: str) -> ResumeToken | None:
        """Find a ``lemon resume <id>`` command anywhere in ``text``."""
        match = _RESUME_RE.search(text)
        return cls.native(match.group(1)) if match else None
