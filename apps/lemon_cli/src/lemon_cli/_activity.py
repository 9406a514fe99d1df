"""What ``lemon daemon logs`` shows besides the daemon's log file: one line per finished run,
webhook delivery and provider error of this home, read from the stores the daemon writes (the
run history of ``[store]`` and the webhook ingress's idempotency store), oldest first, with
secrets hidden (:func:`lemon_core.config.redact_text`).

Nothing is created: a store that does not exist yet has no lines. The stores are opened the
way ``lemon webhooks`` and ``lemon sessions`` open them, beside the running daemon (SQLite WAL,
or the shared PostgreSQL schema).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from lemon_core.idempotency import IdempotencyRecord, IdempotencyStore
    from lemon_core.store import RunSummary, Store

__all__ = ["Activity", "ActivityLine"]

#: The error codes of a provider's failure (a ``provider-error`` line, not a ``run`` one).
_PROVIDER_CODES: Final = frozenset(
    {
        "provider_auth",
        "rate_limited",
        "context_overflow",
        "bad_request",
        "provider_error",
        "connection",
        "model_unavailable",
    }
)
_ERROR_CHARS: Final = 200
_SHOWN_HASH: Final = 12
_SPACES: Final = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class ActivityLine:
    at_ms: int
    text: str


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _one_line(text: str) -> str:
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= _ERROR_CHARS else flat[: _ERROR_CHARS - 1] + "…"


def run_line(run: RunSummary) -> ActivityLine:
    """A finished run: ``run`` (ok or failed with its code), or ``provider-error``."""
    from lemon_core.config import redact_text

    at = run.finished_at_ms or run.started_at_ms
    model = f" model {run.usage.model}" if run.usage is not None and run.usage.model else ""
    took = f" {run.duration_ms / 1000:.1f}s" if run.duration_ms else ""
    where = f"session {run.session_key}{took}{model}"
    # a retried run: each attempt is a line of its own, under the run as submitted
    name = f"{run.retry_of} attempt {run.run_id}" if run.retry_of else run.run_id
    if run.ok:
        text = f"run {name} ok, {where}"
    else:
        code = str(run.error_code) if run.error_code is not None else "failed"
        kind = "provider-error" if code in _PROVIDER_CODES else "run"
        error = _one_line(run.error or "").removeprefix(f"{code}:").strip()
        why = f": {error}" if error else ""
        verb = "" if kind == "provider-error" else "failed "
        text = f"{kind} {name} {verb}{code}{why} ({where})"
    return ActivityLine(at, f"{_when(at)} {redact_text(text)}")


def webhook_line(record: IdempotencyRecord) -> ActivityLine:
    """A webhook delivery (its reservation): the webhook, the key's hash, the run, its state."""
    from lemon_core.config import redact_text

    state = {"accepted": "accepted", "pending": "in flight"}.get(record.state, record.state)
    run = f" -> run {record.run_id}" if record.run_id else ""
    text = f"webhook {record.integration} delivery {record.key_hash[:_SHOWN_HASH]}{run} ({state})"
    at = record.updated_at_ms or record.created_at_ms
    return ActivityLine(at, f"{_when(at)} {redact_text(text)}")


@dataclass
class Activity:
    """The home's stores, opened once; :meth:`new_lines` returns what was not returned yet."""

    runs: Store | None = None
    webhooks: IdempotencyStore | None = None
    problems: list[str] = field(default_factory=list)
    _seen: set[tuple[str, ...]] = field(default_factory=set)

    @classmethod
    async def open(cls, home: Path) -> Activity:
        """Open what exists of ``home``'s stores; what cannot be opened is a problem line."""
        import os

        from lemon_core.config import ConfigError, load_config, resolve_store_dsn
        from lemon_core.store import StoreError
        from lemon_runtime import open_configured_store, store_path

        activity = cls()
        try:
            config = load_config(home=home).config
        except ConfigError as exc:
            activity.problems.append(
                "runs and webhooks not shown: the configuration is invalid: "
                + "; ".join(i.render() for i in exc.issues)
            )
            return activity
        if config.store.backend != "memory" and (
            config.store.backend == "postgres" or store_path(home).exists()
        ):
            try:
                activity.runs = await open_configured_store(config, home)
            except (ConfigError, StoreError, OSError) as exc:
                activity.problems.append(f"runs not shown: the store cannot be opened: {exc}")
        try:
            if config.store.backend == "postgres":
                from lemon_infra import PostgresIdempotencyStore

                activity.webhooks = await PostgresIdempotencyStore.open(
                    resolve_store_dsn(config.store, os.environ),
                    schema=config.store.schema,
                    timeout_s=config.store.timeout_s,
                    min_connections=1,
                    max_connections=1,
                )
            else:
                from lemon_infra import SQLiteIdempotencyStore
                from lemon_webhooks import idempotency_store_path

                path = idempotency_store_path(home)
                if path.exists():
                    activity.webhooks = await SQLiteIdempotencyStore.open(path)
        except Exception as exc:  # any backend's failure: said, never fatal
            activity.problems.append(f"webhook deliveries not shown: {exc}")
        return activity

    async def new_lines(self, *, limit: int) -> list[ActivityLine]:
        """The newest ``limit`` runs and deliveries not returned before, oldest first."""
        from lemon_core.store import RunStore
        from lemon_webhooks import WEBHOOK_ID_GUARD_SUFFIX

        found: list[ActivityLine] = []
        if self.runs is not None:
            for run in await RunStore(self.runs).recent(limit=limit):
                if self._fresh(("run", run.run_id)):
                    found.append(run_line(run))
        if self.webhooks is not None:
            for record in await self.webhooks.records(limit=limit):
                if record.integration.endswith(WEBHOOK_ID_GUARD_SUFFIX):
                    continue  # a webhook-id binding, not a delivery
                if self._fresh(("webhook", record.integration, record.key_hash, record.state)):
                    found.append(webhook_line(record))
        found.sort(key=lambda line: line.at_ms)
        return found[-limit:]

    def _fresh(self, key: tuple[str, ...]) -> bool:
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    async def close(self) -> None:
        if self.runs is not None:
            await self.runs.close()
        if self.webhooks is not None:
            await self.webhooks.close()
