"""``[file_access]`` and ``[tools]``: the coding agent's config sections (declared here, named
on its AppSpec)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Final

import msgspec

from coding_agent._subagents_section import SubagentsConfig
from lemon_core.config import Section

__all__ = ["BashToolConfig", "FileAccessConfig", "ToolsConfig"]

_EnvName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class FileAccessConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[file_access]``: which files the coding tools refuse as secrets.

    ``secret_patterns`` are added to the built-in list (glob patterns matched against a file's
    name, or, when they hold a ``/``, against the end of its path; ``~`` or ``/`` at the start:
    the whole path). ``allow_secrets`` (same syntax) exempts files from the refusal; only
    ``$LEMON_HOME/config.toml`` may set it, never a project's config.
    """

    home_only: ClassVar[tuple[str, ...]] = ("allow_secrets",)

    secret_patterns: tuple[str, ...] = ()
    allow_secrets: tuple[str, ...] = ()


class BashToolConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[tools.bash]``: the coding agent's shell tool.

    The coding tools run with the daemon's environment less its secrets (the variables the
    configuration names, those of ``$LEMON_HOME/secrets.env``, and every ``*_KEY``,
    ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``-like name: the README has the list).
    ``pass_env`` names variables let through all the same (``GITHUB_TOKEN`` for ``gh``); it
    widens what a command sees, so only ``$LEMON_HOME/config.toml`` may set it.
    """

    pass_env: tuple[_EnvName, ...] = ()


class ToolsConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[tools]``: settings of the coding tools. Which tools run, ask or are refused is the
    tool *policy*, in ``[profiles.<agent_id>.tool_policy]``."""

    home_only: ClassVar[tuple[str, ...]] = ("bash.pass_env",)
    hints: ClassVar[Mapping[str, str]] = {
        "tools.bash.pass_env": "the NAME of an environment variable, e.g. GITHUB_TOKEN",
    }
    legacy_hint: ClassVar[str] = (
        "tool policy lives in [profiles.<agent_id>.tool_policy]; [tools] holds only [tools.bash]"
    )

    bash: BashToolConfig = BashToolConfig()


#: The config sections this app owns, by name: what the ``lemon.config`` entry point names (the
#: loader reads it without importing the rest of the app), the same as its ``AppSpec`` declares.
SECTIONS: Final[Mapping[str, type[Section]]] = {
    "file_access": FileAccessConfig,
    "tools": ToolsConfig,
    "subagents": SubagentsConfig,
}
