"""``lemon webhooks list|show KEY|sweep``: the webhook ingress's reservations and receipts.

Works on the idempotency store the daemon uses, directly, so no Lemon process needs to be
running: ``$LEMON_HOME/store/idempotency.sqlite3`` (SQLite WAL: safe while the daemon runs), or
with ``[store] backend = "postgres"`` the PostgreSQL idempotency tables in ``[store] schema``
(shared by every daemon of the schema; each command is a transaction of its own). Keys are
shown as their hashes: the caller's raw key is never stored. ``show`` takes the caller's raw
key (hashed for each webhook the way the ingress hashes it; ``--webhook ID``: that webhook's
only), or a prefix of a hash from ``list``. Rows of webhook ``<id>#webhook-id`` are not
reservations: each binds a signed message's ``webhook-id`` to the key it first came with, for
the replay window (``lemon_webhooks.REPLAY_WINDOW_MS``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import typer

from lemon_cli._groups import command_group
from lemon_cli._home import require_home
from lemon_cli.errors import LemonCliError

if TYPE_CHECKING:  # imported when a command runs: `lemon --help` stays fast
    from lemon_core.idempotency import IdempotencyRecord, IdempotencyStore

__all__ = ["webhooks_app"]

webhooks_app = command_group("Inspect webhook reservations and receipts; sweep expired ones.")

MIN_PREFIX: Final = 6
_SHOWN_HASH: Final = 12
_JSON_VERSION: Final = 1

T = TypeVar("T")
WebhookOption = Annotated[
    str | None, typer.Option("--webhook", help="the webhook id ([[webhooks.endpoints]] id)")
]


class _WebhooksFailure(LemonCliError):
    """A clear one-line failure: the message and the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class _Target:
    """Where the reservations are: ``where`` names it, ``exists`` is False for a SQLite file
    not created yet, ``open`` opens it."""

    where: str
    exists: bool
    open: Callable[[], Awaitable[IdempotencyStore]]


def _target() -> _Target:
    try:
        return _find_target()
    except _WebhooksFailure as failure:
        typer.echo(f"error: {failure}", err=True)
        raise typer.Exit(failure.code) from None


def _find_target() -> _Target:
    from lemon_core.config import ConfigError, lemon_home, load_config, redact_url
    from lemon_webhooks import idempotency_store_path

    home = lemon_home()
    require_home(home, create=False)
    try:
        config = load_config(home=home).config
    except ConfigError as exc:
        raise _WebhooksFailure(
            "the configuration is invalid: " + "; ".join(i.render() for i in exc.issues)
        ) from None
    if config.store.backend == "postgres":
        import os

        from lemon_core.config import resolve_store_dsn

        try:
            dsn = resolve_store_dsn(config.store, os.environ)
        except ConfigError as exc:
            raise _WebhooksFailure(exc.issues[0].render()) from None
        store_config = config.store

        async def open_postgres() -> IdempotencyStore:
            from lemon_infra import PostgresIdempotencyStore

            return await PostgresIdempotencyStore.open(
                dsn,
                schema=store_config.schema,
                timeout_s=store_config.timeout_s,
                min_connections=1,
                max_connections=1,
            )

        where = f"PostgreSQL {redact_url(dsn)} schema {store_config.schema}"
        return _Target(where=where, exists=True, open=open_postgres)
    path = idempotency_store_path(home)

    async def open_sqlite() -> IdempotencyStore:
        from lemon_infra import SQLiteIdempotencyStore

        return await SQLiteIdempotencyStore.open(path)

    return _Target(where=str(path), exists=path.exists(), open=open_sqlite)


async def _with_store(target: _Target, work: Callable[[IdempotencyStore], Awaitable[T]]) -> T:
    from lemon_core.idempotency import IdempotencyStoreError

    try:
        store = await target.open()
    except (IdempotencyStoreError, OSError) as exc:
        raise _WebhooksFailure(f"cannot open the idempotency store {target.where}: {exc}") from None
    try:
        return await work(store)
    except IdempotencyStoreError as exc:
        raise _WebhooksFailure(f"the idempotency store {target.where} failed: {exc}") from None
    finally:
        await store.close()


def _run(work: Callable[[], Coroutine[Any, Any, int]]) -> None:
    import asyncio

    try:
        code = asyncio.run(work())
    except _WebhooksFailure as failure:
        typer.echo(f"error: {failure}", err=True)
        raise typer.Exit(failure.code) from None
    raise typer.Exit(code)


def _when(ms: int) -> str:
    import datetime as dt

    if ms <= 0:
        return "never"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _now_ms() -> int:
    from lemon_core.store import system_clock_ms

    return system_clock_ms()


def _state(record: IdempotencyRecord, now_ms: int) -> str:
    """What a replay of this key would get, in words."""
    from lemon_webhooks import WEBHOOK_ID_GUARD_SUFFIX

    if record.expires_at_ms <= now_ms:
        return "expired (the next sweep removes it; the key may be used again)"
    if record.integration.endswith(WEBHOOK_ID_GUARD_SUFFIX):
        # not a reservation: a signed message's webhook-id bound to its Idempotency-Key
        return "webhook-id bound to its first key (a resend under another key is refused)"
    if record.run_id is None:
        return "ambiguous (legacy reservation, no run id)"
    if record.state == "accepted":
        return "accepted" if record.response is not None else "accepted (response missing)"
    if record.state == "pending":
        return "in flight" if record.in_flight(now_ms) else "outcome unknown (abandoned)"
    return "outcome unknown"


def _document(record: IdempotencyRecord, now_ms: int) -> dict[str, Any]:
    return {**record.to_dict(), "answer": _state(record, now_ms)}


@webhooks_app.command("list")
def list_records(
    webhook: WebhookOption = None,
    limit: Annotated[int, typer.Option(min=1, help="at most this many, newest first")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
) -> None:
    """List reservations, newest first: key hash, webhook, state, run id, created, expires."""
    import json

    target = _target()

    async def work() -> int:
        records: list[IdempotencyRecord] = []
        if target.exists:
            records = await _with_store(
                target, lambda s: s.records(limit=limit, integration=webhook)
            )
        now = _now_ms()
        if as_json:
            document = {"version": _JSON_VERSION, "store": target.where,
                        "records": [_document(r, now) for r in records]}  # fmt: skip
            typer.echo(json.dumps(document, indent=2))
            return 0
        if not records:
            where = target.where if target.exists else f"{target.where} (no store yet)"
            typer.echo(f"No webhook reservations in {where}.")
            return 0
        rows = [("KEY HASH", "WEBHOOK", "RUN ID", "CREATED (UTC)", "EXPIRES (UTC)", "STATE")] + [
            (r.key_hash[:_SHOWN_HASH], r.integration, r.run_id or "-", _when(r.created_at_ms),
             _when(r.expires_at_ms), _state(r, now))
            for r in records
        ]  # fmt: skip
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)]
            typer.echo("  ".join([*cells, row[5]]).rstrip())
        typer.echo(f"\n{len(records)} reservation(s). Details: lemon webhooks show KEY_HASH")
        return 0

    _run(work)


@webhooks_app.command()
def show(
    key: Annotated[
        str,
        typer.Argument(
            help="the caller's raw Idempotency-Key (hashed for each webhook as the ingress "
            f"hashes it; --webhook ID: for that one only), or a key hash prefix ({MIN_PREFIX}+ "
            "chars) from the list"
        ),
    ],
    webhook: WebhookOption = None,
) -> None:
    """Show one reservation and its stored response (as JSON)."""
    import json

    target = _target()

    async def work() -> int:
        from lemon_core.idempotency import InvalidIdempotencyKeyError, hash_idempotency_key

        prefix = key.strip().lower()
        wanted: str | None = None
        if webhook is not None:
            try:
                wanted = hash_idempotency_key(webhook, key)
            except InvalidIdempotencyKeyError as exc:
                raise _WebhooksFailure(str(exc), code=2) from None
        elif not target.exists and len(prefix) < MIN_PREFIX:
            raise _WebhooksFailure(_too_short(key), code=2)
        if not target.exists:
            raise _WebhooksFailure(f"no webhook reservations yet ({target.where} does not exist)")

        def raw_key_of(record: IdempotencyRecord) -> bool:
            """Whether ``key`` is the caller's raw key of ``record`` (hashed as the ingress
            hashes it for the record's webhook)."""
            try:
                return hash_idempotency_key(record.integration, key) == record.key_hash
            except InvalidIdempotencyKeyError:
                return False

        async def find(store: IdempotencyStore) -> list[IdempotencyRecord]:
            records = await store.records(limit=1_000_000)
            if wanted is not None:
                return [r for r in records if r.key_hash == wanted]
            by_key = [r for r in records if raw_key_of(r)]
            if by_key or len(prefix) < MIN_PREFIX:
                return by_key
            return [r for r in records if r.key_hash.startswith(prefix)]

        found = await _with_store(target, find)
        if not found and webhook is None and len(prefix) < MIN_PREFIX:
            raise _WebhooksFailure(_too_short(key), code=2)
        if not found:
            raise _WebhooksFailure("no reservation matches; `lemon webhooks list` shows them")
        if len(found) > 1:
            raise _WebhooksFailure(
                f"{len(found)} reservations match {key!r}; give more of the hash, or the "
                "webhook with --webhook ID",
                code=2,
            )
        typer.echo(json.dumps(_document(found[0], _now_ms()), indent=2))
        return 0

    _run(work)


def _too_short(key: str) -> str:
    return (
        f"no reservation has the key {key!r}, and as a key hash prefix it is too short: give "
        f"at least {MIN_PREFIX} characters of a hash from `lemon webhooks list`"
    )


@webhooks_app.command()
def sweep() -> None:
    """Remove expired reservations now (responses first, then fences, in one transaction)."""
    target = _target()

    async def work() -> int:
        if not target.exists:
            typer.echo(
                f"No webhook reservations in {target.where} (no store yet); nothing to sweep."
            )
            return 0
        report = await _with_store(target, lambda s: s.sweep(now_ms=_now_ms()))
        typer.echo(
            f"Removed {report.fences_removed} expired reservation(s) and "
            f"{report.responses_removed} stored response(s); swept up to "
            f"{_when(report.watermark_ms)} UTC."
        )
        return 0

    _run(work)
