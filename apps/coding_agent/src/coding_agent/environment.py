"""The environment the coding tools' processes get: the daemon's, less its secrets.

A daemon holds provider keys, ``LEMON_CONTROL_PLANE_TOKEN``, webhook secrets and store
passwords in its environment; a command the model runs (``bash``, one approval away) must not
read them with ``env``. :func:`tool_environment` removes:

* every variable the configuration names as holding a secret (:func:`config_secret_names`:
  ``api_key_env``, ``secret_env``, ``token_env``, ``webhook_secret_env``, ``dsn_env``,
  ``url_env``), and every name in ``$LEMON_HOME/secrets.env``, whatever it is called;
* every variable whose name looks like a secret (:data:`SECRET_ENV_PATTERNS`, case ignored:
  ``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ``FOO_SECRET``, ``PGPASSWORD``, ...).

``[tools.bash] pass_env`` (home config only) names variables let through all the same, with
the value the daemon read (the environment, else ``secrets.env``). Everything else (``PATH``,
``HOME``, ``LANG``, a proxy setting, ...) is kept, so commands behave as in the user's shell.

What this does not do: a secret under an innocent name the configuration does not mention
(``MY_CONFIG=sk-...``) is passed on; a command can still read files the user can (``bash``
needs an approval under the default policy).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from coding_agent._sections import ToolsConfig
from lemon_core.config import Config, read_secrets

__all__ = [
    "ALWAYS_SCRUBBED",
    "SECRET_ENV_PATTERNS",
    "config_secret_names",
    "is_secret_name",
    "tool_environment",
    "tool_environment_for",
]

SECRET_ENV_PATTERNS: Final[tuple[str, ...]] = (
    "*_KEY",
    "*_KEYS",
    "*_TOKEN",
    "*_TOKENS",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_CREDENTIALS",
    "*_DSN",
)
"""Variable names removed from the tools' environment (matched on the upper-cased name)."""

ALWAYS_SCRUBBED: Final[frozenset[str]] = frozenset(
    {"LEMON_CONTROL_PLANE_TOKEN", "LEMON_POSTGRES_DSN", "LEMON_REDIS_URL"}
)
"""Lemon's own secret variables, removed whatever the patterns say (``pass_env`` aside)."""


def config_secret_names(config: Config) -> frozenset[str]:
    """The variables ``config`` names as holding a secret (keys, tokens, DSNs, URLs)."""
    return config.secret_env_names()


def is_secret_name(name: str) -> bool:
    """Whether the variable ``name`` looks like it holds a secret (:data:`SECRET_ENV_PATTERNS`)."""
    upper = name.upper()
    return upper in ALWAYS_SCRUBBED or any(
        fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_ENV_PATTERNS
    )


def tool_environment(
    base: Mapping[str, str],
    *,
    secret_names: Iterable[str] = (),
    pass_env: Iterable[str] = (),
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``base`` (the daemon's environment) without ``secret_names`` and the variables whose
    name looks secret; then each ``pass_env`` name with its value in ``source`` (default
    ``base``) when it has one."""
    removed = frozenset(secret_names)
    out = {
        name: value
        for name, value in base.items()
        if name not in removed and not is_secret_name(name)
    }
    values = base if source is None else source
    for name in pass_env:
        value = values.get(name, base.get(name))
        if value is not None:
            out[name] = value
    return out


def tool_environment_for(
    config: Config, *, home: Path, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The tools' environment for a run under ``config``: this process's environment less the
    variables ``config`` names, those of ``home``'s ``secrets.env`` and the secret-looking
    ones, plus ``[tools.bash] pass_env`` with the values the daemon read (``environ``, default
    this process's environment, over ``secrets.env``). Blocking: it reads ``secrets.env``."""
    secrets = read_secrets(home)
    source = {**secrets, **(os.environ if environ is None else environ)}
    return tool_environment(
        os.environ,
        secret_names=config_secret_names(config) | secrets.keys(),
        pass_env=config.section(ToolsConfig).bash.pass_env,
        source=source,
    )
