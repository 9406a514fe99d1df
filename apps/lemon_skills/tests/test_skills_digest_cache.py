"""The bundle hash reads a settled file once (a skill is listed in every prompt), and never
trusts a cached digest for a file changed since, or changed too recently to tell."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lemon_skills import bundle


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = bundle.hashlib.sha256

    def counting(*args: object) -> object:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(bundle.hashlib, "sha256", counting)
    return calls


def _skill(tmp_path: Path) -> Path:
    root = tmp_path / "skill"
    root.mkdir()
    (root / "SKILL.md").write_text("---\nname: x\ndescription: y\n---\nbody\n", encoding="utf-8")
    return root


def test_a_settled_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _skill(tmp_path)
    later = bundle._now_ns() + 10 * bundle._SETTLE_NS
    monkeypatch.setattr(bundle, "_now_ns", lambda: later)
    first = bundle.bundle_hash(root)
    reads = _reads(monkeypatch)
    assert bundle.bundle_hash(root) == first
    assert len(reads) == 1  # the bundle's own digest only: the file's came from the cache


def test_a_byte_changed_right_after_hashing_is_seen(tmp_path: Path) -> None:
    root = _skill(tmp_path)
    first = bundle.bundle_hash(root)
    path = root / "SKILL.md"
    data = bytearray(path.read_bytes())
    data[-2] ^= 1  # same size, same second
    path.write_bytes(bytes(data))
    assert bundle.bundle_hash(root) != first


def test_a_settled_file_rewritten_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _skill(tmp_path)
    later = bundle._now_ns() + 10 * bundle._SETTLE_NS
    monkeypatch.setattr(bundle, "_now_ns", lambda: later)
    first = bundle.bundle_hash(root)
    path = root / "SKILL.md"
    data = bytearray(path.read_bytes())
    before = path.stat()
    data[-2] ^= 1
    path.write_bytes(bytes(data))
    # A rewrite moves the timestamps (pinned here past the clock's tick, which a real rewrite
    # a while later moves anyway): the cached digest no longer matches the file's key.
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    assert bundle.bundle_hash(root) != first
