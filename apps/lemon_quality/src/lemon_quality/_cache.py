"""The per-file facts cache: a warm run on an unchanged tree reads no source file.

Layout: one file, ``<root>/.lemon_quality_cache/facts-v<N>.marshal``, holding

* ``stat``: relative path -> ``(size, mtime_ns, content hash)``
* ``facts``: content hash (BLAKE2b-128 of the bytes) -> facts (see ``_facts``)

Lookup: a file whose ``(size, mtime_ns)`` matches its ``stat`` entry takes the facts of the
recorded hash without being opened. Otherwise it is read and hashed; a known hash reuses its
facts (a touched but unchanged file), an unknown one is parsed.

Invalidation: any change of size or mtime re-reads the file; the whole cache is dropped when the
facts format (``FACTS_VERSION``) or the Python minor version changes, or when the file is
unreadable. A file modified within two seconds of the save has no ``stat`` entry written (so an
edit in the same mtime tick as the save cannot hide): it is re-hashed on the next run.

Bound: the cache holds exactly the files seen by the last run (entries for vanished files are
dropped on save), so it never outgrows the tree. ``statistics()`` reports hits and misses.
Writes are atomic (temporary file + ``os.replace``); a cache that cannot be written is ignored.
The file starts with the BLAKE2b-128 digest of its payload; a file whose digest or shape is wrong
is dropped whole (never a traceback).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import marshal
import os
import sys
import time
from typing import Any

from lemon_quality._facts import FACTS_VERSION, Facts, extract

CACHE_DIR = ".lemon_quality_cache"
_KEY = (FACTS_VERSION, sys.version_info[:2])
_RACY_NS = 2_000_000_000
# Below this many files to parse, a process pool costs more than it saves.
PARALLEL_THRESHOLD = 300


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _read(path: str) -> bytes | str:
    """The file's bytes, or why it cannot be read (it may vanish between walk and read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        return f"cannot read the file: {exc.strerror or exc}"


def _facts_of(data: bytes | str) -> tuple[str, Facts]:
    if isinstance(data, str):  # unreadable: not cached under any content hash
        return "", ((), (), (data, 1), (), ())
    return _digest(data), extract(data)


def _parse_paths(paths: list[str]) -> list[tuple[str, Facts]]:
    gc.disable()  # a worker only allocates records that live until it returns them
    return [_facts_of(_read(path)) for path in paths]


class FactsCache:
    """Facts for a set of files, from the cache or freshly parsed (in parallel when many)."""

    def __init__(self, root: str, *, enabled: bool = True) -> None:
        self._root = root
        self._enabled = enabled
        self._file = os.path.join(root, CACHE_DIR, f"facts-v{FACTS_VERSION}.marshal")
        self._stat: dict[str, tuple[int, int, str]] = {}
        self._facts: dict[str, Facts] = {}
        self._new_stat: dict[str, tuple[int, int, str]] = {}
        self._used: dict[str, Facts] = {}
        self._dirty = False
        self._stats = {"files": 0, "stat_hits": 0, "hash_hits": 0, "parsed": 0, "workers": 0}
        if enabled:
            self._load()

    def _load(self) -> None:
        """Read the cache; a file of the wrong shape (truncated, edited, another tool's) is
        dropped whole: its first 16 bytes must be the digest of the rest, and the payload must
        be ``(key, {path: (int, int, str)}, {str: facts})``."""
        try:
            with open(self._file, "rb") as fh:
                raw = fh.read()
            if len(raw) < 16 or hashlib.blake2b(raw[16:], digest_size=16).digest() != raw[:16]:
                return
            data: Any = marshal.loads(raw[16:])
            if not (isinstance(data, tuple) and len(data) == 3 and data[0] == _KEY):
                return
            stat, facts = data[1], data[2]
            if not (isinstance(stat, dict) and isinstance(facts, dict)):
                return
            # The digest already rules out corruption; a sample of each map rules out a payload
            # of another shape written by another version under the same name.
            s0 = next(iter(stat.values()), (0, 0, ""))
            f0 = next(iter(facts.values()), ((), (), ("", 0), (), ()))
            if not (isinstance(s0, tuple) and len(s0) == 3 and isinstance(s0[2], str)):
                return
            if not (isinstance(f0, tuple) and len(f0) == 5):
                return
            self._stat, self._facts = stat, facts
        except (OSError, EOFError, ValueError, TypeError, IndexError):
            self._stat, self._facts = {}, {}

    def facts_for(self, files: list[tuple[str, int, int]]) -> dict[str, Facts]:
        """Facts for each ``(relative path, size, mtime_ns)``; returns path -> facts."""
        result: dict[str, Facts] = {}
        todo: list[tuple[str, int, int]] = []
        self._stats["files"] += len(files)
        for rel, size, mtime in files:
            entry = self._stat.get(rel)
            try:
                if entry is not None and entry[0] == size and entry[1] == mtime:
                    facts = self._facts.get(entry[2])
                    if type(facts) is tuple and len(facts) == 5:
                        result[rel] = facts
                        self._keep(rel, entry, facts)
                        self._stats["stat_hits"] += 1
                        continue
            except (TypeError, IndexError, KeyError):
                pass  # an entry of the wrong shape is a miss: the file is read again
            todo.append((rel, size, mtime))
        if todo:
            self._dirty = True
            for (rel, size, mtime), (digest, facts) in zip(
                todo, self._parse([os.path.join(self._root, r) for r, _, _ in todo]), strict=True
            ):
                result[rel] = facts
                if digest:
                    self._keep(rel, (size, mtime, digest), facts)
        return result

    def _keep(self, rel: str, entry: tuple[int, int, str], facts: Facts) -> None:
        self._new_stat[rel] = entry
        self._used[entry[2]] = facts

    def _parse(self, paths: list[str]) -> list[tuple[str, Facts]]:
        if len(paths) < PARALLEL_THRESHOLD:
            out = []
            for path in paths:
                data = _read(path)
                digest = _digest(data) if isinstance(data, bytes) else ""
                known = self._facts.get(digest) if digest else None
                if type(known) is tuple and len(known) == 5:
                    # Same bytes under a new mtime (a touched file): reuse, do not parse.
                    self._stats["hash_hits"] += 1
                    out.append((digest, known))
                else:
                    self._stats["parsed"] += 1
                    out.append(_facts_of(data))
            return out
        from concurrent.futures import ProcessPoolExecutor  # only cold runs pay for it

        workers = os.cpu_count() or 1
        self._stats["workers"] = workers
        self._stats["parsed"] += len(paths)
        size = max(1, len(paths) // (workers * 4))
        chunks = [paths[i : i + size] for i in range(0, len(paths), size)]
        results: list[tuple[str, Facts]] = []
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for part in pool.map(_parse_paths, chunks):
                results.extend(part)
        return results

    def save(self) -> None:
        """Write the cache if anything changed; errors are ignored (the cache is optional)."""
        if not self._enabled or not (self._dirty or set(self._new_stat) != set(self._stat)):
            return
        now = time.time_ns()
        stat = {k: v for k, v in self._new_stat.items() if now - v[1] > _RACY_NS}
        payload = (_KEY, stat, self._used)
        tmp = f"{self._file}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self._file), exist_ok=True)
            body = marshal.dumps(payload)
            with open(tmp, "wb") as fh:
                fh.write(hashlib.blake2b(body, digest_size=16).digest())
                fh.write(body)
            os.replace(tmp, self._file)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def statistics(self) -> dict[str, int]:
        """Counters of this run: files looked up, stat hits, hash hits, parsed, pool workers."""
        return dict(self._stats)
