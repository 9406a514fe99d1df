"""Local Markdown links: files and GitHub heading anchors."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_quality._links import anchors, check_links, slug


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Getting started", "getting-started"),
        ("The `lemon quality` command", "the-lemon-quality-command"),
        ("What's new? (2024)", "whats-new-2024"),
        ("Rule codes & exit codes", "rule-codes--exit-codes"),
        ("snake_case_name", "snake_case_name"),
        ("See [the docs](x.md)", "see-the-docs"),
        ("Ünïcode Überschrift", "ünïcode-überschrift"),
        ("**Bold** heading", "bold-heading"),
    ],
)
def test_slugs_follow_github(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_repeated_headings_get_numbered_anchors_and_code_blocks_are_skipped() -> None:
    text = "# A\n\n## Usage\n\n```\n# Not a heading\n```\n\n## Usage\n\nSetext\n------\n"
    assert anchors(text) == {"a", "usage", "usage-1", "setext"}


def test_html_anchors_count() -> None:
    assert "custom" in anchors('<a name="custom"></a>\n# Title\n')


def _doc(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_link_forms_resolve_or_are_reported(tmp_path: Path) -> None:
    _doc(tmp_path, "docs/guide.md", "# Guide\n\n## Install steps\n")
    _doc(tmp_path, "docs/dir/keep.txt", "x")
    _doc(
        tmp_path,
        "README.md",
        "\n".join(
            [
                "[ok](docs/guide.md) [ok](docs/guide.md#install-steps) [ok](<docs/guide.md>)",
                '[ok](docs/guide.md "title") ![img](docs/dir/keep.txt) [dir](docs/dir/)',
                "[web](https://example.com/x.md) [mail](mailto:a@b.c) [self](#readme)",
                "`[code](missing-in-code.md)` [ref]: docs/guide.md",
                "[bad](docs/missing.md)",
                "[bad anchor](docs/guide.md#install)",
                "[outside](../elsewhere.md)",
                "[label]: docs/nothing.md",
                "# Readme",
            ]
        ),
    )
    findings = check_links(tmp_path, ["README.md"])
    assert [(f.line, f.message.split(":")[0]) for f in findings] == [
        (5, "broken link (docs/missing.md)"),
        (6, "broken link (docs/guide.md#install)"),
        (7, "broken link (../elsewhere.md)"),
        (8, "broken link (docs/nothing.md)"),
    ]


def test_percent_encoded_and_root_relative_targets(tmp_path: Path) -> None:
    _doc(tmp_path, "docs/a b.md", "# T\n")
    _doc(tmp_path, "docs/sub/x.md", "[one](../a%20b.md) [two](/docs/a%20b.md#t)\n")
    assert check_links(tmp_path, ["docs/sub/x.md"]) == []
