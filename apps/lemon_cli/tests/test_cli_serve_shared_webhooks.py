"""Two real daemons (``lemon serve`` subprocesses) on one PostgreSQL schema, webhook ingress
enabled on both: the same Idempotency-Key sent to A and B at once executes once (one run in
the webhook's session, one reservation in the shared store), and either daemon replays the
stored answer byte for byte. Each daemon has its own home; the schema is the test's own,
dropped after (the daemons of ``test_cli_serve_shared_daemons.py``)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from lemon_cli.main import app
from lemon_control_plane.testing import wire_client
from lemon_webhooks import WebhookSecret, sign_webhook

from .test_cli_serve_shared_daemons import PG, Daemon, fresh_schema, two_daemons

SECRET = WebhookSecret(b"s" * 32)
SECRET_ENV = "LEMON_TEST_HOOK_SECRET"
HOOK_SESSION = "agent:default:webhook:ci:channel:ci"
# appended after the daemon's [gateway] table: it opens the [webhooks] section
INGRESS = (
    f'[webhooks]\nenabled = true\n[[webhooks.endpoints]]\nid = "ci"\nsecret_env = "{SECRET_ENV}"\n'
)


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema("hooks") as name:
        yield name


@pytest.fixture
def pair(tmp_path: Path, schema: str) -> Iterator[tuple[Daemon, Daemon]]:
    for name in ("a", "b"):  # the webhook secret, in each home's secrets.env
        (tmp_path / name).mkdir()
        (tmp_path / name / "secrets.env").write_text(f"{SECRET_ENV}={SECRET.text()}\n")
    options = {"gateway": INGRESS}
    with two_daemons(tmp_path, schema, options, options) as daemons:
        yield daemons


def signed(body: bytes, key: str) -> dict[str, str]:
    ts = int(time.time())
    msg_id = f"msg_{uuid.uuid4().hex}"
    return {
        "content-type": "application/json",
        "idempotency-key": key,
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign_webhook(SECRET, msg_id, ts, body),
    }


async def test_one_key_sent_to_two_serve_processes_executes_once(
    pair: tuple[Daemon, Daemon], tmp_path: Path, schema: str
) -> None:
    a, b = pair
    body = json.dumps({"prompt": "/echo once"}).encode()
    limits = httpx.Limits(max_connections=20)
    async with (
        httpx.AsyncClient(base_url=a.url, limits=limits) as on_a,
        httpx.AsyncClient(base_url=b.url, limits=limits) as on_b,
        wire_client(a.ws, token=a.token)() as watch_a,
    ):
        # A's client follows the webhook's session before anything runs (a run on B reaches
        # it through the shared bus)
        await watch_a.call("chat.history", {"sessionKey": HOOK_SESSION})
        responses = await asyncio.gather(
            *(
                (on_a, on_b)[i % 2].post("/webhooks/ci", content=body, headers=signed(body, "k"))
                for i in range(20)
            )
        )
        assert {r.status_code for r in responses} <= {202, 409}, [r.text for r in responses]
        accepted = {r.content for r in responses if r.status_code == 202}
        assert len(accepted) == 1
        [first] = accepted
        run_id = json.loads(first)["run_id"]
        done = await watch_a.completed(run_id)
        assert done["payload"]["ok"] is True
        history = await watch_a.call("chat.history", {"sessionKey": HOOK_SESSION})
        turns = [(m["role"], m["content"]) for m in history["messages"]]
        assert turns == [("user", "/echo once"), ("assistant", "once")]  # executed once
        for client in (on_a, on_b):  # either daemon replays the stored answer
            replay = await client.post("/webhooks/ci", content=body, headers=signed(body, "k"))
            assert replay.status_code == 202
            assert replay.content == first
            assert replay.headers["idempotent-replayed"] == "true"
    # `lemon webhooks list` on a daemon's home reads the one shared reservation
    listed = await asyncio.to_thread(list_reservations, tmp_path / "a")
    assert [r["run_id"] for r in listed["records"]] == [run_id]
    assert listed["store"].endswith(f"schema {schema}")


def list_reservations(home: Path) -> dict[str, Any]:
    """``lemon webhooks list --json`` on ``home`` (no SQLite file is involved)."""
    env = {"LEMON_HOME": str(home), "LEMON_TEST_DSN": PG}
    result = CliRunner().invoke(app, ["webhooks", "list", "--webhook", "ci", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert not (home / "store" / "idempotency.sqlite3").exists()
    document: dict[str, Any] = json.loads(result.output)
    return document
