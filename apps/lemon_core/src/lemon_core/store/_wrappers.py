"""Typed store wrappers: RunStore (run history) and ChatStateStore (resume state).

Domains use these, never raw Store tables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import msgspec

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.events import ErrorCode, RunUsage
from lemon_core.execution import NATIVE_ENGINE, ResumeToken
from lemon_core.store.errors import StoreValueError
from lemon_core.store.protocol import Clock, Store

__all__ = [
    "DEFAULT_CHAT_STATE_TTL_MS",
    "ChatState",
    "ChatStateStore",
    "RunStore",
    "RunSummary",
    "SessionIndexEntry",
    "SessionIndexStore",
    "SessionSettingsRecord",
    "SessionSettingsStore",
]

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
#: Default chat-state time to live: 24 hours.
DEFAULT_CHAT_STATE_TTL_MS: Final = 24 * 60 * 60 * 1000
_SEP: Final = "\x1f"
_PREVIEW_CHARS: Final = 200
_NEWEST: Final = 10**16  # recency keys count down from here, so a key scan is newest first


class RunSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What is kept about a finished run (stored as its JSON encoding)."""

    run_id: str
    session_key: str
    ok: bool
    engine: str = NATIVE_ENGINE
    error: str | None = None
    answer: str = ""
    resume: ResumeToken | None = None
    started_at_ms: int = 0
    finished_at_ms: int = 0
    duration_ms: int = 0
    error_code: ErrorCode | None = None
    meta: dict[str, Any] = {}
    usage: RunUsage | None = None
    """Tokens, dollars and the model of the run, as the runtime reported them."""
    retry_of: str | None = None
    """Set on a retry attempt: the run as submitted (``run_id`` is the attempt's id)."""

    def to_dict(self) -> dict[str, Any]:
        """The stored (JSON-compatible) form."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        """Parse the stored form."""
        return msgspec.convert(data, cls)


class RunStore:
    """Finished runs by id, and per session in finish order."""

    RUNS: Final = "runs"
    HISTORY: Final = "run_history"
    RECENT: Final = "run_recent"

    def __init__(self, store: Store) -> None:
        self._store = store

    async def finalize(self, summary: RunSummary) -> None:
        """Record a finished run (by id and in its session's history).

        The run by id, its history row and its recent row are one ``put_many`` (all or
        nothing); the session index is updated after it, separately (it reads the previous
        entry first): a failure between the two leaves the run recorded and the index one
        run behind, never a partial run."""
        # The Store encodes records itself (msgspec): no intermediate dict.
        history_key = (
            f"{summary.session_key}{_SEP}{summary.finished_at_ms:016d}{_SEP}{summary.run_id}"
        )
        await self._store.put_many(
            [
                (self.RUNS, summary.run_id, summary, None),
                (self.HISTORY, history_key, summary, None),
                (self.RECENT, _recent_run_key(summary), summary, None),
            ]
        )
        await SessionIndexStore(self._store).record(summary)

    async def finalize_many(self, summaries: Sequence[RunSummary]) -> None:
        """Record several finished runs at once (a group commit): the same rows as
        :meth:`finalize` of each in order, written as one ``put_many`` for every run of the
        batch (all or nothing: no run of the batch is recorded if it fails), then the session
        index, one read and one write per session of the batch (:meth:`SessionIndexStore.
        record_many`). A failure between the two leaves every run recorded and the index
        behind, never a partial run."""
        if not summaries:
            return
        runs, history, recent = self.RUNS, self.HISTORY, self.RECENT
        entries: list[tuple[str, str, Any, int | None]] = []
        for summary in summaries:
            history_key = (
                f"{summary.session_key}{_SEP}{summary.finished_at_ms:016d}{_SEP}{summary.run_id}"
            )
            entries.append((runs, summary.run_id, summary, None))
            entries.append((history, history_key, summary, None))
            entries.append((recent, _recent_run_key(summary), summary, None))
        await self._store.put_many(entries)
        await SessionIndexStore(self._store).record_many(summaries)

    async def get(self, run_id: str) -> RunSummary | None:
        """The summary of a finished run, or None."""
        data = await self._store.get(self.RUNS, run_id)
        return None if data is None else RunSummary.from_dict(data)

    async def history(self, session_key: str, *, limit: int = 50) -> list[RunSummary]:
        """The session's most recent finished runs, newest first."""
        rows = await self._store.scan(
            self.HISTORY, prefix=f"{session_key}{_SEP}", limit=limit, reverse=True
        )
        return [RunSummary.from_dict(v) for _, v in rows]

    async def recent(self, *, limit: int = 50, since_ms: int | None = None) -> list[RunSummary]:
        """The most recently finished runs of every session, newest first (at most ``limit``;
        with ``since_ms`` only those finished at or after it). The table's keys sort newest
        first, so one scan of ``limit`` rows holds every run since ``since_ms`` that fits."""
        rows = await self._store.scan(self.RECENT, limit=max(1, limit))
        found = [RunSummary.from_dict(v) for _, v in rows]
        if since_ms is not None:
            found = [r for r in found if r.finished_at_ms >= since_ms]
        return found

    async def forget_session(self, session_key: str) -> int:
        """Delete the session's run history (and its runs by id); returns how many runs."""
        removed = 0
        while True:
            rows = await self._store.scan(self.HISTORY, prefix=f"{session_key}{_SEP}", limit=500)
            if not rows:
                return removed
            for key, value in rows:
                await self._store.delete(self.HISTORY, key)
                run_id = value.get("run_id") if isinstance(value, dict) else None
                if isinstance(run_id, str) and run_id:
                    await self._store.delete(self.RUNS, run_id)
                    with contextlib.suppress(StoreValueError, msgspec.ValidationError):
                        summary = RunSummary.from_dict(value)
                        await self._store.delete(self.RECENT, _recent_run_key(summary))
                removed += 1


class SessionIndexEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One session as the session list shows it: kept up to date by each finished run."""

    session_key: str
    runs: int
    last_run_id: str
    last_ok: bool
    last_error_code: ErrorCode | None = None
    last_answer_preview: str = ""
    updated_at_ms: int = 0
    native_session_id: str | None = None
    model: str | None = None
    """The session's own model (:class:`SessionSettingsStore`), mirrored for the listing."""
    label: str | None = None
    """The session's label (:class:`SessionSettingsStore`), mirrored for the listing."""
    settings_mirrored: bool = False
    """Whether ``model`` and ``label`` mirror the settings (``False`` on an entry written
    before the mirror existed: the listing reads the settings for it)."""


class SessionIndexStore:
    """The session index: one row per session and a recency table whose rows hold the whole
    entry, so listing the most recent sessions is one scan of ``limit`` rows: never the run
    history, never a read per session.

    Written by :class:`RunStore.finalize` (the writer of run history), in the same order, and
    by :class:`SessionSettingsStore` (the mirrored ``model`` and ``label``). A settings change
    racing the session's finalize (another client patching while a run ends) can leave the
    listing's mirror one change behind until the next run or patch of the session; the
    settings themselves are never lost.
    """

    INDEX: Final = "session_index"
    RECENT: Final = "session_recent"

    def __init__(self, store: Store) -> None:
        self._store = store

    async def record(self, summary: RunSummary) -> SessionIndexEntry:
        """Count ``summary`` in its session's entry and move the session to the front. A
        retry attempt (``retry_of``) of the run the entry counted last is the same run: it
        replaces that run's figures and is not counted again."""
        previous = await self.get(summary.session_key)
        entry = await self._next(previous, summary)
        await self._write(entry, previous)
        return entry

    async def record_many(self, summaries: Sequence[RunSummary]) -> list[SessionIndexEntry]:
        """:meth:`record` of each summary in order, with one read of each session's entry
        and one write for the whole batch (every session's entry and recency row in one
        ``put_many``); the sessions' old recency rows are deleted after. The entries written
        (one per session, in the order the sessions first appear) are returned."""
        by_session: dict[str, list[RunSummary]] = {}
        for summary in summaries:
            by_session.setdefault(summary.session_key, []).append(summary)
        written: list[tuple[SessionIndexEntry, SessionIndexEntry | None]] = []
        for session_key, runs in by_session.items():
            previous = await self.get(session_key)
            entry: SessionIndexEntry | None = previous
            for summary in runs:  # folded as record() would, one run after the other
                entry = await self._next(entry, summary)
            assert entry is not None  # runs is never empty
            written.append((entry, previous))
        if not written:
            return []
        batch: list[tuple[str, str, Any, int | None]] = []
        for entry, _ in written:
            batch.append((self.INDEX, entry.session_key, entry, None))
            batch.append((self.RECENT, _recent_key(entry), entry, None))
        await self._store.put_many(batch)
        for entry, previous in written:
            if previous is not None and previous.updated_at_ms != entry.updated_at_ms:
                await self._store.delete(self.RECENT, _recent_key(previous))
        return [entry for entry, _ in written]

    async def _next(
        self, previous: SessionIndexEntry | None, summary: RunSummary
    ) -> SessionIndexEntry:
        """The session's entry once ``summary`` is counted in ``previous`` (not written)."""
        if previous is not None and previous.settings_mirrored:
            model, label = previous.model, previous.label
        else:  # the session's first run (or an entry from before the mirror)
            own = await SessionSettingsStore(self._store).get(summary.session_key)
            model, label = (own.model, own.label) if own is not None else (None, None)
        same_run = (
            previous is not None
            and summary.retry_of is not None
            and previous.last_run_id == summary.retry_of
        )
        return SessionIndexEntry(
            session_key=summary.session_key,
            runs=(previous.runs if previous else 0) + (0 if same_run else 1),
            last_run_id=summary.run_id,
            last_ok=summary.ok,
            last_error_code=summary.error_code,
            last_answer_preview=summary.answer[:_PREVIEW_CHARS],
            updated_at_ms=max(summary.finished_at_ms, previous.updated_at_ms if previous else 0),
            native_session_id=(
                summary.resume.value
                if summary.resume is not None and summary.resume.is_native
                else (previous.native_session_id if previous else None)
            ),
            model=model,
            label=label,
            settings_mirrored=True,
        )

    async def _write(self, entry: SessionIndexEntry, previous: SessionIndexEntry | None) -> None:
        """The entry and its recency row in one batch (all or nothing); a moved session's old
        recency row is deleted after."""
        await self._store.put_many(
            [
                (self.INDEX, entry.session_key, entry, None),
                (self.RECENT, _recent_key(entry), entry, None),
            ]
        )
        if previous is not None and previous.updated_at_ms != entry.updated_at_ms:
            await self._store.delete(self.RECENT, _recent_key(previous))

    async def mirror_settings(
        self, session_key: str, *, model: str | None, label: str | None
    ) -> bool:
        """Copy the session's settings into its entry (``False``: the session has no entry
        yet; its first run copies them)."""
        previous = await self.get(session_key)
        if previous is None:
            return False
        entry = msgspec.structs.replace(previous, model=model, label=label, settings_mirrored=True)
        await self._write(entry, previous)
        return True

    async def get(self, session_key: str) -> SessionIndexEntry | None:
        data = await self._store.get(self.INDEX, session_key)
        return None if data is None else msgspec.convert(data, SessionIndexEntry)

    async def delete(self, session_key: str) -> bool:
        """Remove the session's entry (and its place in the recency table)."""
        previous = await self.get(session_key)
        if previous is None:
            return False
        await self._store.delete(self.RECENT, _recent_key(previous))
        return await self._store.delete(self.INDEX, session_key)

    async def forget_conversation(self, session_key: str) -> bool:
        """Clear the session's native session id (its next run starts a fresh one)."""
        previous = await self.get(session_key)
        if previous is None or previous.native_session_id is None:
            return False
        await self._write(msgspec.structs.replace(previous, native_session_id=None), previous)
        return True

    async def recent(self, *, limit: int = 50) -> list[SessionIndexEntry]:
        """The most recently active sessions, newest first: one scan of ``limit`` rows (a row
        written before the rows held the entry costs one more read)."""
        rows = await self._store.scan(self.RECENT, limit=limit)
        found: list[SessionIndexEntry] = []
        for _, value in rows:
            entry: SessionIndexEntry | None
            if isinstance(value, dict):
                entry = msgspec.convert(value, SessionIndexEntry)
            else:  # an older row: the session key only
                entry = await self.get(str(value))
            if entry is not None:
                found.append(entry)
        return found


class SessionSettingsRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What a client set on a session (the session port's ``patch``)."""

    model: str | None = None
    label: str | None = None
    thinking_level: str | None = None
    workspace: str | None = None
    updated_at_ms: int = 0


class SessionSettingsStore:
    """Per-session settings (model, label, thinking level, workspace), by session key."""

    TABLE: Final = "session_settings"

    def __init__(self, store: Store, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._clock = clock

    async def get(self, session_key: str) -> SessionSettingsRecord | None:
        data = await self._store.get(self.TABLE, session_key)
        return None if data is None else msgspec.convert(data, SessionSettingsRecord)

    async def update(self, session_key: str, **changes: str | None) -> SessionSettingsRecord:
        """Apply ``changes`` (a field set to a value or ``None``) to the session's record."""
        unknown = set(changes) - {"model", "label", "thinking_level", "workspace"}
        if unknown:
            raise StoreValueError(f"unknown session settings: {sorted(unknown)}")
        previous = await self.get(session_key) or SessionSettingsRecord()
        record = msgspec.structs.replace(previous, **changes, updated_at_ms=self._clock.now_ms())
        if (
            record.model is None
            and record.label is None
            and record.thinking_level is None
            and record.workspace is None
        ):
            await self._store.delete(self.TABLE, session_key)
        else:
            await self._store.put(self.TABLE, session_key, record)
        if (record.model, record.label) != (previous.model, previous.label):
            await SessionIndexStore(self._store).mirror_settings(
                session_key, model=record.model, label=record.label
            )
        return record

    async def delete(self, session_key: str) -> bool:
        await SessionIndexStore(self._store).mirror_settings(session_key, model=None, label=None)
        return await self._store.delete(self.TABLE, session_key)


_DAY_MS: Final = 86_400_000


def _day_of(ms: int) -> int:
    """Days since the epoch (UTC) of a wall-clock time in ms."""
    return ms // _DAY_MS


def _day_key(day: int) -> str:
    # Counts down, so the newest day sorts first.
    return f"{10**7 - day:07d}"


def _recent_run_key(summary: RunSummary) -> str:
    """Newest first across the table: the day, then the time within it, then the run."""
    finished = summary.finished_at_ms
    return f"{_day_key(_day_of(finished))}{_SEP}{_NEWEST - finished:016d}{_SEP}{summary.run_id}"


def _recent_key(entry: SessionIndexEntry) -> str:
    return f"{_NEWEST - entry.updated_at_ms:016d}{_SEP}{entry.session_key}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatState:
    """The last resume state written for a session."""

    last_engine: str
    last_resume_token: str
    updated_at_ms: int

    @property
    def resume(self) -> ResumeToken:
        return ResumeToken(engine=self.last_engine, value=self.last_resume_token)


class ChatStateStore:
    """The last resume token per session key, with a TTL.

    Every token written is kept (non-native historical ones too), but
    :meth:`resume_token` only ever returns a native one: a foreign token is quarantined
    from resume, never executed.
    """

    TABLE: Final = "chat_state"

    def __init__(
        self,
        store: Store,
        *,
        ttl_ms: int = DEFAULT_CHAT_STATE_TTL_MS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        ttl: object = ttl_ms
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
            raise StoreValueError(f"chat state ttl_ms must be a positive integer, got {ttl_ms!r}")
        self._store = store
        self._ttl_ms = ttl_ms
        self._clock = clock

    @property
    def ttl_ms(self) -> int:
        return self._ttl_ms

    async def put(self, session_key: str, token: ResumeToken) -> ChatState:
        """Record ``token`` as the session's latest resume state."""
        state = ChatState(
            last_engine=token.engine,
            last_resume_token=token.value,
            updated_at_ms=self._clock.now_ms(),
        )
        await self._store.put(
            self.TABLE,
            session_key,
            {
                "last_engine": state.last_engine,
                "last_resume_token": state.last_resume_token,
                "updated_at_ms": state.updated_at_ms,
            },
            ttl_ms=self._ttl_ms,
        )
        return state

    async def get(self, session_key: str) -> ChatState | None:
        """The raw latest state (native or not), or None when absent or expired."""
        data = await self._store.get(self.TABLE, session_key)
        if data is None:
            return None
        return ChatState(
            last_engine=data["last_engine"],
            last_resume_token=data["last_resume_token"],
            updated_at_ms=data["updated_at_ms"],
        )

    async def resume_token(self, session_key: str) -> ResumeToken | None:
        """The token to resume the session with: native only, else None."""
        state = await self.get(session_key)
        if state is None or state.last_engine != NATIVE_ENGINE:
            return None
        return state.resume

    async def delete(self, session_key: str) -> bool:
        """Forget the session's resume state."""
        return await self._store.delete(self.TABLE, session_key)
