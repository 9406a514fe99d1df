"""The native coding executor: coding tools (and, later, the session and executor).

This first part provides the coding tools as lemon_agent tools: ``read`` (line ranges),
``write``, ``edit`` (exact unique replacement), ``ls``, ``find``, ``grep``, ``bash`` (process
group killed on timeout, abort or cancellation; bounded output) and ``todo``.
"""

from __future__ import annotations

from coding_agent.errors import CodingAgentError, CodingAgentUsageError
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
    "CodingAgentError",
    "CodingAgentUsageError",
    "CodingLimits",
    "TodoItem",
    "TodoList",
    "Workspace",
    "bash_tool",
    "coding_tool_registry",
    "coding_tools",
    "edit_tool",
    "find_tool",
    "grep_tool",
    "ls_tool",
    "read_tool",
    "todo_tool",
    "write_tool",
]
