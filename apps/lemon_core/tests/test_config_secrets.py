"""lemon_core.config.read_secrets: the NAME=value lines of $LEMON_HOME/secrets.env."""

from __future__ import annotations

from pathlib import Path

from lemon_core.config import SECRETS_FILENAME, read_secrets


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_secrets(tmp_path) == {}


def test_lines_are_parsed_and_noise_skipped(tmp_path: Path) -> None:
    (tmp_path / SECRETS_FILENAME).write_text(
        "# a comment\n\n  OPENAI_API_KEY = sk-1=2 \nnot a pair\n=no name\nB=\n",
        encoding="utf-8",
    )
    assert read_secrets(tmp_path) == {"OPENAI_API_KEY": "sk-1=2", "B": ""}
