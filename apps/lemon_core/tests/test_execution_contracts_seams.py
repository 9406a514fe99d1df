"""The seams lemon_core owns for the router and the gateway: RunRequest's model and images, the
RouterBridge capability (``submit_via_bridge`` answers Unavailable instead of raising), and the
optional steering / liveness protocols."""

from __future__ import annotations

from typing import Any

import pytest

from lemon_core.execution import (
    ROUTER_BRIDGE,
    ExecutionCommand,
    ExecutionContractError,
    ExecutionResult,
    ExecutionSink,
    PreparedExecution,
    Receipt,
    RouterUnavailableError,
    RunLiveness,
    RunRequest,
    RuntimeContext,
    SteerableExecution,
    SteerableRuntime,
    Unavailable,
    submit_via_bridge,
)

IMAGE = {"type": "image", "mime_type": "image/png", "data": "aGk="}


def request(**kw: Any) -> RunRequest:
    kw.setdefault("prompt", "hi")
    return RunRequest(origin="test", session_key="agent:a:main", **kw)


def test_run_request_carries_a_typed_model_and_images() -> None:
    plain = request()
    assert (plain.model, plain.images) == (None, ())
    given = request(model="local:qwen", images=[IMAGE])
    assert given.model == "local:qwen"
    assert given.images == (IMAGE,)
    assert isinstance(given.images, tuple)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"model": "  "}, r"RunRequest\.model must be a non-blank string"),
        ({"model": 3}, r"RunRequest\.model must be a non-blank string"),
        ({"images": "cat.png"}, r"RunRequest\.images must be a sequence of image mappings"),
        ({"images": IMAGE}, r"RunRequest\.images must be a sequence of image mappings"),
        ({"images": ["cat.png"]}, r"RunRequest\.images\[0\] must be a mapping"),
        ({"images": 7}, r"RunRequest\.images must be a sequence"),
    ],
)
def test_run_request_rejects_a_bad_model_or_images(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ExecutionContractError, match=message):
        request(**fields)


def test_execution_command_checks_each_image() -> None:
    with pytest.raises(ExecutionContractError, match=r"ExecutionCommand\.images\[1\]"):
        ExecutionCommand(run_id="r", session_key="s", prompt="p", images=[IMAGE, "x"])


class _Bridge:
    def __init__(self, *, running: bool = True, raise_unavailable: bool = False) -> None:
        self._running = running
        self._raise = raise_unavailable
        self.seen: list[RunRequest] = []

    async def submit(self, request: RunRequest) -> Receipt:
        if self._raise:
            raise RouterUnavailableError("the router is stopping")
        if not request.prompt:
            raise ValueError("empty prompt")
        self.seen.append(request)
        return Receipt(
            run_id="r1",
            session_key=request.session_key,
            requested_mode=request.queue_mode,
            actual_mode=request.queue_mode,
            status="started",
            at_ms=1,
        )

    def running(self) -> bool:
        return self._running


async def test_submit_via_bridge_answers_unavailable_instead_of_raising() -> None:
    context = RuntimeContext()
    outcome = await submit_via_bridge(context.capabilities, request())
    assert outcome == Unavailable(reason="no router is registered on this runtime")
    assert outcome.status == "unavailable"

    stopped = _Bridge(running=False)
    context.capabilities.register(ROUTER_BRIDGE, stopped)
    assert await submit_via_bridge(context.capabilities, request()) == Unavailable(
        reason="the router is not running"
    )
    context.capabilities.unregister(ROUTER_BRIDGE, stopped)

    racing = _Bridge(raise_unavailable=True)
    context.capabilities.register(ROUTER_BRIDGE, racing)
    assert await submit_via_bridge(context.capabilities, request()) == Unavailable(
        reason="the router is stopping"
    )
    context.capabilities.unregister(ROUTER_BRIDGE, racing)

    bridge = _Bridge()
    context.capabilities.register(ROUTER_BRIDGE, bridge)
    receipt = await submit_via_bridge(context.capabilities, request())
    assert isinstance(receipt, Receipt)
    assert receipt.status == "started"
    with pytest.raises(ValueError, match="empty prompt"):  # bad input still raises
        await submit_via_bridge(context.capabilities, request(prompt=""))


def test_router_bridge_registration_checks_the_protocol() -> None:
    context = RuntimeContext()
    with pytest.raises(TypeError, match="does not implement RouterBridge"):
        context.capabilities.register(ROUTER_BRIDGE, object())  # type: ignore[arg-type]


class _Plain:
    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        return ExecutionResult(ok=True)


class _Steerable(_Plain):
    def steer(self, text: str) -> bool:
        return bool(text)


class _Runtime:
    def steer(self, run_id: str, text: str) -> bool:
        return False

    def is_live(self, run_id: str) -> bool:
        return False


def test_steering_and_liveness_are_optional_runtime_checkable_protocols() -> None:
    assert isinstance(_Plain(), PreparedExecution)
    assert not isinstance(_Plain(), SteerableExecution)
    assert isinstance(_Steerable(), SteerableExecution)
    assert isinstance(_Runtime(), SteerableRuntime)
    assert isinstance(_Runtime(), RunLiveness)
    assert not isinstance(object(), SteerableRuntime)
    assert not isinstance(object(), RunLiveness)
