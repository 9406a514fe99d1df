"""The coding tools, as lemon_agent tools."""

from __future__ import annotations

from coding_agent.tools.bash import bash_tool
from coding_agent.tools.editor import (
    disk_view,
    editor_bash_tool,
    editor_edit_tool,
    editor_read_tool,
    editor_write_tool,
)
from coding_agent.tools.files import edit_tool, read_tool, write_tool
from coding_agent.tools.search import find_tool, grep_tool, ls_tool
from coding_agent.tools.todo import TodoItem, TodoList, todo_tool
from coding_agent.workspace import Workspace
from lemon_agent import Tool, ToolRegistry
from lemon_core.execution import EditorHandle

__all__ = [
    "TodoItem",
    "TodoList",
    "bash_tool",
    "coding_tool_registry",
    "coding_tools",
    "disk_view",
    "edit_tool",
    "editor_bash_tool",
    "editor_edit_tool",
    "editor_read_tool",
    "editor_write_tool",
    "find_tool",
    "grep_tool",
    "ls_tool",
    "read_tool",
    "todo_tool",
    "write_tool",
]


def coding_tools(
    workspace: Workspace, *, todos: TodoList | None = None, editor: EditorHandle | None = None
) -> list[Tool]:
    """The default coding tools in their stable order: read, write, edit, ls, find, grep, bash,
    todo. With ``editor`` (an ACP client's file system and terminal), read / write / edit /
    bash go through the editor where it offers them (edit needs read and write); ls / find /
    grep still read the disk (ACP has no listing or search call) and say so."""
    read, write, edit, bash = (
        read_tool(workspace),
        write_tool(workspace),
        edit_tool(workspace),
        bash_tool(workspace),
    )
    search = [ls_tool(workspace), find_tool(workspace), grep_tool(workspace)]
    if editor is not None:
        if editor.read:
            read = editor_read_tool(workspace, editor)
            search = [disk_view(t) for t in search]  # ACP has no listing or search call
        if editor.write:
            write = editor_write_tool(workspace, editor)
        if editor.read and editor.write:
            edit = editor_edit_tool(workspace, editor)
        if editor.terminal:
            bash = editor_bash_tool(workspace, editor)
    return [
        read,
        write,
        edit,
        *search,
        bash,
        todo_tool(workspace, todos),
    ]


def coding_tool_registry(workspace: Workspace, *, todos: TodoList | None = None) -> ToolRegistry:
    """A registry holding :func:`coding_tools`."""
    return ToolRegistry(coding_tools(workspace, todos=todos))
