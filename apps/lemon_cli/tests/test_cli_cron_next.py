"""``lemon cron next``: the next due times with their offsets (``--json`` shape), and bad input
as one line naming the field, exit 2 (an unknown timezone is refused, never UTC)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lemon_cli.main import app


def test_next_json_shape() -> None:
    result = CliRunner().invoke(
        app, ["cron", "next", "30 1 * * *", "--tz", "America/New_York", "--count", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["timezone"] == "America/New_York"
    assert len(doc["next"]) == 3
    assert all(
        set(row) == {"due_at_ms", "local", "utc_offset", "dst_transition_day"}
        for row in doc["next"]
    )
    assert all(row["local"][11:16] == "01:30" for row in doc["next"])
    assert [r["due_at_ms"] for r in doc["next"]] == sorted(r["due_at_ms"] for r in doc["next"])


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["61 * * * *"], "cron"),
        (["* * * *"], "cron"),
        (["* * * * *", "--tz", "Mars/Base"], "timezone"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], field: str) -> None:
    result = CliRunner().invoke(app, ["cron", "next", *args])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {field}: ")
    assert "Traceback" not in result.output
