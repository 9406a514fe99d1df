"""The session port over the wire: :class:`WebSocketSessionPort` against the real daemon gives
the same typed events, receipts, snapshots and results as the in-process port."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lemon_control_plane import ControlPlane, WebSocketSessionPort, WireError
from lemon_control_plane.testing import until_run_end
from lemon_core.events import ApprovalDecision
from lemon_core.execution import RunRequest, ToolPolicy
from lemon_core.sessions import (
    ApprovalAsked,
    ApprovalEnded,
    RunEnded,
    SessionPort,
    StreamOverflow,
    TextDelta,
    ToolCard,
)

SESSION = "agent:default:main"


@pytest.fixture
async def port(daemon: ControlPlane) -> AsyncIterator[WebSocketSessionPort]:
    async with WebSocketSessionPort(daemon.ws_url, token=daemon.local_token) as client:
        yield client


def request(prompt: str, **kw: object) -> RunRequest:
    return RunRequest(origin="test", session_key=SESSION, prompt=prompt, **kw)  # type: ignore[arg-type]  # test shorthand


async def test_it_is_a_session_port(port: WebSocketSessionPort) -> None:
    assert isinstance(port, SessionPort)


async def test_a_watched_run_streams_typed_events(port: WebSocketSessionPort) -> None:
    stream = port.watch(SESSION)
    receipt = await port.submit(request("/echo over the wire"))
    assert receipt.status == "started"
    events = await until_run_end(stream, receipt.run_id)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == "over the wire"
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.ok
    assert ended.answer == "over the wire"
    stream.close()
    page = await port.transcript(SESSION)
    assert [(e.role, e.text) for e in page.entries][:2] == [
        ("user", "/echo over the wire"),
        ("assistant", "over the wire"),
    ]
    snapshot = await port.snapshot(SESSION)
    assert snapshot.session_key == SESSION
    assert snapshot.active is None


async def test_approvals_and_cancel_over_the_wire(port: WebSocketSessionPort) -> None:
    stream = port.watch(SESSION)
    policy = ToolPolicy(require_approval=frozenset({"bash"}))
    receipt = await port.submit(request('/tool bash {"command": "echo hi"}', tool_policy=policy))
    asked = None
    while asked is None:
        event = await stream.get()
        if isinstance(event, ApprovalAsked):
            asked = event
    snapshot = await port.snapshot(SESSION)
    assert [p.approval_id for p in snapshot.pending_approvals] == [asked.approval_id]
    result = await port.resolve_approval(asked.approval_id, ApprovalDecision.APPROVE_ONCE)
    assert result.resolved
    again = await port.resolve_approval(asked.approval_id, "deny")
    assert not again.resolved
    events = await until_run_end(stream, receipt.run_id)
    assert any(isinstance(e, ApprovalEnded) for e in events)
    assert any(isinstance(e, ToolCard) and e.phase == "completed" for e in events)
    assert (await port.cancel(session_key=SESSION)).cancelled == 0
    with pytest.raises(ValueError, match="exactly one"):
        await port.cancel()


async def test_a_stream_that_falls_behind_ends_with_an_overflow(daemon: ControlPlane) -> None:
    async with WebSocketSessionPort(
        daemon.ws_url, token=daemon.local_token, stream_max_entries=2
    ) as port:
        stream = port.watch(SESSION)
        receipt = await port.submit(request("/echo " + "many words here " * 20))
        other = port.watch(SESSION)
        await until_run_end(other, receipt.run_id)  # the run is over; `stream` never read
        events = [await stream.get(), await stream.get(), await stream.get()]
    assert isinstance(events[-1], StreamOverflow)
    assert port.statistics().streams_overflowed == 1


async def test_other_wire_methods_through_the_port_client(port: WebSocketSessionPort) -> None:
    models = await port.call("models.list")
    pick = models["models"][-1]["id"]
    settings = await port.patch("agent:default:main", model=pick)
    assert settings.model == pick
    detail = await port.call("session.detail", {"sessionKey": "agent:default:main"})
    assert detail["session"]["modelOverride"] == pick
    with pytest.raises(WireError) as missing:
        await port.call("nothing.here", {"sessionKey": "agent:default:main"})
    assert missing.value.code == "METHOD_NOT_FOUND"
    with pytest.raises(WireError) as refused:  # goal.* are lemon_memory's: objective missing
        await port.call("goal.set", {"sessionKey": "agent:default:main"})
    assert refused.value.code == "INVALID_PARAMS"
    with pytest.raises(ValueError, match="sessionKey"):
        await port.call("session.detail", {})


async def test_closing_with_a_watch_or_unwatch_unanswered_leaves_no_unretrieved_future(
    daemon: ControlPlane,
) -> None:
    """A one-shot chat closes its stream (``port.unwatch`` goes out) and then the port at once:
    the request nobody awaits must not end as "Future exception was never retrieved"."""
    import asyncio
    import gc

    loop = asyncio.get_running_loop()
    reported: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(str(context)))
    try:
        for close_the_stream_first in (False, True, False, True):
            async with WebSocketSessionPort(daemon.ws_url, token=daemon.local_token) as client:
                stream = client.watch(SESSION)
                if close_the_stream_first:
                    stream.close()  # port.unwatch goes out, its answer still on the way
            gc.collect()
            await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert not [r for r in reported if "never retrieved" in r], reported
