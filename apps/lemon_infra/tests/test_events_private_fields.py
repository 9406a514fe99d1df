"""Private payload fields never leave the process, whichever path serialises the payload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lemon_core import Event
from lemon_core.events import (
    ApprovalPending,
    ApprovalRequested,
    ApprovalResolved,
    Payload,
    PrivateFields,
    encode_json,
    to_builtins,
)
from lemon_infra import MemoryStore, SQLiteStore

SECRET = "ctx-secret-7f3a"


def requested() -> ApprovalRequested:
    pending = ApprovalPending(id="p1", tool="bash", invocation_context_key=SECRET)
    return ApprovalRequested(approval_id="a1", pending=pending)


def assert_private_dropped(data: bytes) -> None:
    assert SECRET.encode() not in data
    assert b"invocation_context_key" not in data


def test_plain_msgspec_encoders_drop_private_fields() -> None:
    record = requested()
    assert_private_dropped(msgspec.json.encode(record))
    assert_private_dropped(msgspec.msgpack.encode(record))
    assert_private_dropped(msgspec.json.encode(msgspec.to_builtins(record)))
    assert_private_dropped(msgspec.json.encode(Event.new("approval_requested", record)))
    assert_private_dropped(encode_json(Event.new("approval_requested", record)))
    assert_private_dropped(json.dumps(to_builtins(record)).encode())
    assert record.pending.invocation_context_key == SECRET  # kept in process


async def test_store_put_drops_private_fields(tmp_path: Path) -> None:
    memory = MemoryStore()
    await memory.put("approvals", "a1", requested())
    stored: Any = await memory.get("approvals", "a1")
    assert "invocation_context_key" not in stored["pending"]
    assert_private_dropped(json.dumps(stored).encode())

    sqlite = await SQLiteStore.open(tmp_path / "store.db")
    try:
        resolved = ApprovalResolved(approval_id="a1", decision="deny", pending=requested().pending)
        await sqlite.put("approvals", "a1", Event.new("approval_resolved", resolved))
        stored = await sqlite.get("approvals", "a1")
        assert "invocation_context_key" not in stored["payload"]["pending"]
    finally:
        await sqlite.close()
    assert_private_dropped((tmp_path / "store.db").read_bytes())


def test_every_constructor_takes_private_fields_and_new_checks_their_type() -> None:
    assert (
        ApprovalPending.new(id="p", tool="t", invocation_context_key="k").invocation_context_key
        == "k"
    )
    lenient = ApprovalPending.from_map({"id": "p", "tool": "t", "invocation_context_key": "k"})
    assert lenient.invocation_context_key == "k"
    assert ApprovalPending(id="p", tool="t").invocation_context_key is None
    from lemon_core import EventPayloadError

    with pytest.raises(EventPayloadError, match="str"):
        ApprovalPending.new(id="p", tool="t", invocation_context_key=3)
    # Decoded from the wire: never has them.
    decoded = msgspec.json.decode(msgspec.json.encode(requested()), type=ApprovalRequested)
    assert decoded.pending.invocation_context_key is None
    assert SECRET not in repr(requested())


def test_a_private_field_declared_as_an_encoded_field_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match="metaclass=PrivateFields"):

        class Leaky(Payload, frozen=True, kw_only=True):
            private_fields = frozenset({"token"})
            token: str | None = None

    with pytest.raises(TypeError, match="ClassVar"):

        class StillLeaky(Payload, frozen=True, kw_only=True, metaclass=PrivateFields):
            private_fields = frozenset({"token"})
            token: str | None = None
