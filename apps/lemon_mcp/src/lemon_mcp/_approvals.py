"""Approvals of project-defined servers: ``$LEMON_HOME/mcp/approvals.json``.

A server any key of which a project's ``.lemon/config.toml`` sets is a *project server*: it
comes with the code being worked on, so it does not start until the person approves it with
``lemon mcp approve NAME`` (run in that project). The approval records the project file and a
hash of the server's merged definition (:func:`~lemon_mcp._section.definition_hash`): any change
to the definition lapses it. The file lives in the home only, so a project cannot approve itself.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from lemon_core.config import find_project_config

__all__ = ["ProjectApprovals", "project_server_names"]


def project_server_names(cwd: Path, home: Path) -> tuple[Path | None, frozenset[str]]:
    """The project config file for ``cwd`` and the server names it sets keys of."""
    project = find_project_config(cwd, home)
    if project is None:
        return None, frozenset()
    try:
        raw = tomllib.loads(project.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return project, frozenset()
    servers = raw.get("mcp", {}).get("servers", {}) if isinstance(raw.get("mcp"), dict) else {}
    return project, frozenset(servers) if isinstance(servers, dict) else frozenset()


class ProjectApprovals:
    """The approved project servers, by project file and server name."""

    def __init__(self, home: Path) -> None:
        self.path = home / "mcp" / "approvals.json"

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            str(k): {str(n): str(h) for n, h in v.items()}
            for k, v in data.items()
            if isinstance(v, dict)
        }

    def _write(self, data: dict[str, dict[str, str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)

    def approved(self, project: Path, name: str, digest: str) -> bool:
        return self._read().get(str(project.resolve()), {}).get(name) == digest

    def approve(self, project: Path, name: str, digest: str) -> None:
        data = self._read()
        data.setdefault(str(project.resolve()), {})[name] = digest
        self._write(data)

    def revoke(self, project: Path, name: str) -> bool:
        data = self._read()
        entry = data.get(str(project.resolve()), {})
        if name not in entry:
            return False
        del entry[name]
        if not entry:
            data.pop(str(project.resolve()), None)
        self._write(data)
        return True
