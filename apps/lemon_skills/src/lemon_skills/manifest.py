"""``SKILL.md``: the Agent Skills manifest (YAML front matter, then the instructions).

The front matter is parsed with PyYAML's ``safe_load`` only (plain data; no tags, no objects)
and bounded in size. Required: ``name`` (lowercase letters, digits and single hyphens, at most
64 characters) and ``description`` (non-empty, at most 1,024 characters). Other keys are kept
as ``metadata``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from lemon_skills.errors import ManifestError

__all__ = ["MANIFEST_FILE", "Manifest", "parse_manifest", "read_manifest", "valid_skill_name"]

MANIFEST_FILE: Final = "SKILL.md"
_MAX_FRONT_MATTER: Final = 64 * 1024
_MAX_DESCRIPTION: Final = 1024
_MAX_MANIFEST_BYTES: Final = 1024 * 1024
_NAME: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True, kw_only=True, slots=True)
class Manifest:
    """A parsed ``SKILL.md``."""

    name: str
    description: str
    body: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


def valid_skill_name(name: str) -> bool:
    """Whether ``name`` is a valid skill name (also a safe directory name)."""
    return len(name) <= 64 and _NAME.fullmatch(name) is not None


def parse_manifest(text: str, *, origin: str = MANIFEST_FILE) -> Manifest:
    """Parse the text of a ``SKILL.md``; raises :class:`ManifestError` saying what to fix."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise ManifestError(
            f"{origin}: no front matter; start the file with a '---' line, then 'name:' and "
            "'description:', then a closing '---' line"
        )
    end = text.find("\n---", 3)
    while end != -1 and text[end + 4 : end + 5] not in ("", "\n"):
        end = text.find("\n---", end + 4)
    if end == -1:
        raise ManifestError(f"{origin}: the front matter is not closed by a '---' line")
    raw = text[4 : end + 1]
    if len(raw) > _MAX_FRONT_MATTER:
        raise ManifestError(f"{origin}: the front matter is over {_MAX_FRONT_MATTER} characters")
    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        raise ManifestError(f"{origin}: the front matter is not valid YAML: {exc}") from None
    except RecursionError:  # `[[[[...` a few thousand deep
        raise ManifestError(
            f"{origin}: the front matter is nested too deeply; use plain keys and values"
        ) from None
    if not isinstance(data, dict):
        raise ManifestError(f"{origin}: the front matter must be a mapping of keys to values")
    name = data.get("name")
    if not isinstance(name, str) or not valid_skill_name(name):
        raise ManifestError(
            f"{origin}: 'name' must be lowercase letters, digits and single hyphens (at most 64 "
            f"characters), e.g. 'k8s-rollout'; got {name!r}"
        )
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ManifestError(f"{origin}: 'description' must be a non-empty string")
    if len(description) > _MAX_DESCRIPTION:
        raise ManifestError(f"{origin}: 'description' is over {_MAX_DESCRIPTION} characters")
    if _CONTROL.search(description):
        # YAML escapes ("\e[8m", "\x9b") would otherwise carry terminal control sequences into
        # `lemon skills show` and the system prompt.
        raise ManifestError(
            f"{origin}: 'description' holds control characters (terminal escapes?); write "
            "plain text"
        )
    body = text[end + 4 :].removeprefix("\n")
    metadata = {str(k): v for k, v in data.items() if k not in ("name", "description")}
    return Manifest(name=name, description=description.strip(), body=body, metadata=metadata)


def read_manifest(root: Path) -> Manifest:
    """The manifest of the bundle under ``root`` (its top-level ``SKILL.md``, not a link)."""
    path = root / MANIFEST_FILE
    if path.is_symlink() or not path.is_file():
        raise ManifestError(
            f"{root} has no {MANIFEST_FILE} file at its top level; a skill is a directory "
            f"holding a {MANIFEST_FILE}"
        )
    if path.stat().st_size > _MAX_MANIFEST_BYTES:
        raise ManifestError(f"{path}: over {_MAX_MANIFEST_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ManifestError(f"{path}: not UTF-8 text") from None
    return parse_manifest(text, origin=str(path))
