"""Transcripts mirrored into the shared store, so every daemon of a deployment reads (and
resumes) what another one wrote without a shared filesystem.

With a shared store (PostgreSQL) every durable write of a transcript file (its header, each
append, a compaction) is also put in the store table ``agent_transcripts`` as one row per
write, keyed ``<session_id>\\x1f<byte offset, 15 digits>`` with the written text. Before a
transcript is read (to resume it, or to show its history) the rows are *materialised*: when
they hold more than the local file (another daemon wrote since, or this one never had it),
the local file is replaced by their concatenation (a temporary file fsynced and renamed), so
the file parser, its torn-line repair and its bounds stay the one code path. The store is the
authority for what it holds; the local file is a cache of it.

Guarantees and limits: writes to one session are serialised across daemons by the gateway's
shared engine lease, so offsets never collide. A store failure while mirroring is logged and
counted (``statistics()``) and never fails the run (the local file is durable); another daemon
then sees the transcript only up to the last mirrored write. Rows are read up to a gap (a row
missing in the middle ends what is materialised). Mirror writes are not fenced by the engine
lease's token (a paused former owner's late append can still land; its offset then repeats
one the new owner wrote, and the later put wins).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Final

from lemon_core.store import Store, StoreError

__all__ = ["TABLE", "TranscriptMirror"]

log = logging.getLogger(__name__)

#: The store table of mirrored transcript writes.
TABLE: Final = "agent_transcripts"
_SEP: Final = "\x1f"
_MAX_ROWS: Final = 1_000_000


class TranscriptMirror:
    """Mirrors transcript writes into ``store`` and materialises them before a read."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.puts = 0
        self.put_errors = 0
        self.materialised = 0

    async def wrote(self, session_id: str, offset: int, data: bytes) -> None:
        """``data`` was written durably at ``offset`` of the session's local file."""
        try:
            await self._store.put(TABLE, f"{session_id}{_SEP}{offset:015d}", data.decode("utf-8"))
            self.puts += 1
        except StoreError as exc:
            self.put_errors += 1
            log.warning("transcript %s not mirrored to the store: %s", session_id, exc)

    async def materialise(self, session_id: str, path: Path) -> None:
        """Bring ``path`` up to what the store holds for ``session_id`` (see the module)."""
        try:
            rows = await self._store.scan(TABLE, prefix=session_id + _SEP, limit=_MAX_ROWS)
        except StoreError as exc:
            log.warning("transcript %s: the store cannot be read, using the local file: %s",
                        session_id, exc)  # fmt: skip
            return
        parts: list[bytes] = []
        size = 0
        for key, text in rows:
            offset = int(key.rsplit(_SEP, 1)[1])
            if offset != size or not isinstance(text, str):
                break  # a gap: what follows cannot be placed
            data = text.encode("utf-8")
            parts.append(data)
            size += len(data)
        if not parts:
            return
        if await asyncio.to_thread(_replace_if_shorter, path, b"".join(parts)):
            self.materialised += 1

    def statistics(self) -> dict[str, int]:
        return {
            "puts": self.puts,
            "put_errors": self.put_errors,
            "materialised": self.materialised,
        }


def _replace_if_shorter(path: Path, data: bytes) -> bool:
    try:
        if path.stat().st_size >= len(data):
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.mirror")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    return True
