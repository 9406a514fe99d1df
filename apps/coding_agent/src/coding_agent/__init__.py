"""The native coding executor of the gateway (``lemon.executor`` entry point).

``CodingExecutor`` runs a coding session per run: JSONL transcripts under ``$LEMON_HOME``
(resumed with the native token), the system prompt from the workspace, the coding tools
(``read``, ``write``, ``edit``, ``ls``, ``find``, ``grep``, ``bash``, ``todo``) gated by the tool
policy and approvals, agent events mapped to the gateway's run events, and compaction that keeps
a session inside its model's context window (``CodingExecutor.compact`` on demand).
"""

from __future__ import annotations

from coding_agent._sections import BashToolConfig, FileAccessConfig, ToolsConfig
from coding_agent.access import DEFAULT_SECRET_PATTERNS, FileAccess, FileIdentity
from coding_agent.compaction import (
    CompactionInfo,
    CompactionReason,
    CompactionSettings,
    Compactor,
    context_budget,
    estimate_tokens,
    tool_result_cap,
)
from coding_agent.environment import (
    ALWAYS_SCRUBBED,
    SECRET_ENV_PATTERNS,
    config_secret_names,
    is_secret_name,
    tool_environment,
    tool_environment_for,
)
from coding_agent.errors import (
    CodingAgentError,
    CodingAgentUsageError,
    CompactionError,
    CorruptTranscriptError,
    SessionNotFoundError,
    TranscriptError,
)
from coding_agent.executor import (
    CodingExecution,
    CodingExecutor,
    ExecutorSettings,
    ExecutorStatistics,
    check_model,
    known_providers,
    resolve_model,
)
from coding_agent.policy import (
    DEFAULT_TOOL_POLICY,
    FILE_TOOLS,
    READ_ONLY_TOOLS,
    ApprovalHooks,
    GateContext,
    approval_action,
    check_gate,
    gate_tools,
    shell_action,
)
from coding_agent.prompt import PromptLimits, build_system_prompt, project_instruction_files
from coding_agent.session import (
    SUMMARY_PREFIX,
    TRANSCRIPT_VERSION,
    SessionStore,
    Transcript,
    summary_message,
    valid_session_id,
)
from coding_agent.tools import (
    TodoItem,
    TodoList,
    bash_tool,
    coding_tool_registry,
    coding_tools,
    edit_tool,
    find_tool,
    grep_tool,
    ls_tool,
    read_tool,
    todo_tool,
    write_tool,
)
from coding_agent.workspace import CodingLimits, Workspace

__all__ = [
    "ALWAYS_SCRUBBED",
    "DEFAULT_SECRET_PATTERNS",
    "DEFAULT_TOOL_POLICY",
    "FILE_TOOLS",
    "READ_ONLY_TOOLS",
    "SECRET_ENV_PATTERNS",
    "SUMMARY_PREFIX",
    "TRANSCRIPT_VERSION",
    "ApprovalHooks",
    "BashToolConfig",
    "CodingAgentError",
    "CodingAgentUsageError",
    "CodingExecution",
    "CodingExecutor",
    "CodingLimits",
    "CompactionError",
    "CompactionInfo",
    "CompactionReason",
    "CompactionSettings",
    "Compactor",
    "CorruptTranscriptError",
    "ExecutorSettings",
    "ExecutorStatistics",
    "FileAccess",
    "FileAccessConfig",
    "FileIdentity",
    "GateContext",
    "PromptLimits",
    "SessionNotFoundError",
    "SessionStore",
    "TodoItem",
    "TodoList",
    "ToolsConfig",
    "Transcript",
    "TranscriptError",
    "Workspace",
    "approval_action",
    "bash_tool",
    "build_system_prompt",
    "check_gate",
    "check_model",
    "coding_tool_registry",
    "coding_tools",
    "config_secret_names",
    "context_budget",
    "edit_tool",
    "estimate_tokens",
    "find_tool",
    "gate_tools",
    "grep_tool",
    "is_secret_name",
    "known_providers",
    "ls_tool",
    "project_instruction_files",
    "read_tool",
    "resolve_model",
    "shell_action",
    "summary_message",
    "todo_tool",
    "tool_environment",
    "tool_environment_for",
    "tool_result_cap",
    "valid_session_id",
    "write_tool",
]
