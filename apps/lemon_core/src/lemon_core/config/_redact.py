"""What of a configuration may be shown: secrets replaced, everything else as it is.

:func:`redact_config` is the one form of the configuration that leaves the process (``lemon
config show``, the control plane's ``config.get``). It hides:

- any string under a key that names a secret (``password``, ``token``, ``api_key``...), except
  the keys that name the *variable* holding one (``*_env``: ``api_key_env = "OPENAI_API_KEY"``);
- in every string: a URL's whole userinfo (``postgresql://***@db/lemon``: the user name of a
  URL can be a token too), the values of secret-named query parameters (``?sslpassword=***``),
  the ``password=`` of a keyword DSN (``host=db password=***``), and credential-shaped words
  (``sk-...``, ``ghp_...``, ``lcp_...``: :func:`redact_text`).

What it does not promise: a secret with no recognisable name or shape (a password in a free-text
system prompt) is shown as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["REDACTED", "redact_config", "redact_text"]

#: What a whole secret value is replaced with.
REDACTED: Final = "[redacted]"
_HIDDEN: Final = "***"
_SECRET_KEY: Final = re.compile(r"(api_?key|token|secret|password|passwd|credential)", re.I)
_SECRET_VALUE: Final = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}|lcp_[A-Za-z0-9_\-]{8,})"
)
# scheme://userinfo@: everything from "//" to the last "@" before the path (a password
# written with a raw "@" in it is hidden whole, as urlsplit would read it).
_USERINFO: Final = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/?#\s]*@)")
_QUERY_SECRET: Final = re.compile(
    r"(?P<key>[?&;](?:[A-Za-z0-9_.\-]*(?:api_?key|token|secret|password|passwd|credential)"
    r"[A-Za-z0-9_.\-]*)=)(?P<value>[^&#\s;]*)",
    re.I,
)
# libpq keyword/value DSNs: password=secret, password='quoted secret'.
_KEYWORD_SECRET: Final = re.compile(
    r"(?P<key>\b(?:password|passwd|sslpassword)\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|\S+)", re.I
)


def _secret_key(key: str) -> bool:
    return bool(key) and bool(_SECRET_KEY.search(key)) and not key.lower().endswith("env")


def redact_text(text: str) -> str:
    """``text`` with URL userinfo, secret query parameters, keyword-DSN passwords and
    credential-shaped words hidden (see the module docstring)."""
    text = _USERINFO.sub(lambda m: m["scheme"] + _HIDDEN + "@", text)
    text = _QUERY_SECRET.sub(lambda m: m["key"] + _HIDDEN, text)
    text = _KEYWORD_SECRET.sub(lambda m: m["key"] + _HIDDEN, text)
    return _SECRET_VALUE.sub(REDACTED, text)


def redact_config(value: Any, key: str = "") -> Any:
    """``value`` (JSON builtins: what ``msgspec.to_builtins`` gives of a config) with its
    secrets hidden (see the module docstring); ``key`` is the name it was found under."""
    if isinstance(value, Mapping):
        return {str(k): redact_config(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_config(v, key) for v in value]
    if isinstance(value, str):
        if value and _secret_key(key):
            return REDACTED
        return redact_text(value)
    return value
