"""``lemon approvals list|revoke`` on the durable grants of a real SQLite store, no daemon."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from lemon_cli.main import app
from lemon_core import ExecApprovals
from lemon_core.bus import Bus
from lemon_core.events import ApprovalPending
from lemon_core.store import ApprovalGrant, ApprovalGrantStore
from lemon_infra import SQLiteStore
from lemon_runtime import store_path

GRANTS: list[tuple[str, dict[str, Any], str | None, str]] = [
    ("bash", {"shell": "argv", "argv": ["make", "test"]}, None, "approve_global"),
    ("write", {"path": "/w/notes.txt"}, "coder", "approve_agent"),
    ("bash", {"shell": "argv", "argv": ["ls"]}, "reviewer", "approve_agent"),
]


async def _grant(home: Path) -> None:
    async with await SQLiteStore.open(store_path(home)) as store:
        approvals = ExecApprovals(Bus(), grant_store=ApprovalGrantStore(store))
        for tool, action, agent, decision in GRANTS:
            asked: asyncio.Queue[ApprovalPending] = asyncio.Queue()
            request = approvals.request(tool=tool, action=action, agent_id=agent,
                                        on_requested=asked.put_nowait)  # fmt: skip
            task = asyncio.ensure_future(request)
            approvals.resolve((await asyncio.wait_for(asked.get(), 10)).id, decision)
            assert (await task).persisted is True
        await approvals.drain()


async def _stored(home: Path) -> list[ApprovalGrant]:
    async with await SQLiteStore.open(store_path(home)) as store:
        return await ApprovalGrantStore(store).load()


def lemon(home: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["approvals", *args], env={"LEMON_HOME": str(home)})


def test_list_shows_the_durable_grants_as_text_and_json(tmp_path: Path) -> None:
    asyncio.run(_grant(tmp_path))
    text = lemon(tmp_path, "list")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0].split() == ["KEY", "SCOPE", "AGENT", "TOOL", "GRANTED", "(UTC)", "ACTION"]
    assert "global" in lines[1]
    assert '"make","test"' in lines[1]
    assert "coder" in lines[2]
    assert "/w/notes.txt" in lines[2]
    assert "3 grant(s)" in text.output

    result = lemon(tmp_path, "list", "--json")
    assert result.exit_code == 0
    document = json.loads(result.output)
    assert document["version"] == 1
    assert document["store"] == str(store_path(tmp_path))
    grants = document["grants"]
    expected = [("global", "", "bash"), ("agent", "coder", "write"), ("agent", "reviewer", "bash")]
    assert [(g["scope"], g["owner"], g["tool"]) for g in grants] == expected
    assert all(len(g["key"]) == 64 and g["granted_at"].endswith("Z") for g in grants)

    only = json.loads(lemon(tmp_path, "list", "--json", "--agent", "coder").output)["grants"]
    assert [g["tool"] for g in only] == ["write"]
    glob = json.loads(lemon(tmp_path, "list", "--json", "--scope", "global").output)["grants"]
    assert [g["scope"] for g in glob] == ["global"]


def test_revoke_by_key_prefix_forgets_it_durably(tmp_path: Path) -> None:
    asyncio.run(_grant(tmp_path))
    keys = [g["key"] for g in json.loads(lemon(tmp_path, "list", "--json").output)["grants"]]
    result = lemon(tmp_path, "revoke", keys[1][:10])
    assert result.exit_code == 0, result.output
    assert f"Revoked the agent grant {keys[1][:12]} (write for agent coder" in result.output
    assert "In force at once: a running daemon on this store asks again" in result.output
    remaining = asyncio.run(_stored(tmp_path))
    assert [g.key for g in remaining] == [keys[0], keys[2]]
    # A fresh ExecApprovals on the same store (what the next runtime does) no longer has it.
    again = lemon(tmp_path, "revoke", keys[1][:10])
    assert again.exit_code == 1
    assert "no remembered approval has a key starting with" in again.output


def test_revoke_all_is_narrowed_by_scope_and_agent(tmp_path: Path) -> None:
    asyncio.run(_grant(tmp_path))
    result = lemon(tmp_path, "revoke", "--all", "--agent", "reviewer")
    assert result.exit_code == 0
    assert result.output.count("Revoked") == 1
    assert [g.owner for g in asyncio.run(_stored(tmp_path))] == ["", "coder"]
    assert lemon(tmp_path, "revoke", "--all").exit_code == 0
    assert asyncio.run(_stored(tmp_path)) == []
    assert "No remembered approvals in" in lemon(tmp_path, "list").output


def test_bad_input_gets_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    asyncio.run(_grant(tmp_path))
    for args, message in (
        (("revoke",), "give a grant KEY"),
        (("revoke", "abc"), "too short"),
        (("revoke", "abcdef", "--all"), "give a grant KEY"),
        (("list", "--scope", "session"), "session grants are never stored"),
    ):
        result = lemon(tmp_path, *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output
        assert "Traceback" not in result.output
    assert len(asyncio.run(_stored(tmp_path))) == 3


def test_no_store_yet_lists_nothing_and_creates_nothing(tmp_path: Path) -> None:
    result = lemon(tmp_path, "list")
    assert result.exit_code == 0
    assert "no store yet" in result.output
    assert json.loads(lemon(tmp_path, "list", "--json").output)["grants"] == []
    assert lemon(tmp_path, "revoke", "abcdef12").exit_code == 1
    assert not store_path(tmp_path).exists()


def test_an_unusable_store_is_one_clear_line(tmp_path: Path) -> None:
    path = store_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    result = lemon(tmp_path, "list")
    assert result.exit_code == 1
    assert result.output.startswith("error: ")
    assert str(path) in result.output
    assert "Traceback" not in result.output
