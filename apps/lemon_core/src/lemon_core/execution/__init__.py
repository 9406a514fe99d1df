"""Execution contracts shared by router, gateway and executors.

ExecutionCommand / RunRequest / ResumeToken / ExecutionContext / ToolPolicy, the executor
seam (``lemon.executor`` entry point group), the EngineRuntime capability (with its optional
steering and liveness extensions), the RouterBridge and ResumeReadback capabilities and the
VanishedRunListener seam (runs a dead process left in flight), registered on a RuntimeContext.
"""

from __future__ import annotations

from lemon_core.execution._bridge import (
    ROUTER_BRIDGE,
    Receipt,
    ReceiptStatus,
    RouterBridge,
    Unavailable,
    submit_via_bridge,
)
from lemon_core.execution._command import (
    ConversationKey,
    ExecutionCommand,
    Lane,
    QueueMode,
    ResumeMode,
    RunRequest,
    is_conversation_key,
)
from lemon_core.execution._context import (
    ExecutionContext,
    ExecutionLimits,
    Principal,
    PrincipalKind,
)
from lemon_core.execution._editor import (
    EDITOR_METHODS,
    MAX_EDITOR_FRAME_BYTES,
    EditorCallError,
    EditorHandle,
    editor_call,
)
from lemon_core.execution._executor import (
    EXECUTOR_ENTRY_POINT_GROUP,
    ActionKind,
    ActionPhase,
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    Executor,
    PreparedExecution,
    SessionBindingSink,
    SteerableExecution,
)
from lemon_core.execution._mcp_server import (
    MAX_SESSION_MCP_SERVERS,
    McpServerSpec,
    check_mcp_servers,
)
from lemon_core.execution._policy import ALL_TOOLS, ToolPolicy, check_preapproved
from lemon_core.execution._readback import RESUME_READBACK, ResumeReadback
from lemon_core.execution._resume import NATIVE_ENGINE, ResumeToken
from lemon_core.execution._runtime import (
    ENGINE_RUNTIME,
    Capability,
    CapabilityConflictError,
    CapabilityMissingError,
    CapabilityRegistry,
    EngineRuntime,
    RunActionView,
    RunIntrospection,
    RunLiveness,
    RuntimeContext,
    RunView,
    SteerableRuntime,
)
from lemon_core.execution._vanished import VANISHED_RUN_LISTENER, VanishedRun, VanishedRunListener
from lemon_core.execution.errors import (
    ExecutionContractError,
    InvalidToolPolicyError,
    PermissionEscalationError,
    RouterUnavailableError,
)

__all__ = [
    "ALL_TOOLS",
    "EDITOR_METHODS",
    "ENGINE_RUNTIME",
    "EXECUTOR_ENTRY_POINT_GROUP",
    "MAX_EDITOR_FRAME_BYTES",
    "MAX_SESSION_MCP_SERVERS",
    "NATIVE_ENGINE",
    "RESUME_READBACK",
    "ROUTER_BRIDGE",
    "VANISHED_RUN_LISTENER",
    "ActionKind",
    "ActionPhase",
    "Capability",
    "CapabilityConflictError",
    "CapabilityMissingError",
    "CapabilityRegistry",
    "ConversationKey",
    "EditorCallError",
    "EditorHandle",
    "EngineRuntime",
    "ExecutionCommand",
    "ExecutionContext",
    "ExecutionContractError",
    "ExecutionJob",
    "ExecutionLimits",
    "ExecutionResult",
    "ExecutionSink",
    "Executor",
    "InvalidToolPolicyError",
    "Lane",
    "McpServerSpec",
    "PermissionEscalationError",
    "PreparedExecution",
    "Principal",
    "PrincipalKind",
    "QueueMode",
    "Receipt",
    "ReceiptStatus",
    "ResumeMode",
    "ResumeReadback",
    "ResumeToken",
    "RouterBridge",
    "RouterUnavailableError",
    "RunActionView",
    "RunIntrospection",
    "RunLiveness",
    "RunRequest",
    "RunView",
    "RuntimeContext",
    "SessionBindingSink",
    "SteerableExecution",
    "SteerableRuntime",
    "ToolPolicy",
    "Unavailable",
    "VanishedRun",
    "VanishedRunListener",
    "check_mcp_servers",
    "check_preapproved",
    "editor_call",
    "is_conversation_key",
    "submit_via_bridge",
]
