"""Execution contracts: commands, resume tokens, tool policy, execution context, capabilities."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_core.execution import (
    ENGINE_RUNTIME,
    CapabilityConflictError,
    CapabilityMissingError,
    ExecutionCommand,
    ExecutionContext,
    ExecutionContractError,
    ExecutionLimits,
    InvalidToolPolicyError,
    PermissionEscalationError,
    Principal,
    ResumeToken,
    RunRequest,
    RuntimeContext,
    ToolPolicy,
)


def test_execution_command_freezes_meta_and_accepts_a_router_key() -> None:
    meta = {"origin": "cli"}
    cmd = ExecutionCommand(
        run_id="r1", session_key="s", prompt="hi", conversation_key=("session", "s"), meta=meta
    )
    meta["origin"] = "changed"
    assert cmd.meta["origin"] == "cli"
    with pytest.raises(TypeError):
        cmd.meta["x"] = 1  # type: ignore[index]  # proving the mapping is read-only


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"run_id": ""}, "run_id"),
        ({"session_key": 3}, "session_key"),
        ({"conversation_key": "session:s"}, "conversation_key"),
        ({"conversation_key": ()}, "conversation_key"),
        ({"lane": "fast"}, "lane"),
        ({"resume": {"engine": "lemon", "value": "x"}}, "resume"),
        ({"tool_policy": {"allow": "bash"}}, "allow"),
    ],
)
def test_execution_command_rejects_bad_fields_with_the_field_name(
    kwargs: dict[str, object], match: str
) -> None:
    base: dict[str, object] = {"run_id": "r1", "session_key": "s", "prompt": "p"}
    base.update(kwargs)
    with pytest.raises(ExecutionContractError, match=match):
        ExecutionCommand(**base)  # type: ignore[arg-type]  # deliberately bad input


def test_execution_command_has_no_runner_identity() -> None:
    fields = set(ExecutionCommand.__dataclass_fields__) | set(RunRequest.__dataclass_fields__)
    assert not {"engine", "engine_id", "runner"} & fields


def test_execution_run_request_validates_queue_mode() -> None:
    with pytest.raises(ExecutionContractError, match="queue_mode"):
        RunRequest(origin="cli", session_key="s", prompt="p", queue_mode="later")  # type: ignore[arg-type]  # bad on purpose
    req = RunRequest(origin="cli", session_key="s", prompt="p", tool_policy={"deny": ["bash"]})  # type: ignore[arg-type]  # coerced
    assert isinstance(req.tool_policy, ToolPolicy)


def test_execution_resume_token_native_and_round_trip() -> None:
    tok = ResumeToken.native("abc")
    assert tok.is_native
    assert not ResumeToken(engine="codex", value="x").is_native
    assert ResumeToken.from_dict(tok.to_dict()) == tok
    assert ResumeToken.extract("please `lemon resume ab_c-1` now") == ResumeToken.native("ab_c-1")
    assert ResumeToken.extract("nothing here") is None
    with pytest.raises(ExecutionContractError, match="engine"):
        ResumeToken(engine=" ", value="x")
    with pytest.raises(ExecutionContractError, match="unknown"):
        ResumeToken.from_dict({"engine": "lemon", "value": "x", "extra": 1})


def test_execution_tool_policy_is_strict_about_supplied_data() -> None:
    with pytest.raises(InvalidToolPolicyError, match="unknown tool policy keys"):
        ToolPolicy.from_mapping({"allow": ["read"], "alow": ["bash"]})
    with pytest.raises(InvalidToolPolicyError, match="mapping"):
        ToolPolicy.from_mapping(["read"])
    with pytest.raises(InvalidToolPolicyError, match="invalid tool name"):
        ToolPolicy.from_mapping({"deny": ["", "bash"]})
    policy = ToolPolicy.from_mapping({"allow": ["read", "bash"], "deny": ["bash"]})
    assert policy.permits("read")
    assert not policy.permits("bash")
    assert not policy.permits("x")


names = st.frozensets(st.sampled_from(["read", "write", "bash", "web", "task"]))
policies = st.builds(ToolPolicy, allow=st.none() | names, deny=names, require_approval=names)


@given(policies, policies, st.sampled_from(["read", "write", "bash", "web", "task"]))
def test_execution_tool_policy_intersection_never_widens(
    a: ToolPolicy, b: ToolPolicy, tool: str
) -> None:
    both = a.intersect(b)
    assert both.permits(tool) == (a.permits(tool) and b.permits(tool))
    assert both.needs_approval(tool) == (a.needs_approval(tool) or b.needs_approval(tool))
    assert both.is_within(a)
    assert both.is_within(b)


def _root() -> ExecutionContext:
    return ExecutionContext(
        run_id="root",
        principal=Principal(kind="user", id="u1"),
        origin="cli",
        workspace="/srv/project",
        capabilities=frozenset({"fs.read", "fs.write", "net"}),
        tool_policy=ToolPolicy(allow=frozenset({"read", "write"})),
        limits=ExecutionLimits(max_tool_calls=10, max_depth=2),
    )


def test_execution_context_child_is_the_intersection_of_authority() -> None:
    parent = _root()
    child = parent.child(
        run_id="c1",
        capabilities={"fs.read"},
        tool_policy=ToolPolicy(allow=frozenset({"read", "bash"})),
        limits=ExecutionLimits(max_tool_calls=50, max_runtime_ms=1000),
        workspace="/srv/project/sub",
    )
    assert child.capabilities == {"fs.read"}
    assert child.tool_policy.permits("read")
    assert not child.tool_policy.permits("bash")
    assert child.limits.max_tool_calls == 10
    assert child.limits.max_runtime_ms == 1000
    assert (child.parent_run_id, child.root_run_id, child.depth) == ("root", "root", 1)
    assert child.workspace == "/srv/project/sub"


def test_execution_context_refuses_escalation_clearly() -> None:
    parent = _root()
    with pytest.raises(PermissionEscalationError, match=r"\['shell'\]"):
        parent.child(run_id="c", capabilities={"fs.read", "shell"})
    with pytest.raises(PermissionEscalationError, match="outside"):
        parent.child(run_id="c", workspace="/etc")
    narrowed = parent.child(run_id="c", capabilities={"shell", "net"}, strict=False)
    assert narrowed.capabilities == {"net"}
    grandchild = parent.child(run_id="c").child(run_id="g")
    with pytest.raises(PermissionEscalationError, match="max_depth"):
        grandchild.child(run_id="too-deep")


def test_execution_context_wire_form_is_versioned_and_revalidated() -> None:
    ctx = _root().child(run_id="c1")
    assert ExecutionContext.from_dict(ctx.to_dict()) == ctx
    bad = ctx.to_dict() | {"version": 99}
    with pytest.raises(ExecutionContractError, match="version"):
        ExecutionContext.from_dict(bad)
    forged = ctx.to_dict()
    forged["tool_policy"] = {"allow": ["read"], "sudo": True}
    with pytest.raises(InvalidToolPolicyError):
        ExecutionContext.from_dict(forged)


class _Runtime:
    def submit_execution(self, command: ExecutionCommand) -> None:
        return None

    def cancel(self, run_id: str, reason: str = "user_requested") -> bool:
        return False

    def available(self) -> bool:
        return True


def test_execution_capabilities_live_on_an_explicit_runtime_context() -> None:
    one, two = RuntimeContext(name="one"), RuntimeContext(name="two")
    impl = _Runtime()
    one.capabilities.register(ENGINE_RUNTIME, impl)
    assert one.capabilities.require(ENGINE_RUNTIME) is impl
    assert two.capabilities.get(ENGINE_RUNTIME) is None
    with pytest.raises(CapabilityMissingError, match="lemon_gateway"):
        two.capabilities.require(ENGINE_RUNTIME)
    with pytest.raises(CapabilityConflictError):
        one.capabilities.register(ENGINE_RUNTIME, _Runtime())
    assert one.capabilities.unregister(ENGINE_RUNTIME, impl)
    assert one.capabilities.statistics() == {}
