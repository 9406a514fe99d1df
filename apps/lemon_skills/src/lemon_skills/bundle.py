"""A skill bundle on disk: its files, its content hash, and a copy that never follows links.

A bundle is every file under the skill's directory except version-control metadata (``.git``
directories at any depth). Symbolic links are entries of their own (their target text is hashed
and copied as a link), never followed: reading, hashing and copying a bundle never leaves it.
Only regular files and symlinks are allowed; a FIFO, socket or device makes the bundle invalid,
and so does a file name that is not UTF-8 or holds control or invisible characters.

The bundle hash is SHA-256 over the path-sorted lines ``<path>\\t<kind>\\t<sha256>`` joined by
``\\n`` (the file's content hash, or a symlink's target text hash), so any byte changed, any file
added, removed, renamed or retargeted changes it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from lemon_skills.errors import SkillSourceError

__all__ = [
    "INVISIBLE_CHARS",
    "BundleEntry",
    "BundleLimits",
    "bundle_entries",
    "bundle_hash",
    "copy_bundle",
    "open_inside",
]

_SKIPPED_DIRS: Final = frozenset({".git"})
_CHUNK: Final = 1 << 20
INVISIBLE_CHARS: Final = (
    # format (Cf) characters: soft hyphen, zero-width, bidirectional controls, word joiners,
    # interlinear annotation, tags, musical and hieroglyph format controls
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
    # not format characters but blank or invisible: the combining grapheme joiner, Hangul and
    # Khmer fillers, and variation selectors (which can smuggle a whole hidden message)
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef"
)
"""A character class body (for ``[...]``) of the invisible characters the audit reports and
prompt text never carries."""
# Control, bidirectional-control and invisible characters: never in a bundle's file names (they
# disguise names, and a newline or tab could make two bundles' hash lines read alike).
_BAD_NAME: Final = re.compile(f"[\x00-\x1f\x7f{INVISIBLE_CHARS}]")


@dataclass(frozen=True, kw_only=True, slots=True)
class BundleLimits:
    """Bounds of a bundle: more files or bytes than this is refused as not a skill."""

    max_files: int = 2_000
    max_total_bytes: int = 64 * 1024 * 1024
    max_depth: int = 32
    """Directory levels below the top (a deeper tree would exhaust the walk's recursion)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BundleEntry:
    """One entry of a bundle: a regular file or a symbolic link (never followed)."""

    path: str
    """Relative POSIX path inside the bundle."""
    kind: Literal["file", "symlink"]
    size: int
    sha256: str
    """The content's hash (a file) or the link target text's hash (a symlink)."""
    target: str | None = None
    """A symlink's target text, as stored in the link."""


def _parent_fd(root: Path, rel: str) -> tuple[int, str]:
    """A descriptor of the directory holding ``rel`` under ``root`` (reached one component at
    a time, never through a link) and the last component's name."""
    parts = rel.split("/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def open_inside(root: Path, rel: str) -> int:
    """A read-only descriptor of the regular file ``rel`` under ``root``, opened one path
    component at a time without following any link (a directory swapped for a link after the
    walk fails here instead of being followed out of the bundle). Raises :class:`OSError`."""
    fd, name = _parent_fd(root, rel)
    try:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def _readlink_inside(root: Path, rel: str) -> str:
    fd, name = _parent_fd(root, rel)
    try:
        return os.readlink(name, dir_fd=fd)
    finally:
        os.close(fd)


#: Digests of files already read, keyed by what identifies their bytes (device, inode, size,
#: mtime and ctime of the opened file: a write changes ctime, which no caller can set back).
#: A file changed less than :data:`_SETTLE_NS` ago is never cached (timestamps are coarser than
#: writes: a second write in the same tick would keep them), as git does for its index. So a
#: skill listed in every prompt is read once, not on every prompt and ``read_skill`` call.
_DIGESTS: OrderedDict[tuple[int, int, int, int, int], str] = OrderedDict()
_MAX_DIGESTS: Final = 4096
_SETTLE_NS: Final = 2_000_000_000
_digests_lock = threading.Lock()
_now_ns = time.time_ns  # patched by tests


def _file_sha256(root: Path, rel: str) -> str:
    with os.fdopen(open_inside(root, rel), "rb") as handle:
        info = os.fstat(handle.fileno())
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        settled = _now_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > _SETTLE_NS
        if settled:
            with _digests_lock:
                cached = _DIGESTS.get(key)
                if cached is not None:
                    _DIGESTS.move_to_end(key)
                    return cached
        digest = hashlib.sha256()
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    if settled:
        with _digests_lock:
            _DIGESTS[key] = value
            while len(_DIGESTS) > _MAX_DIGESTS:
                _DIGESTS.popitem(last=False)
    return value


def _walk(root: Path, max_depth: int) -> Iterator[tuple[Path, str, os.stat_result]]:
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(directory)
        if dirnames and len(base.relative_to(root).parts) >= max_depth:
            raise SkillSourceError(
                f"{root}: directories nested more than {max_depth} levels deep "
                f"({base.relative_to(root).as_posix()[:120]}/...); a skill bundle must be flatter"
            )
        keep: list[str] = []
        for name in sorted(dirnames):
            if name in _SKIPPED_DIRS:
                continue
            full = base / name
            info = full.lstat()
            if stat.S_ISLNK(info.st_mode):
                yield full, full.relative_to(root).as_posix(), info
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            full = base / name
            yield full, full.relative_to(root).as_posix(), full.lstat()


def _check_name(root: Path, rel: str) -> None:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise SkillSourceError(
            f"{root}: a file name is not UTF-8 ({rel.encode('utf-8', 'surrogateescape')!r}); "
            "rename it"
        ) from None
    if _BAD_NAME.search(rel):
        raise SkillSourceError(
            f"{root}: the file name {rel!r} holds control or invisible characters; rename it"
        )


def bundle_entries(root: Path, limits: BundleLimits | None = None) -> list[BundleEntry]:
    """The bundle under ``root``, sorted by path. Raises :class:`SkillSourceError` for a
    missing directory, a special file, or a bundle over its limits."""
    lim = limits or BundleLimits()
    if not root.is_dir() or root.is_symlink():
        raise SkillSourceError(f"{root} is not a directory")
    entries: list[BundleEntry] = []
    total = 0
    for full, rel, info in _walk(root, lim.max_depth):
        _check_name(root, rel)
        if len(entries) >= lim.max_files:
            raise SkillSourceError(
                f"{root}: more than {lim.max_files} files; a skill bundle must be smaller"
            )
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(full)
            entries.append(
                BundleEntry(
                    path=rel,
                    kind="symlink",
                    size=0,
                    target=target,
                    sha256=hashlib.sha256(target.encode("utf-8", "surrogateescape")).hexdigest(),
                )
            )
        elif stat.S_ISREG(info.st_mode):
            total += info.st_size
            if total > lim.max_total_bytes:
                raise SkillSourceError(
                    f"{root}: more than {lim.max_total_bytes} bytes; a skill bundle must be smaller"
                )
            entries.append(
                BundleEntry(
                    path=rel, kind="file", size=info.st_size, sha256=_file_sha256(root, rel)
                )
            )
        else:
            raise SkillSourceError(
                f"{root}: {rel} is not a regular file or a link (a FIFO, socket or device); "
                "a skill bundle holds only files"
            )
    entries.sort(key=lambda e: e.path)
    return entries


def bundle_hash(entries: list[BundleEntry] | Path) -> str:
    """The content hash of a bundle (its entries, or the directory to read them from)."""
    items = bundle_entries(entries) if isinstance(entries, Path) else entries
    lines = "\n".join(f"{e.path}\t{e.kind}\t{e.sha256}" for e in sorted(items, key=_key))
    return hashlib.sha256(lines.encode("utf-8", "surrogateescape")).hexdigest()


def _key(entry: BundleEntry) -> str:
    return entry.path


def copy_bundle(source: Path, dest: Path, limits: BundleLimits | None = None) -> None:
    """Copy the bundle under ``source`` into the new directory ``dest``: files by content,
    symlinks as symlinks (never followed), ``.git`` left out, nothing executed.

    What is copied is exactly what was walked and hashed: every file is reopened without
    following links (:func:`open_inside`) and its copied bytes must hash as they did in the
    walk, every link must still hold its target; otherwise :class:`SkillSourceError` (the
    source changed while it was copied) and ``dest`` is left to the caller to remove."""
    entries = bundle_entries(source, limits)
    dest.mkdir(parents=True, exist_ok=False)
    for entry in entries:
        target = dest / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if entry.kind == "symlink":
                assert entry.target is not None
                if _readlink_inside(source, entry.path) != entry.target:
                    raise _changed(source, entry.path)
                os.symlink(entry.target, target)
                continue
            digest = hashlib.sha256()
            with (
                os.fdopen(open_inside(source, entry.path), "rb") as src,
                target.open("xb") as out,
            ):
                if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                    raise _changed(source, entry.path)
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
        except OSError as exc:
            raise SkillSourceError(
                f"{source}: {entry.path} changed while it was copied ({exc.strerror}); "
                "nothing was installed, try again when the directory is not being changed"
            ) from None
        if digest.hexdigest() != entry.sha256:
            raise _changed(source, entry.path)


def _changed(source: Path, rel: str) -> SkillSourceError:
    return SkillSourceError(
        f"{source}: {rel} changed while it was copied; nothing was installed, try again when "
        "the directory is not being changed"
    )
