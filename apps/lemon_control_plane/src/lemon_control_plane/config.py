"""The control plane's configuration: where it listens, who may connect, how runs start.

Every bind requires a token: on loopback (127.0.0.0/8, ``::1``, ``localhost``) the home's local
token is enough (:mod:`lemon_control_plane.local_token`: every account of the machine reaches a
loopback port, only the owner can read that file); any other bind refuses to start unless
tokens are configured or stored (:meth:`ControlPlaneConfig.check`). ``local_auth=False`` is the
explicit opt-out of the first rule (a loopback bind with no token then lets every local account
in, as admin: only for a single-user machine). Tokens are kept only as SHA-256 hashes; the
token itself never reaches a log or a frame. ``tls_cert`` / ``tls_key`` serve HTTPS and WSS.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from lemon_control_plane.errors import ControlPlaneConfigError

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "PORT_ENV",
    "TOKEN_ENV",
    "ControlPlaneConfig",
    "check_tls",
    "hash_token",
    "is_loopback_host",
]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 4040
#: The environment variable that overrides the default port (the terminal client reads it too).
PORT_ENV: Final = "LEMON_CONTROL_PLANE_PORT"
#: The environment variable holding a token connections must present (hashed at start).
TOKEN_ENV: Final = "LEMON_CONTROL_PLANE_TOKEN"
_MIB: Final = 1024 * 1024
#: The admission settings :meth:`ControlPlaneConfig.from_settings` takes as they are.
_ADMISSION_SETTINGS: Final = (
    "connect_timeout_s",
    "header_timeout_s",
    "max_connections",
    "max_connections_per_client",
    "ws_ping_interval_s",
    "ws_ping_timeout_s",
)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest a token is stored and compared as."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_tls(cert: str | None, key: str | None) -> None:
    """Raise :class:`ControlPlaneConfigError` unless ``cert`` and ``key`` are both unset, or
    both name a readable file."""
    if (cert is None) != (key is None):
        raise ControlPlaneConfigError(
            "TLS needs both tls_cert and tls_key (a PEM certificate and its private key)"
        )
    for name, value in (("tls_cert", cert), ("tls_key", key)):
        if value is None:
            continue
        path = Path(value)
        if not path.is_file():
            raise ControlPlaneConfigError(f"{name} {value!r} is not a file")
        if not os.access(path, os.R_OK):
            raise ControlPlaneConfigError(f"{name} {value!r} cannot be read by this account")


def _port(value: object, source: str) -> int:
    try:
        port = int(str(value))
    except ValueError:
        raise ControlPlaneConfigError(
            f"{source}: the port must be a number, got {value!r}"
        ) from None
    if not 0 <= port <= 65535:
        raise ControlPlaneConfigError(f"{source}: the port must be in 0..65535, got {port}")
    return port


@dataclass(frozen=True, kw_only=True, slots=True)
class ControlPlaneConfig:
    """Where and how the control plane serves. ``port=0`` picks a free port.

    ``token_hashes``: SHA-256 hex digests of the accepted tokens (empty: no token; allowed on a
    loopback bind only). ``cwd``: the working directory of runs started over the wire (``None``:
    the directory the daemon started in). ``require_approval``: tools a wire run must ask
    before each call. The bounds are the seed's: 256 entries and 1 MiB per connection event.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token_hashes: frozenset[str] = frozenset()
    cwd: str | None = None
    require_approval: frozenset[str] = frozenset({"bash", "edit", "write"})
    agent_id: str = "default"
    max_payload: int = _MIB
    connection_queue: int = 256
    max_sessions: int = 256
    max_requests_in_flight: int = 16
    tick_interval_ms: int = 1000
    submit_timeout_s: float = 10.0
    shutdown_grace_s: float = 5.0
    extra_origins: frozenset[str] = field(default_factory=frozenset)
    token_file: str | None = None
    """The token store (:class:`~lemon_control_plane.tokens.TokenStore`), re-read on change."""
    token_check_interval_s: float = 1.0
    default_model: str | None = None
    """The runtime's default model (``provider:model``), shown as the session's model."""
    log_file: str | None = None
    """The daemon's log (``logs.tail`` reads its end)."""
    # -- admission: who gets a socket, and for how long (see the README's "Limits") ----------
    connect_timeout_s: float = 10.0
    """A WebSocket that has not completed ``connect`` this long after its upgrade is closed
    (1008)."""
    header_timeout_s: float = 10.0
    """An HTTP request whose headers are not complete this long after the connection opened
    (or after the previous response on a keep-alive connection) is answered 408 and closed."""
    max_connections: int = 1024
    """WebSockets open at once; the next upgrade is refused with HTTP 503. The same cap holds
    for HTTP connections still waiting for their request's headers (then 503 and close)."""
    max_connections_per_client: int = 256
    """WebSockets open at once from one client address; the next is refused with HTTP 429.
    The same cap holds per address for HTTP connections waiting for their headers."""
    ws_ping_interval_s: float | None = 20.0
    """How often the server pings each WebSocket (``None``: never)."""
    ws_ping_timeout_s: float | None = 20.0
    """A WebSocket that has not answered a ping this long after it is closed (1011)."""
    local_auth: bool = True
    """Require the local token on every bind (``False``: a loopback bind with no configured
    or stored token admits every local account; unsafe on a machine with other accounts)."""
    local_token_file: str | None = None
    """Where the local token lives (``None``: one made in memory for this server's life)."""
    tls_cert: str | None = None
    """PEM certificate (chain) to serve HTTPS/WSS with; needs ``tls_key``."""
    tls_key: str | None = None
    """PEM private key of ``tls_cert``."""
    auth_failures: int = 20
    """Failed authentications (``connect``, page sign-in) allowed per client address per
    ``auth_window_s``; beyond them that address is refused until the window passes."""
    auth_window_s: float = 60.0
    auth_addresses: int = 4096
    """Client addresses whose failures are remembered (least recently failed forgotten)."""
    web_sessions: int = 1024
    """Browser sign-ins kept (the oldest is signed out beyond)."""
    web_session_ttl_s: float = 12 * 3600.0
    login_link_ttl_s: float = 120.0
    """How long a one-time sign-in link (``lemon web``) can be used."""

    @property
    def tls(self) -> bool:
        """Whether this server speaks TLS (HTTPS/WSS)."""
        return self.tls_cert is not None

    def check(self, *, stored_tokens: int = 0) -> None:
        """Raise :class:`ControlPlaneConfigError` for a configuration that must not start
        (``stored_tokens``: how many active tokens the token store holds)."""
        _port(self.port, "control plane")
        if not is_loopback_host(self.host) and not self.token_hashes and not stored_tokens:
            raise ControlPlaneConfigError(
                f"refusing to listen on {self.host!r} without a token: a non-loopback bind "
                f"needs one (set {TOKEN_ENV}, add one to the token store, or bind to "
                f"{DEFAULT_HOST})"
            )
        for name in (
            "max_payload",
            "connection_queue",
            "max_sessions",
            "max_requests_in_flight",
            "max_connections",
            "max_connections_per_client",
            "auth_failures",
            "auth_addresses",
            "web_sessions",
        ):
            if getattr(self, name) < 1:
                raise ControlPlaneConfigError(f"{name} must be at least 1")
        for name in ("connect_timeout_s", "header_timeout_s"):
            if not getattr(self, name) > 0:
                raise ControlPlaneConfigError(f"{name} must be more than 0 seconds")
        for name in ("ws_ping_interval_s", "ws_ping_timeout_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ControlPlaneConfigError(f"{name} must be more than 0 seconds, or None")
        check_tls(self.tls_cert, self.tls_key)

    def accepts_token(self, token: object) -> bool:
        """Whether ``token`` is one of the configured tokens (constant-time comparison)."""
        if not isinstance(token, str) or not token:
            return False
        digest = hash_token(token)
        return any(hmac.compare_digest(digest, known) for known in self.token_hashes)

    @classmethod
    def from_settings(
        cls, settings: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> ControlPlaneConfig:
        """Build from app settings (keys: host, port, cwd, tokens, token_hashes,
        require_approval, extra_origins) and the environment (:data:`PORT_ENV`,
        :data:`TOKEN_ENV`); settings win over the environment."""
        values = dict(settings or {})
        env = os.environ if environ is None else environ
        port: object = values.pop("port", None)
        if port is None:
            port = env.get(PORT_ENV) or DEFAULT_PORT
            source = PORT_ENV if env.get(PORT_ENV) else "control plane"
        else:
            source = "control plane"
        hashes = set(values.pop("token_hashes", ()) or ())
        tokens = list(values.pop("tokens", ()) or ())
        if env.get(TOKEN_ENV):
            tokens.append(env[TOKEN_ENV])
        hashes.update(hash_token(t) for t in tokens if t)
        kwargs: dict[str, Any] = {"port": _port(port, source), "token_hashes": frozenset(hashes)}
        if values.get("host"):
            kwargs["host"] = str(values.pop("host"))
        if values.get("cwd"):
            kwargs["cwd"] = str(values.pop("cwd"))
        if values.get("default_model"):
            kwargs["default_model"] = str(values.pop("default_model"))
        if values.get("token_file"):
            kwargs["token_file"] = str(values.pop("token_file"))
        if values.get("log_file"):
            kwargs["log_file"] = str(values.pop("log_file"))
        if values.get("local_token_file"):
            kwargs["local_token_file"] = str(values.pop("local_token_file"))
        if "local_auth" in values:
            local_auth = values.pop("local_auth")
            if not isinstance(local_auth, bool):
                raise ControlPlaneConfigError("local_auth is true or false")
            kwargs["local_auth"] = local_auth
        for name in ("tls_cert", "tls_key"):
            if values.get(name):
                kwargs[name] = str(values.pop(name))
        if "require_approval" in values:
            kwargs["require_approval"] = frozenset(values.pop("require_approval"))
        if values.get("extra_origins"):
            origins = values.pop("extra_origins")
            if isinstance(origins, str) or not all(isinstance(o, str) for o in origins):
                raise ControlPlaneConfigError(
                    "extra_origins is a list of origins such as 'http://localhost:5173'"
                )
            kwargs["extra_origins"] = frozenset(o.rstrip("/") for o in origins)
        for name in (
            "shutdown_grace_s",
            "connection_queue",
            "max_sessions",
            "token_check_interval_s",
            *_ADMISSION_SETTINGS,
            "auth_failures",
            "auth_window_s",
            "auth_addresses",
            "web_sessions",
            "web_session_ttl_s",
            "login_link_ttl_s",
        ):
            if name in values:
                kwargs[name] = values.pop(name)
        return cls(**kwargs)
