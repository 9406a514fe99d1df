"""Who may talk to the agent through a channel, and per-peer settings.

Nobody by default. A person is allowed when their platform user id is in the channel's
``allowed_users`` or was paired: an unknown person gets one one-time code (valid
``PAIRING_TTL_MS``) and nothing else; ``lemon channels pair approve CODE`` (or
:meth:`PairingStore.approve`) adds them. Both live in the runtime's store (tables
``channel_pairings``, ``channel_pairing_users``, ``channel_paired``), so the command and the
daemon (two processes) share them.

:class:`PeerStore` keeps per-peer settings (``channel_peers``): the session generation that
``/new`` advances and the ``/model`` override.
"""

from __future__ import annotations

import secrets
import time
from typing import Final

import msgspec

from lemon_core.store import Store

__all__ = [
    "PAIRING_TTL_MS",
    "PairedUser",
    "PairingRequest",
    "PairingStore",
    "PeerSettings",
    "PeerStore",
]

#: How long a pairing code stays valid.
PAIRING_TTL_MS: Final = 3600 * 1000
#: Live pairing codes at most; a stranger beyond it gets nothing (a flood cannot grow the store).
MAX_PAIRING_REQUESTS: Final = 100
_ALPHABET: Final = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I


class PairingRequest(msgspec.Struct, frozen=True, kw_only=True):
    code: str
    channel_id: str
    user_id: str
    peer_id: str
    user_name: str | None = None
    created_ms: int = 0


class PairedUser(msgspec.Struct, frozen=True, kw_only=True):
    channel_id: str
    user_id: str
    user_name: str | None = None
    approved_ms: int = 0


class PairingStore:
    """See the module docstring."""

    CODES: Final = "channel_pairings"
    USERS: Final = "channel_pairing_users"
    PAIRED: Final = "channel_paired"

    def __init__(self, store: Store) -> None:
        self._store = store

    async def is_paired(self, channel_id: str, user_id: str) -> bool:
        return await self._store.get(self.PAIRED, f"{channel_id}/{user_id}") is not None

    async def request(
        self, channel_id: str, user_id: str, *, peer_id: str, user_name: str | None
    ) -> str | None:
        """A new one-time code for an unknown person, or ``None`` when they already hold a
        live one (they get nothing more) or ``MAX_PAIRING_REQUESTS`` codes are live."""
        if await self._store.get(self.USERS, f"{channel_id}/{user_id}") is not None:
            return None
        live = await self._store.scan(self.CODES, limit=MAX_PAIRING_REQUESTS)
        if len(live) >= MAX_PAIRING_REQUESTS:
            return None
        code = "".join(secrets.choice(_ALPHABET) for _ in range(8))
        request = PairingRequest(
            code=code,
            channel_id=channel_id,
            user_id=user_id,
            peer_id=peer_id,
            user_name=user_name,
            created_ms=time.time_ns() // 1_000_000,
        )
        await self._store.put(self.CODES, code, msgspec.to_builtins(request), ttl_ms=PAIRING_TTL_MS)
        await self._store.put(
            self.USERS, f"{channel_id}/{user_id}", {"code": code}, ttl_ms=PAIRING_TTL_MS
        )
        return code

    async def pending(self) -> list[PairingRequest]:
        rows = await self._store.scan(self.CODES, limit=1000)
        return [msgspec.convert(value, PairingRequest) for _, value in rows]

    async def approve(self, code: str) -> PairedUser | None:
        """Pair the person holding ``code`` (case-insensitive); ``None`` for an unknown or
        expired code. A code works once."""
        code = code.strip().upper()
        value = await self._store.get(self.CODES, code)
        if value is None:
            return None
        request = msgspec.convert(value, PairingRequest)
        paired = PairedUser(
            channel_id=request.channel_id,
            user_id=request.user_id,
            user_name=request.user_name,
            approved_ms=time.time_ns() // 1_000_000,
        )
        await self._store.put(
            self.PAIRED, f"{request.channel_id}/{request.user_id}", msgspec.to_builtins(paired)
        )
        await self._store.delete(self.CODES, code)
        await self._store.delete(self.USERS, f"{request.channel_id}/{request.user_id}")
        return paired

    async def paired(self) -> list[PairedUser]:
        rows = await self._store.scan(self.PAIRED, limit=10_000)
        return [msgspec.convert(value, PairedUser) for _, value in rows]


class PeerSettings(msgspec.Struct, frozen=True, kw_only=True):
    generation: int = 0
    model: str | None = None


class PeerStore:
    """Per-peer settings (``/new`` generation, ``/model`` override)."""

    TABLE: Final = "channel_peers"

    def __init__(self, store: Store) -> None:
        self._store = store

    async def get(self, peer_key: str) -> PeerSettings:
        value = await self._store.get(self.TABLE, peer_key)
        return PeerSettings() if value is None else msgspec.convert(value, PeerSettings)

    async def put(self, peer_key: str, settings: PeerSettings) -> None:
        await self._store.put(self.TABLE, peer_key, msgspec.to_builtins(settings))
