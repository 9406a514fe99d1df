"""The secrets file: ``$LEMON_HOME/secrets.env`` (``NAME=value`` lines, mode 0600).

``lemon setup`` writes it; the coding executor and the terminal's provider resolution read it
(the environment wins over it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from lemon_core.home import Home

__all__ = ["SECRETS_FILENAME", "read_secrets"]

#: The secrets file under ``$LEMON_HOME`` (its name; :attr:`lemon_core.Home.secrets` is the path).
SECRETS_FILENAME: Final = Home(root=Path()).secrets.name


def read_secrets(home: Path) -> dict[str, str]:
    """The ``NAME=value`` lines of ``home / secrets.env`` (missing file: empty).

    Blank lines, ``#`` comments and lines without ``=`` are skipped; names and values are
    stripped.
    """
    path = Home(root=home).secrets
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() and not name.lstrip().startswith("#"):
            out[name.strip()] = value.strip()
    return out
