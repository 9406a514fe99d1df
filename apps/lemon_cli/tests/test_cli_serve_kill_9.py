"""``kill -9`` of a real ``lemon serve`` mid-run on the default SQLite home, then restarts:
anything accepted completes exactly once.

A run accepted through a webhook is mid-answer (the scripted model server holds its stream at a
gate: an event, no sleep) when the daemon is killed. After a restart the run has exactly one
``vanished`` completion in the run history (never executed again: the model is asked once), its
prompt is in the session's transcript (the session key was mapped to the native session when
the run started, and the prompt was written before the model was asked), and the webhook key
answers ``outcome_unknown`` instead of replaying ``202 accepted`` for a run that never finished.
A second restart changes none of that."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import msgspec

from lemon_control_plane.local_token import read_local_token
from lemon_control_plane.testing import wire_client
from lemon_core.events import ErrorCode
from lemon_core.store import RunStore
from lemon_infra import SQLiteStore
from lemon_platform_test.lemon_process import lemon_env, start_serve, stop_serve
from lemon_platform_test.providers import Gate, ScriptedProviderServer, ScriptedTurn
from lemon_webhooks import WebhookSecret, sign_webhook

SECRET = WebhookSecret(b"s" * 32)
SESSION = "agent:default:webhook:ci:channel:ci"
PROMPT = "the nightly build failed, find out why"


def write_home(home: Path, server: ScriptedProviderServer) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        '[defaults]\nmodel = "scripted:test-model"\n'
        '[providers.scripted]\nkind = "openai_completions"\n'
        f'base_url = "{server.openai_base_url}"\n'
        "[webhooks]\nenabled = true\n"
        '[[webhooks.endpoints]]\nid = "ci"\nsecret_env = "CI_HOOK_SECRET"\n',
        encoding="utf-8",
    )
    (home / "secrets.env").write_text(f"CI_HOOK_SECRET={SECRET.text()}\n", encoding="utf-8")


def signed(body: bytes, key: str) -> dict[str, str]:
    msg_id, ts = f"msg_{uuid.uuid4().hex}", int(time.time())
    return {
        "content-type": "application/json",
        "idempotency-key": key,
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign_webhook(SECRET, msg_id, ts, body),
    }


def ws_of(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


async def after_restart(env: dict[str, str], work: Path, payload: bytes, run_id: str) -> None:
    """One restart: the key's answer, the session's transcript and the run's history."""
    proc, url = start_serve(env, work)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            replay = await http.post("/webhooks/ci", content=payload, headers=signed(payload, "k1"))
        assert replay.status_code == 202, replay.content
        assert msgspec.json.decode(replay.content) == {
            "status": "outcome_unknown",
            "run_id": run_id,
            "retry_safe": False,
        }
        token = read_local_token(Path(env["LEMON_HOME"]))
        async with wire_client(ws_of(url), token=token)() as client:
            history = await client.call("chat.history", {"sessionKey": SESSION})
            recent = await client.call("runs.recent.list", {"limit": 50})
        turns = [(m["role"], m["content"]) for m in history["messages"]]
        assert ("user", PROMPT) in turns, history
        rows = [r for r in recent["runs"] if r["runId"] == run_id]
        assert len(rows) == 1, recent
        assert rows[0]["errorCode"] == "vanished"
        assert rows[0]["ok"] is False
    finally:
        stop_serve(proc, graceful=True)


async def test_a_run_killed_mid_answer_completes_once_as_vanished_and_keeps_its_prompt(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    gate = Gate()
    with ScriptedProviderServer() as server:
        server.script(ScriptedTurn(text="an answer that never ends", chunk_size=4, pause=gate))
        write_home(home, server)
        env = lemon_env(tmp_path, home=home)
        payload = msgspec.json.encode({"prompt": PROMPT})
        proc, url = start_serve(env, work)
        try:
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                accepted = await http.post(
                    "/webhooks/ci", content=payload, headers=signed(payload, "k1")
                )
            assert accepted.status_code == 202, accepted.content
            answer: dict[str, Any] = msgspec.json.decode(accepted.content)
            assert answer["status"] == "accepted"
            run_id = answer["run_id"]
            assert await gate.wait_reached_async(60)  # the model is mid-answer
            proc.kill()  # SIGKILL: no goodbye
            await asyncio.to_thread(proc.wait, 30)
        finally:
            stop_serve(proc)
            gate.open()  # the stream's client is gone; let the server thread end it
        await after_restart(env, work, payload, run_id)
        await after_restart(env, work, payload, run_id)  # again: still exactly one
        assert len(server.requests) == 1  # the run was never executed again
    async with await SQLiteStore.open(home / "store" / "lemon.sqlite3") as store:
        runs = await RunStore(store).history(SESSION)
    assert [(r.run_id, r.error_code) for r in runs] == [(run_id, ErrorCode.VANISHED)]
    assert "was not executed again" in (runs[0].error or "")
