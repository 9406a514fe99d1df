"""``[control_plane]``: the control plane's config section (declared here, named on its
AppSpec), and :class:`ControlPlaneOptions`, what a process sets besides the file."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec

from lemon_core.config import CheckContext, ConfigIssue, Section

__all__ = ["ControlPlaneOptions", "ControlPlaneSection"]

_Timeout = Annotated[float, msgspec.Meta(gt=0, le=3600)]
_Bound = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]


class ControlPlaneSection(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[control_plane]``: who may drive the daemon's control plane, and over what (the
    server's own, fuller record is :class:`~lemon_control_plane.ControlPlaneConfig`).

    ``local_auth = false`` lets a loopback daemon with no configured token admit every account
    of the machine as admin (unsafe wherever there is another account); by default even a
    loopback daemon requires a token, the owner's being the home's local token.
    ``tls_cert`` / ``tls_key``: PEM files (a relative path is under ``$LEMON_HOME``) to serve
    HTTPS and WSS with; both or neither, each a readable file (:meth:`check`). The admission
    bounds (``connect_timeout_s``, ``header_timeout_s``, ``max_connections``,
    ``max_connections_per_client``; unset: the server's defaults, 10 s, 10 s, 1024, 256) are
    described in the README, "Limits"."""

    local_auth: bool = True
    tls_cert: str | None = None
    tls_key: str | None = None
    connect_timeout_s: _Timeout | None = None
    header_timeout_s: _Timeout | None = None
    max_connections: _Bound | None = None
    max_connections_per_client: _Bound | None = None

    def admission(self) -> dict[str, float | int]:
        """The admission bounds this file sets (the server keeps its defaults for the rest)."""
        names = (
            "connect_timeout_s",
            "header_timeout_s",
            "max_connections",
            "max_connections_per_client",
        )
        return {n: v for n in names if (v := getattr(self, n)) is not None}

    def tls_paths(self, home: Path) -> tuple[Path, Path] | None:
        """The certificate and key files (relative ones under ``home``), or ``None``."""
        if self.tls_cert is None or self.tls_key is None:
            return None
        cert, key = (Path(p).expanduser() for p in (self.tls_cert, self.tls_key))
        return (
            cert if cert.is_absolute() else home / cert,
            key if key.is_absolute() else home / key,
        )

    def check(self, name: str, ctx: CheckContext) -> Iterable[ConfigIssue]:
        """TLS files both or neither, and each one a readable file."""
        issues: list[ConfigIssue] = []
        if (self.tls_cert is None) != (self.tls_key is None):
            key = f"{name}.tls_key" if self.tls_key is None else f"{name}.tls_cert"
            issues.append(
                ctx.issue(
                    key,
                    "TLS needs both tls_cert and tls_key",
                    "a PEM certificate (chain) and its private key, e.g. from your CA or "
                    "`openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem`",
                )
            )
        paths = self.tls_paths(ctx.home)
        for key_name, path in zip(("tls_cert", "tls_key"), paths or (), strict=False):
            if not path.is_file() or not os.access(path, os.R_OK):
                issues.append(
                    ctx.issue(
                        f"{name}.{key_name}",
                        f"{path} is not a readable file",
                        "a relative path is under $LEMON_HOME",
                    )
                )
        return issues


@dataclass(frozen=True, kw_only=True, slots=True)
class ControlPlaneOptions:
    """What a process (``lemon serve``, ``lemon chat``, tests) sets for its control plane
    besides the config file: where it listens and where runs start. ``settings`` are further
    :meth:`ControlPlaneConfig.from_settings` keys (tokens, bounds; checked there)."""

    host: str | None = None
    port: int | None = None
    cwd: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        out = dict(self.settings)
        for name in ("host", "port", "cwd"):
            if (value := getattr(self, name)) is not None:
                out[name] = value
        return out


#: The config sections this app owns, by name: what the ``lemon.config`` entry point names (the
#: loader reads it without importing the rest of the app), the same as its ``AppSpec`` declares.
SECTIONS: Final[Mapping[str, type[Section]]] = {"control_plane": ControlPlaneSection}
