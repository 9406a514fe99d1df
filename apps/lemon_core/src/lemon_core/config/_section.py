"""A config section an app owns: the record type of its ``[section]`` and its rules.

An app declares its section in its own package (a :class:`Section` subclass) and names it on
its ``AppSpec`` (``sections=SECTIONS``, ``{"gateway": GatewayConfig}``) and in the ``lemon.config``
entry point group (a ``SECTIONS`` mapping in the section's module). The loader assembles the
schema from the sections it is given (:func:`installed_sections`: those of the installed apps,
from the ``lemon.config`` entry points, which import no app's runtime code), so ``lemon config
validate`` checks every key of every section and an unknown section is still an error. What a
section knows about itself sits on its class:

* ``deprecated``: keys still read under an old spelling, ``(old section, old key) -> new key``
  (of this section), checked under their old names by ``deprecated_schema`` and moved here;
* ``home_only``: keys (dotted, within the section) only ``$LEMON_HOME/config.toml`` may set,
  because they widen what tools reach;
* ``hints``: the hint for a bad value of a key (full dotted key, ``[]`` for an array entry);
* ``legacy_hint``: what the section held in other Lemon versions (said with an unknown key);
* ``env_keys``: environment variables setting a key (``LEMON_MAX_CONCURRENT_RUNS``);
* :meth:`Section.check`: cross-key checks once the merged section is built;
* :meth:`Section.secret_env_names`: the variables the section names as holding a secret.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from lemon_core.config._issues import ConfigIssue
from lemon_core.errors import LemonCoreError

__all__ = [
    "APPS_ENTRY_POINT_GROUP",
    "SECTIONS_ENTRY_POINT_GROUP",
    "CheckContext",
    "Section",
    "installed_sections",
]

#: Where apps publish their AppSpec (the runtime boots them; the loader reads their sections).
APPS_ENTRY_POINT_GROUP = "lemon.apps"
#: Where the apps name their config sections (module attributes, light to import).
SECTIONS_ENTRY_POINT_GROUP = "lemon.config"


class Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every config section: frozen, keyword-only, unknown keys rejected; every field
    has a default so a partial file is valid on its own."""

    deprecated: ClassVar[Mapping[tuple[str, str], str]] = {}
    deprecated_schema: ClassVar[type[msgspec.Struct] | None] = None
    home_only: ClassVar[tuple[str, ...]] = ()
    hints: ClassVar[Mapping[str, str]] = {}
    legacy_hint: ClassVar[str] = ""
    env_keys: ClassVar[Mapping[str, str]] = {}

    def check(self, name: str, ctx: CheckContext) -> Iterable[ConfigIssue]:
        """Problems of the merged section ``[name]`` no single key shows (none by default)."""
        return ()

    def secret_env_names(self) -> Iterable[str | None]:
        """The variables this section names as holding a secret (none by default)."""
        return ()


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckContext:
    """What a :meth:`Section.check` may use: the home and where each key was set."""

    home: Path
    origin: Callable[[str], str]
    """The file (or ``"environment"``) that set a dotted key last; ``"config"`` if none did."""

    def issue(self, key: str, message: str, hint: str = "") -> ConfigIssue:
        """An issue of the dotted ``key``, its source being the layer that set it."""
        return ConfigIssue(source=self.origin(key), key=key, message=message, hint=hint)


def installed_sections(group: str = SECTIONS_ENTRY_POINT_GROUP) -> dict[str, type[Section]]:
    """The config sections of the installed apps, in the apps' name order: ``{section name:
    record type}`` (read once per process). Each app names its sections in the ``lemon.config``
    entry point group (``<app> = "<app>._section:SECTIONS"``, a mapping of section name to
    record type, the same its ``AppSpec`` declares: a test keeps the two equal), so the loader
    imports the apps' section modules, never their runtime code. Raise
    :class:`LemonCoreError` naming an entry point that cannot be loaded, one that is not such a
    mapping, or two apps declaring one section."""
    return dict(_installed(group))


@functools.cache
def _installed(group: str) -> dict[str, type[Section]]:
    sections: dict[str, type[Section]] = {}
    owners: dict[str, str] = {}
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            declared: Any = ep.load()
        except Exception as exc:
            raise LemonCoreError(
                f"the {group} entry point {ep.name!r} ({ep.value}) cannot be loaded: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(declared, Mapping) or not all(
            isinstance(k, str) and isinstance(v, type) and issubclass(v, Section)
            for k, v in declared.items()
        ):
            raise LemonCoreError(
                f"the {group} entry point {ep.name!r} ({ep.value}) is not a mapping of section "
                "names to lemon_core.config.Section types"
            )
        for name, cls in declared.items():
            if name in sections:
                raise LemonCoreError(
                    f"two apps declare the config section [{name}]: {owners[name]!r} and "
                    f"{ep.name!r}"
                )
            sections[name] = cls
            owners[name] = ep.name
    return sections
