"""The native coding executor of the gateway (``lemon.executor`` entry point).

``CodingExecutor`` runs a coding session per run: JSONL transcripts under ``$LEMON_HOME``
(resumed with the native token), the system prompt from the workspace, the coding tools
(``read``, ``write``, ``edit``, ``ls``, ``find``, ``grep``, ``bash``, ``todo``) gated by the tool
policy and approvals, agent events mapped to the gateway's run events, and compaction that keeps
a session inside its model's context window (``CodingExecutor.compact`` on demand).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
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

#: Where each facade name lives (the lazy loader reads it; the TYPE_CHECKING imports
#: repeat it for type checkers, ``__all__`` for the architecture gate).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "BashToolConfig": ("coding_agent._sections", "BashToolConfig"),
    "FileAccessConfig": ("coding_agent._sections", "FileAccessConfig"),
    "ToolsConfig": ("coding_agent._sections", "ToolsConfig"),
    "DEFAULT_SECRET_PATTERNS": ("coding_agent.access", "DEFAULT_SECRET_PATTERNS"),
    "FileAccess": ("coding_agent.access", "FileAccess"),
    "FileIdentity": ("coding_agent.access", "FileIdentity"),
    "CompactionInfo": ("coding_agent.compaction", "CompactionInfo"),
    "CompactionReason": ("coding_agent.compaction", "CompactionReason"),
    "CompactionSettings": ("coding_agent.compaction", "CompactionSettings"),
    "Compactor": ("coding_agent.compaction", "Compactor"),
    "context_budget": ("coding_agent.compaction", "context_budget"),
    "estimate_tokens": ("coding_agent.compaction", "estimate_tokens"),
    "tool_result_cap": ("coding_agent.compaction", "tool_result_cap"),
    "ALWAYS_SCRUBBED": ("coding_agent.environment", "ALWAYS_SCRUBBED"),
    "SECRET_ENV_PATTERNS": ("coding_agent.environment", "SECRET_ENV_PATTERNS"),
    "config_secret_names": ("coding_agent.environment", "config_secret_names"),
    "is_secret_name": ("coding_agent.environment", "is_secret_name"),
    "tool_environment": ("coding_agent.environment", "tool_environment"),
    "tool_environment_for": ("coding_agent.environment", "tool_environment_for"),
    "CodingAgentError": ("coding_agent.errors", "CodingAgentError"),
    "CodingAgentUsageError": ("coding_agent.errors", "CodingAgentUsageError"),
    "CompactionError": ("coding_agent.errors", "CompactionError"),
    "CorruptTranscriptError": ("coding_agent.errors", "CorruptTranscriptError"),
    "SessionNotFoundError": ("coding_agent.errors", "SessionNotFoundError"),
    "TranscriptError": ("coding_agent.errors", "TranscriptError"),
    "CodingExecution": ("coding_agent.executor", "CodingExecution"),
    "CodingExecutor": ("coding_agent.executor", "CodingExecutor"),
    "ExecutorSettings": ("coding_agent.executor", "ExecutorSettings"),
    "ExecutorStatistics": ("coding_agent.executor", "ExecutorStatistics"),
    "check_model": ("coding_agent.executor", "check_model"),
    "known_providers": ("coding_agent.executor", "known_providers"),
    "resolve_model": ("coding_agent.executor", "resolve_model"),
    "DEFAULT_TOOL_POLICY": ("coding_agent.policy", "DEFAULT_TOOL_POLICY"),
    "FILE_TOOLS": ("coding_agent.policy", "FILE_TOOLS"),
    "READ_ONLY_TOOLS": ("coding_agent.policy", "READ_ONLY_TOOLS"),
    "ApprovalHooks": ("coding_agent.policy", "ApprovalHooks"),
    "GateContext": ("coding_agent.policy", "GateContext"),
    "approval_action": ("coding_agent.policy", "approval_action"),
    "check_gate": ("coding_agent.policy", "check_gate"),
    "gate_tools": ("coding_agent.policy", "gate_tools"),
    "shell_action": ("coding_agent.policy", "shell_action"),
    "PromptLimits": ("coding_agent.prompt", "PromptLimits"),
    "build_system_prompt": ("coding_agent.prompt", "build_system_prompt"),
    "project_instruction_files": ("coding_agent.prompt", "project_instruction_files"),
    "SUMMARY_PREFIX": ("coding_agent.session", "SUMMARY_PREFIX"),
    "TRANSCRIPT_VERSION": ("coding_agent.session", "TRANSCRIPT_VERSION"),
    "SessionStore": ("coding_agent.session", "SessionStore"),
    "Transcript": ("coding_agent.session", "Transcript"),
    "summary_message": ("coding_agent.session", "summary_message"),
    "valid_session_id": ("coding_agent.session", "valid_session_id"),
    "TodoItem": ("coding_agent.tools", "TodoItem"),
    "TodoList": ("coding_agent.tools", "TodoList"),
    "bash_tool": ("coding_agent.tools", "bash_tool"),
    "coding_tool_registry": ("coding_agent.tools", "coding_tool_registry"),
    "coding_tools": ("coding_agent.tools", "coding_tools"),
    "edit_tool": ("coding_agent.tools", "edit_tool"),
    "find_tool": ("coding_agent.tools", "find_tool"),
    "grep_tool": ("coding_agent.tools", "grep_tool"),
    "ls_tool": ("coding_agent.tools", "ls_tool"),
    "read_tool": ("coding_agent.tools", "read_tool"),
    "todo_tool": ("coding_agent.tools", "todo_tool"),
    "write_tool": ("coding_agent.tools", "write_tool"),
    "CodingLimits": ("coding_agent.workspace", "CodingLimits"),
    "Workspace": ("coding_agent.workspace", "Workspace"),
}

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


def __getattr__(name: str) -> Any:
    """Load a facade name on first use (PEP 562): importing one submodule of the package (its
    config section, say) does not load the rest."""
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = where
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
