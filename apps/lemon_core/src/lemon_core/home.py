"""Where Lemon keeps its state: ``$LEMON_HOME`` resolved once, and every path below it.

``Home.from_env(environ)`` reads ``LEMON_HOME``: surrounding white space is stripped and a
leading ``~`` expanded; empty or unset means ``~/.lemon``. The value is not made absolute or
resolved (a relative ``LEMON_HOME`` stays relative to the working directory, as it always was),
and nothing is created: the properties only name paths.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["HOME_ENV", "Home"]

#: The environment variable naming Lemon's home directory.
HOME_ENV: Final = "LEMON_HOME"


@dataclass(frozen=True, kw_only=True, slots=True)
class Home:
    """One Lemon home directory and the layout of what lives in it."""

    root: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Home:
        """``$LEMON_HOME`` (stripped, ``~`` expanded) or ``~/.lemon``; ``environ`` defaults to
        ``os.environ``."""
        env = os.environ if environ is None else environ
        value = env.get(HOME_ENV, "").strip()
        return cls(root=Path(value).expanduser() if value else Path.home() / ".lemon")

    @property
    def config(self) -> Path:
        """The user's config file, ``config.toml``."""
        return self.root / "config.toml"

    @property
    def secrets(self) -> Path:
        """API keys and tokens kept as ``NAME=value`` lines, ``secrets.env`` (mode 0600)."""
        return self.root / "secrets.env"

    @property
    def store_dir(self) -> Path:
        """The default stores' directory, ``store/``."""
        return self.root / "store"

    @property
    def store(self) -> Path:
        """The default SQLite store, ``store/lemon.sqlite3``."""
        return self.store_dir / "lemon.sqlite3"

    @property
    def idempotency_store(self) -> Path:
        """The webhook idempotency keys, ``store/idempotency.sqlite3``."""
        return self.store_dir / "idempotency.sqlite3"

    @property
    def run_owners(self) -> Path:
        """The gateway's run-owner markers, ``store/run-owners/``."""
        return self.store_dir / "run-owners"

    @property
    def tui_history(self) -> Path:
        """What was typed in the terminal UI, ``tui/history.jsonl``."""
        return self.root / "tui" / "history.jsonl"

    @property
    def skills(self) -> Path:
        """Installed skills, ``skills/``."""
        return self.root / "skills"

    @property
    def control_plane(self) -> Path:
        """The control plane's state, ``control_plane/``."""
        return self.root / "control_plane"

    @property
    def tokens(self) -> Path:
        """Control-plane tokens, ``control_plane/tokens.json``."""
        return self.control_plane / "tokens.json"

    @property
    def daemon(self) -> Path:
        """The background daemon's lock, state file and log, ``daemon/``."""
        return self.root / "daemon"

    @property
    def logs(self) -> Path:
        """The daemon's log, ``daemon/daemon.log``."""
        return self.daemon / "daemon.log"

    @property
    def agent(self) -> Path:
        """The coding agent's state, ``agent/``."""
        return self.root / "agent"

    @property
    def sessions(self) -> Path:
        """The coding agent's session transcripts, ``agent/sessions/``."""
        return self.agent / "sessions"

    @property
    def workspace(self) -> Path:
        """The assistant's own files (``AGENTS.md``, ``SOUL.md``...), ``agent/workspace/``."""
        return self.agent / "workspace"
