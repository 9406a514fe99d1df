"""The lockfile ``$LEMON_HOME/skills/skills.lock``: what is installed, from where, as what.

Pretty JSON, written whole to a temporary file, fsynced and renamed over the old one (a reader
sees the old or the new file, never half of one). Every change happens inside
:meth:`Lockfile.transaction`, which holds an exclusive ``flock`` on ``skills.lock.guard`` for
the whole operation, so two installs never interleave. Format (version 1)::

    {"version": 1,
     "skills": {"<name>": {"name", "source_kind", "identifier", "location", "subdir",
                           "resolved_ref", "bundle_hash", "trust", "verdict", "findings",
                           "override", "enabled", "description", "installed_at",
                           "updated_at"}},
     "overrides": {"<name>": {"bundle_hash", "findings", "accepted_at"}},
     "blocked": {"<name>": {"identifier", "bundle_hash", "findings", "recorded_at"}},
     "seeded_builtins": ["<name>", ...]}

``blocked`` keeps the last blocked audit per name (what ``lemon skills override`` checks its
arguments against); ``seeded_builtins`` the builtin skills already seeded once (an uninstalled
builtin is not seeded again).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from lemon_skills.audit import RULES, Verdict
from lemon_skills.errors import LockfileError
from lemon_skills.manifest import valid_skill_name
from lemon_skills.taxonomy import SourceKind, TrustLevel
from lemon_skills.trust import Override, trust_for

__all__ = ["BlockedAudit", "LockRecord", "LockState", "Lockfile"]

LOCK_VERSION: Final = 1
_VERDICTS: Final = ("pass", "warn", "block")


@dataclass(frozen=True, kw_only=True, slots=True)
class LockRecord:
    """One installed skill."""

    name: str
    source_kind: SourceKind
    identifier: str
    location: str
    trust: TrustLevel
    bundle_hash: str
    verdict: Verdict
    subdir: str | None = None
    resolved_ref: str | None = None
    findings: tuple[str, ...] = ()
    override: Override | None = None
    enabled: bool = True
    description: str = ""
    installed_at: str = ""
    updated_at: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class BlockedAudit:
    """The last blocked audit of a name (what an override must match)."""

    identifier: str
    bundle_hash: str
    findings: frozenset[str]
    recorded_at: str = ""


@dataclass(kw_only=True, slots=True)
class LockState:
    """The lockfile's content, changed in place inside a transaction."""

    skills: dict[str, LockRecord] = field(default_factory=dict)
    overrides: dict[str, Override] = field(default_factory=dict)
    blocked: dict[str, BlockedAudit] = field(default_factory=dict)
    seeded_builtins: set[str] = field(default_factory=set)


def _override_json(o: Override) -> dict[str, Any]:
    return {
        "bundle_hash": o.bundle_hash,
        "findings": sorted(o.findings),
        "accepted_at": o.accepted_at,
    }


def _override(raw: Any) -> Override:
    return Override(
        bundle_hash=str(raw["bundle_hash"]),
        findings=frozenset(str(f) for f in raw["findings"]),
        accepted_at=str(raw.get("accepted_at", "")),
    )


def _record_json(r: LockRecord) -> dict[str, Any]:
    return {
        "name": r.name,
        "source_kind": r.source_kind.value,
        "identifier": r.identifier,
        "location": r.location,
        "subdir": r.subdir,
        "resolved_ref": r.resolved_ref,
        "bundle_hash": r.bundle_hash,
        "trust": r.trust.value,
        "verdict": r.verdict,
        "findings": list(r.findings),
        "override": _override_json(r.override) if r.override is not None else None,
        "enabled": r.enabled,
        "description": r.description,
        "installed_at": r.installed_at,
        "updated_at": r.updated_at,
    }


def _consistent(r: LockRecord) -> LockRecord:
    """``r`` if its trust is the one the trust table gives its source, and its verdict the one
    its findings give; else :class:`ValueError`. A hand-edited record cannot promote a git
    source to ``builtin`` (an ``update`` would then skip the audit and the approval) or call
    a blocked bundle ``pass``."""
    official = (r.source_kind is SourceKind.GIT and r.identifier.startswith("hermes:")) or (
        r.source_kind is SourceKind.REGISTRY and r.identifier.split("/", 1)[0].lower() == "official"
    )
    if r.trust is not trust_for(r.source_kind, official=official):
        raise ValueError(
            f"skills: {r.name!r} is a {r.source_kind.value} source recorded with trust "
            f"{r.trust.value!r} (the trust table gives it "
            f"{trust_for(r.source_kind, official=official).value!r})"
        )
    severities = set()
    for finding in r.findings:
        rule = RULES.get(finding.partition("@")[0])
        if rule is None:
            raise ValueError(f"skills: {r.name!r} records an unknown finding {finding!r}")
        severities.add(rule.severity)
    verdict = "block" if "block" in severities else "warn" if severities else "pass"
    if r.source_kind is not SourceKind.BUILTIN and r.verdict != verdict:
        raise ValueError(
            f"skills: {r.name!r} is recorded {r.verdict!r} but its findings make it {verdict!r}"
        )
    return r


def _record(raw: Any) -> LockRecord:
    verdict = raw["verdict"]
    if verdict not in _VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}")
    return LockRecord(
        name=str(raw["name"]),
        source_kind=SourceKind(raw["source_kind"]),
        identifier=str(raw["identifier"]),
        location=str(raw["location"]),
        subdir=raw.get("subdir"),
        resolved_ref=raw.get("resolved_ref"),
        bundle_hash=str(raw["bundle_hash"]),
        trust=TrustLevel(raw["trust"]),
        verdict=cast("Verdict", verdict),
        findings=tuple(str(f) for f in raw.get("findings", ())),
        override=_override(raw["override"]) if raw.get("override") else None,
        enabled=bool(raw.get("enabled", True)),
        description=str(raw.get("description", "")),
        installed_at=str(raw.get("installed_at", "")),
        updated_at=str(raw.get("updated_at", "")),
    )


def _encode(state: LockState) -> str:
    doc = {
        "version": LOCK_VERSION,
        "skills": {n: _record_json(r) for n, r in sorted(state.skills.items())},
        "overrides": {n: _override_json(o) for n, o in sorted(state.overrides.items())},
        "blocked": {
            n: {
                "identifier": b.identifier,
                "bundle_hash": b.bundle_hash,
                "findings": sorted(b.findings),
                "recorded_at": b.recorded_at,
            }
            for n, b in sorted(state.blocked.items())
        },
        "seeded_builtins": sorted(state.seeded_builtins),
    }
    return json.dumps(doc, indent=2) + "\n"


def _checked_names(doc: dict[str, Any]) -> None:
    """Every name the lockfile keys by becomes a directory under ``installed/``: one that is
    not a skill name (``../..``, say, written by hand) is refused, never joined to a path."""
    for section in ("skills", "overrides", "blocked"):
        for name, raw in dict(doc.get(section, {})).items():
            if not isinstance(name, str) or not valid_skill_name(name):
                raise ValueError(f"{section}: {name!r} is not a valid skill name")
            if section == "skills" and raw.get("name") != name:
                raise ValueError(f"skills: the record under {name!r} names {raw.get('name')!r}")


def _decode(text: str, path: Path) -> LockState:
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("version") != LOCK_VERSION:
            raise ValueError(f"not a version {LOCK_VERSION} skills lockfile")
        _checked_names(doc)
        return LockState(
            skills={str(n): _consistent(_record(r)) for n, r in doc.get("skills", {}).items()},
            overrides={str(n): _override(o) for n, o in doc.get("overrides", {}).items()},
            blocked={
                str(n): BlockedAudit(
                    identifier=str(b["identifier"]),
                    bundle_hash=str(b["bundle_hash"]),
                    findings=frozenset(str(f) for f in b["findings"]),
                    recorded_at=str(b.get("recorded_at", "")),
                )
                for n, b in doc.get("blocked", {}).items()
            },
            seeded_builtins={str(n) for n in doc.get("seeded_builtins", [])},
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LockfileError(
            f"{path} is not a valid skills lockfile ({exc}); move it aside and reinstall the "
            "skills under the installed/ directory next to it"
        ) from None


class Lockfile:
    """The lockfile at ``path`` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> LockState:
        """The current state (empty when there is no lockfile yet)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return LockState()
        except OSError as exc:
            raise LockfileError(f"{self.path} cannot be read: {exc}") from None
        return _decode(text, self.path)

    def write(self, state: LockState) -> None:
        """Replace the lockfile with ``state`` atomically (call inside a transaction)."""
        data = _encode(state)
        try:
            fd, tmp = tempfile.mkstemp(prefix=".skills.lock.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise LockfileError(f"{self.path} cannot be written: {exc}") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[LockState]:
        """Hold the lockfile's guard; yields the state read under it (write it to commit)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            guard = os.open(
                self.path.with_name(self.path.name + ".guard"), os.O_RDWR | os.O_CREAT, 0o600
            )
        except OSError as exc:
            raise LockfileError(
                f"{self.path.parent} cannot hold the skills lockfile: {exc}"
            ) from None
        try:
            fcntl.flock(guard, fcntl.LOCK_EX)
            yield self.read()
        finally:
            os.close(guard)
