"""The skills an agent may use, and their files read on demand (progressive disclosure).

:meth:`SkillCatalog.enabled` lists the usable skills (enabled; not blocked, or blocked under an
override that still matches; unchanged since install) with a description safe for a system
prompt: one line, invisible and control characters removed, clipped. :meth:`SkillCatalog.read`
returns a skill's ``SKILL.md`` or one of its files: only a usable skill, only a regular file
inside its bundle (no absolute path, no ``..``, no link leading out), only text, and at most
``max_chars`` characters.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from lemon_skills.bundle import INVISIBLE_CHARS, bundle_entries
from lemon_skills.errors import SkillsError, SkillsUsageError
from lemon_skills.installer import SkillManager
from lemon_skills.manifest import MANIFEST_FILE
from lemon_skills.settings import SkillsSettings
from lemon_skills.taxonomy import TrustLevel

__all__ = ["SkillCatalog", "SkillSummary", "prompt_safe"]

_MAX_DESCRIPTION: Final = 300
_SPACE: Final = re.compile(r"\s+")
_INVISIBLE: Final = re.compile(f"[{INVISIBLE_CHARS}]")


def prompt_safe(text: str, limit: int = _MAX_DESCRIPTION) -> str:
    """``text`` as one clean line: control, format (invisible), private-use characters and
    the other invisible ones (variation selectors, fillers) dropped, whitespace collapsed,
    clipped at ``limit``."""
    text = _INVISIBLE.sub("", text)
    kept = "".join(
        ch if not unicodedata.category(ch).startswith("C") else " "
        for ch in text
        if unicodedata.category(ch) not in ("Cf", "Co", "Cn")
    )
    line = _SPACE.sub(" ", kept).strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillSummary:
    """What the system prompt says about one skill."""

    name: str
    description: str
    trust: TrustLevel


class SkillCatalog:
    """The installed skills of a home, as an agent sees them."""

    def __init__(self, settings: SkillsSettings, *, max_chars: int = 40_000) -> None:
        self.settings = settings
        self.max_chars = max_chars
        self._manager = SkillManager(settings)

    def enabled(self) -> list[SkillSummary]:
        """The usable skills, by name."""
        return [
            SkillSummary(name=r.name, description=prompt_safe(r.description), trust=r.trust)
            for r in self._manager.records()
            if self._manager.usable(r)
        ]

    def read(self, name: str, path: str | None = None) -> str:
        """The text of ``path`` (default ``SKILL.md``) in skill ``name``'s bundle; for
        ``SKILL.md`` the list of the bundle's other files follows. Raises
        :class:`SkillsUsageError` saying why a read is refused."""
        for value in (name, path or ""):
            if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in value):
                raise SkillsUsageError(
                    f"{value!r}: a skill name or path holds a control character; give the "
                    "name and a relative path exactly as listed"
                )
        state = self._manager.lockfile.read()
        record = state.skills.get(name)
        if record is None or not self._manager.usable(record):
            known = ", ".join(s.name for s in self.enabled()) or "none"
            raise SkillsUsageError(f"no usable skill named {name!r} (usable skills: {known})")
        root = self._manager.path_of(name)
        rel = (path or MANIFEST_FILE).strip()
        pure = PurePosixPath(rel.replace("\\", "/"))
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            raise SkillsUsageError(f"{rel!r}: give a path relative to the skill, without '..'")
        target = root.joinpath(*pure.parts)
        resolved = target.resolve()
        base = root.resolve()
        if resolved != base and base not in resolved.parents:
            raise SkillsUsageError(f"{rel!r} leads outside the skill {name!r}")
        if not resolved.is_file():
            raise SkillsUsageError(f"skill {name!r} has no file {rel!r}")
        # Only a file of the bundle as hashed (and so audited): nothing the walk leaves out
        # (a `.git` directory added to the installed copy, say) is ever served.
        inside = resolved.relative_to(base).as_posix()
        if inside not in self._hashed_files(root):
            raise SkillsUsageError(f"skill {name!r} has no file {rel!r}")
        with resolved.open("rb") as handle:
            data = handle.read(self.max_chars * 4 + 4)
        if b"\x00" in data:
            raise SkillsUsageError(f"{rel!r} of skill {name!r} is a binary file")
        text = data.decode("utf-8", errors="replace")
        truncated = len(text) > self.max_chars or resolved.stat().st_size > len(data)
        if len(text) > self.max_chars:
            text = text[: self.max_chars]
        if truncated:
            text += f"\n[... {rel} truncated at {self.max_chars} characters]"
        if pure == PurePosixPath(MANIFEST_FILE):
            files = self._files(root)
            if files:
                text += "\n\n[Files of this skill (read them with read_skill and a path): "
                text += ", ".join(files) + "]"
        return text

    def _hashed_files(self, root: Path) -> set[str]:
        try:
            entries = bundle_entries(root, self.settings.audit.bundle)
        except SkillsError:
            return set()
        return {e.path for e in entries if e.kind == "file"}

    def _files(self, root: Path) -> list[str]:
        try:
            entries = bundle_entries(root, self.settings.audit.bundle)
        except SkillsError:
            return []
        return [e.path for e in entries if e.path != MANIFEST_FILE][:200]
