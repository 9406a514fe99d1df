"""The page's assets: the page weight budget, the bounds shared with the script, nothing loaded
from another site, and the reproducible vendored bundle."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import lemon_web
from lemon_web import (
    LIVE_SEGMENT_BYTES,
    MAX_EVENT_BYTES,
    PAGE_CACHE_ITEMS,
    PANE_QUEUE_ENTRIES,
    TERMINAL_TOMBSTONES,
    WebApp,
)

APP = Path(__file__).resolve().parents[1]
STATIC = APP / "src" / "lemon_web" / "static"
PAGE_BUDGET = 200 * 1024


class _NoTokens:
    """A loopback plane's answer to the page (the TokenCheck protocol)."""

    requires_token = False

    def token_valid(self, token: object) -> bool:
        return False


def test_all_names_what_the_package_defines() -> None:
    assert sorted(lemon_web.__all__) == lemon_web.__all__
    for name in lemon_web.__all__:
        assert hasattr(lemon_web, name), name


def test_the_first_visit_weighs_under_200_kb_compressed() -> None:
    figures = WebApp(_NoTokens()).page_weight()
    assert figures["total"] <= PAGE_BUDGET, figures
    assert figures["total"] == sum(
        len(gzip.compress((STATIC / name).read_bytes(), compresslevel=9, mtime=0))
        for name in figures
        if name != "total"
    )


def test_the_script_enforces_the_same_bounds_as_the_package() -> None:
    source = (STATIC / "bounds.js").read_text()
    declared = dict(re.findall(r"export const ([A-Z_]+) = (\d+);", source))
    assert {k: int(v) for k, v in declared.items()} == {
        "PANE_QUEUE_ENTRIES": PANE_QUEUE_ENTRIES,
        "MAX_EVENT_BYTES": MAX_EVENT_BYTES,
        "LIVE_SEGMENT_BYTES": LIVE_SEGMENT_BYTES,
        "PAGE_CACHE_ITEMS": PAGE_CACHE_ITEMS,
        "TERMINAL_TOMBSTONES": TERMINAL_TOMBSTONES,
    }


def test_no_asset_loads_anything_from_another_site() -> None:
    for path in STATIC.iterdir():
        if path.suffix in (".js", ".css", ".html") and path.name != "vendor.js":
            text = path.read_text()
            assert not re.search(r"""(src|href|import)[^\n]*["'](https?:)?//""", text), path.name


def test_the_vendored_bundle_rebuilds_identically_from_the_lock_file() -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the committed vendor.js cannot be rebuilt here")
    done = subprocess.run(
        [str(APP / "scripts" / "build"), "--check"],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    if done.returncode == 3:
        pytest.skip(f"the locked npm packages could not be installed here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr + done.stdout
