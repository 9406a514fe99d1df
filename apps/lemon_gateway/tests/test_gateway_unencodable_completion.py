"""A completion that cannot be encoded still gives exactly one ``run_completed``."""

from __future__ import annotations

from typing import Any

from lemon_core.bus import Bus
from lemon_core.events import ErrorCode, RunUsage
from lemon_core.execution import ExecutionJob, ExecutionResult, ExecutionSink
from lemon_gateway import Gateway
from lemon_platform_test.gateway_kit import RunEvents, command


class _Returns:
    """An executor whose execution returns ``result`` as built (possibly unchecked)."""

    def __init__(self, result: Any, *, stream: str = "") -> None:
        self.result = result
        self.stream = stream

    async def prepare(self, job: ExecutionJob) -> _Returns:
        return self

    async def execute(self, sink: ExecutionSink) -> Any:
        if self.stream:
            sink.delta(self.stream)
        sink.started(resume=object())  # type: ignore[arg-type]  # hostile executor
        return self.result


async def _one_completion(result: Any, **kw: Any) -> tuple[Any, Any, dict[str, Any]]:
    bus = Bus()
    async with Gateway(bus=bus, executor=_Returns(result, **kw)) as gw:  # type: ignore[arg-type]  # structural
        events = RunEvents(bus).watch("r1")
        completion = await gw.submit_execution(command("r1"))
        published = events.completed("r1").payload.completed
        stats = gw.statistics()
    return completion, published, stats


async def test_gateway_unencodable_usage_keeps_the_answer_in_one_completion() -> None:
    usage = RunUsage(model=object())  # type: ignore[arg-type]  # the unchecked constructor
    completion, published, stats = await _one_completion(
        ExecutionResult(ok=True, answer="the answer", usage=usage)
    )
    assert published == completion
    assert completion.ok
    assert completion.answer == "the answer"
    assert completion.usage is None
    assert completion.warning is not None
    assert completion.warning.startswith("usage_dropped: not encodable")
    assert stats.publish_errors == 1
    assert stats.runs.live == 0


async def test_gateway_unencodable_usage_mapping_is_dropped_not_published() -> None:
    completion, published, stats = await _one_completion(
        ExecutionResult(ok=True, answer="a", usage={"raw": object()})  # type: ignore[arg-type]  # unchecked
    )
    assert published == completion
    assert (completion.ok, completion.answer) == (True, "a")
    assert stats.publish_errors == 0


async def test_gateway_result_with_a_non_text_answer_is_a_typed_executor_failure() -> None:
    completion, published, stats = await _one_completion(
        ExecutionResult(ok=True, answer=object()),  # type: ignore[arg-type]  # unchecked
        stream="partial",
    )
    assert published == completion
    assert completion.ok is False
    assert completion.error_code is ErrorCode.EXECUTOR_FAILED
    assert completion.error is not None
    assert completion.error.startswith("invalid_executor_result: answer is a object")
    assert completion.answer == "partial"
    assert stats.runs.live == 0


async def test_gateway_result_with_a_non_text_error_is_a_typed_executor_failure() -> None:
    completion, published, _ = await _one_completion(
        ExecutionResult(ok=False, error=object()),  # type: ignore[arg-type]  # unchecked
    )
    assert published == completion
    assert completion.error_code is ErrorCode.EXECUTOR_FAILED
    assert completion.error is not None
    assert "error is a object" in completion.error
