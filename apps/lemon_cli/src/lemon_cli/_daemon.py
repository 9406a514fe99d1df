"""One daemon per ``$LEMON_HOME``: its lock, its state file and its log.

``lemon serve`` holds an exclusive lock on ``<home>/daemon/daemon.lock`` for its whole life (a
second one for the same home refuses to start and says where the first is), and writes
``<home>/daemon/daemon.json`` (pid, url, cwd, start time, and with TLS the certificate it
serves) once it listens; it removes the file when it stops. The home's clients reach an
``https://`` daemon trusting exactly that certificate (:func:`client_ssl`). ``lemon daemon
start`` runs ``lemon serve`` in the background with its output
in ``<home>/daemon/daemon.log``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from lemon_core.home import Home

if TYPE_CHECKING:
    import ssl

__all__ = [
    "DaemonLock",
    "DaemonState",
    "clear_state",
    "client_ssl",
    "daemon_dir",
    "daemon_summary",
    "is_alive",
    "log_path",
    "read_state",
    "state_path",
    "write_state",
]


def daemon_dir(home: Path) -> Path:
    return Home(root=home).daemon


@dataclass(frozen=True, kw_only=True, slots=True)
class DaemonState:
    pid: int
    url: str
    cwd: str
    started_at_ms: int
    tls_cert: str | None = None
    """The certificate an ``https://`` daemon serves (what its home's clients trust)."""

    @property
    def alive(self) -> bool:
        return is_alive(self.pid)


def is_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (an exited, unreaped one does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An exited process nobody reaped yet (a zombie) is not a daemon.
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def daemon_enabled() -> bool:
    """``False`` when ``LEMON_DAEMON`` (0, no, false, off) asks commands to ignore the daemon."""
    import os

    return os.environ.get("LEMON_DAEMON", "1").strip().lower() not in ("0", "no", "false", "off")


def running_daemon(home: Path) -> DaemonState | None:
    """``home``'s daemon when one is recorded, its process lives and it serves HTTP or HTTPS
    (and ``LEMON_DAEMON`` does not say to ignore it); else ``None``."""
    if not daemon_enabled():
        return None
    state = read_state(home)
    if state is None or not state.alive or not state.url.startswith(("http://", "https://")):
        return None
    return state


def ws_url_of(http_url: str) -> str:
    """The WebSocket URL of a daemon recorded as ``http(s)://HOST:PORT``."""
    return "ws" + http_url.removeprefix("http").rstrip("/") + "/ws"


def client_ssl(state: DaemonState) -> ssl.SSLContext | None:
    """How a client of this home trusts its ``https://`` daemon: exactly the certificate the
    daemon recorded (pinned: any server presenting it holds its key, so the name the daemon was
    reached by, ``0.0.0.0`` say, need not be in it); ``None`` for plain HTTP."""
    import ssl

    if not state.url.startswith("https://"):
        return None
    if state.tls_cert is None:
        return ssl.create_default_context()
    context = ssl.create_default_context(cafile=state.tls_cert)
    context.check_hostname = False  # pinned to one certificate: see the docstring
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # a CA-issued leaf, trusted alone
    return context


def _uptime(ms: int) -> str:
    seconds = max(0, ms // 1000)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def daemon_summary(home: Path, *, now_ms: int | None = None) -> str:
    """One line on ``home``'s daemon, for ``lemon status`` and ``lemon doctor``: ``running,
    pid P, URL, up 3m05s`` when its recorded process lives, else ``not running`` (how to
    start one; a record left by a daemon that died is said so)."""
    state = read_state(home)
    if state is None:
        return "not running (start one: lemon daemon start)"
    if not state.alive:
        return f"not running (pid {state.pid} is gone; its record remains): lemon daemon start"
    now = int(time.time() * 1000) if now_ms is None else now_ms
    up = f", up {_uptime(now - state.started_at_ms)}" if state.started_at_ms > 0 else ""
    return f"running, pid {state.pid}, {state.url}{up}"


def state_path(home: Path) -> Path:
    return daemon_dir(home) / "daemon.json"


def log_path(home: Path) -> Path:
    return daemon_dir(home) / "daemon.log"


def read_state(home: Path) -> DaemonState | None:
    """The recorded daemon of ``home`` (``None`` when none is recorded or the file is bad)."""
    import json

    try:
        data: Any = json.loads(state_path(home).read_text())
        cert = data.get("tls_cert")
        return DaemonState(
            pid=int(data["pid"]),
            url=str(data["url"]),
            cwd=str(data.get("cwd", "")),
            started_at_ms=int(data.get("started_at_ms", 0)),
            tls_cert=str(cert) if cert else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_state(home: Path, *, url: str, cwd: str, tls_cert: str | None = None) -> None:
    import json

    path = state_path(home)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "url": url,
                "cwd": cwd,
                "started_at_ms": int(time.time() * 1000),
                "tls_cert": tls_cert,
            }
        )
    )
    os.replace(tmp, path)


def clear_state(home: Path) -> None:
    state = read_state(home)
    if state is None or state.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            state_path(home).unlink()


class DaemonLock:
    """The exclusive lock of a home's daemon (released when the process ends, however)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._file: IO[str] | None = None

    def acquire(self) -> bool:
        """Take the lock; ``False`` when another process holds it."""
        folder = daemon_dir(self.home)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = (folder / "daemon.lock").open("a")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._file = handle
        return True

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None
