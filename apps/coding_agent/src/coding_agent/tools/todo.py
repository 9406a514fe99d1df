"""``todo``: the session's task list, read and replaced whole by the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from coding_agent.workspace import Workspace
from lemon_agent import Tool, ToolContext, ToolError

__all__ = ["TodoItem", "TodoList", "todo_tool"]

TodoStatus = Literal["pending", "in_progress", "completed"]
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


@dataclass(frozen=True, kw_only=True, slots=True)
class TodoItem:
    id: str
    content: str
    status: TodoStatus = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


class TodoList:
    """A bounded list of todo items (``capacity`` items; writing more is refused)."""

    def __init__(self, capacity: int = 100) -> None:
        self.capacity = capacity
        self._items: tuple[TodoItem, ...] = ()

    @property
    def items(self) -> tuple[TodoItem, ...]:
        return self._items

    def replace(self, items: list[TodoItem]) -> None:
        if len(items) > self.capacity:
            raise ToolError(f"at most {self.capacity} todo items; got {len(items)}")
        ids = [item.id for item in items]
        if len(set(ids)) != len(ids):
            raise ToolError("todo ids must be unique")
        self._items = tuple(items)

    def render(self) -> str:
        if not self._items:
            return "The todo list is empty."
        done = sum(item.status == "completed" for item in self._items)
        lines = [f"Todo ({done}/{len(self._items)} done):"]
        lines += [
            f"{_MARKS[item.status]} {item.id}. {item.content}"
            + (f" ({item.priority})" if item.priority != "medium" else "")
            for item in self._items
        ]
        return "\n".join(lines)


def todo_tool(workspace: Workspace, todos: TodoList | None = None) -> Tool:
    """The ``todo`` tool over ``todos`` (a new list when not given)."""
    store = todos if todos is not None else TodoList(workspace.limits.max_todos)

    async def execute(ctx: ToolContext) -> str:
        if ctx.arguments.get("action", "read") == "write":
            raw: list[dict[str, Any]] = list(ctx.arguments.get("todos") or [])
            store.replace(
                [
                    TodoItem(
                        id=str(entry.get("id") or position),
                        content=entry["content"],
                        status=entry.get("status", "pending"),
                        priority=entry.get("priority", "medium"),
                    )
                    for position, entry in enumerate(raw, 1)
                ]
            )
        return store.render()

    item_schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "content": {"type": "string", "minLength": 1},
            "status": {"enum": ["pending", "in_progress", "completed"]},
            "priority": {"enum": ["high", "medium", "low"]},
        },
        "required": ["content"],
        "additionalProperties": False,
    }
    return Tool(
        name="todo",
        description=(
            "Keep a task list for this session. action=read shows it; action=write replaces it "
            "with 'todos' (each {id, content, status: pending|in_progress|completed, priority})."
        ),
        execute=execute,
        parameters={
            "type": "object",
            "properties": {
                "action": {"enum": ["read", "write"]},
                "todos": {"type": "array", "items": item_schema,
                          "maxItems": workspace.limits.max_todos},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    )  # fmt: skip
