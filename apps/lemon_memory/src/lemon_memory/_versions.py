"""What the three backends share about versions: the previous content of a document that a
forget, a scope's forget or a consolidation merge removed or changed, kept so that
``lemon memory undo`` can put it back.

A version is written in the transaction of the change it records (so a change and its
version commit or roll back together) and is bounded: at most :data:`MAX_VERSIONS_PER_SCOPE`
per ``(agent, scope, scope_key)`` (the oldest go first) and none older than
:data:`VERSION_TTL_MS`. Only documents ever stored are versioned, and every stored document
was screened, so a version never holds a refused secret. Versions count against no bound the
person sees (``statistics()`` is unchanged). Not versioned: evictions by the bounds and the
retention sweep (each is the bound or the expiry the person set doing its job).
"""

from __future__ import annotations

import secrets as _random
from typing import Final, Literal

import msgspec

from lemon_memory.documents import MemoryDocument

__all__ = [
    "MAX_VERSIONS_PER_SCOPE",
    "VERSION_TTL_MS",
    "Change",
    "decode",
    "encode",
    "new_change_id",
    "size_of",
]

#: Versions kept per (agent, scope, scope_key), newest first.
MAX_VERSIONS_PER_SCOPE: Final = 200
#: A version older than this is dropped (and cannot be undone).
VERSION_TTL_MS: Final = 30 * 24 * 3600 * 1000

Change = Literal["forget", "forget_scope", "merge"]

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(MemoryDocument)


def new_change_id() -> str:
    return "chg_" + _random.token_hex(8)


def encode(doc: MemoryDocument) -> str:
    return _ENCODER.encode(doc).decode()


def decode(text: str | bytes) -> MemoryDocument:
    return _DECODER.decode(text)


def size_of(doc: MemoryDocument) -> int:
    """The document's size as :attr:`~lemon_memory.Write.size` counts it."""
    return len(doc.title.encode()) + len(doc.body.encode()) + sum(len(t) for t in doc.tags)
