"""``[subagents]``: the hard bounds of delegation through the ``task`` tool."""

from __future__ import annotations

from typing import Annotated

import msgspec

from lemon_core.config import Section

__all__ = ["SubagentsConfig"]


class SubagentsConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[subagents]``: how far a run may delegate (every bound enforced; none is optional).

    ``max_depth``: how deep a tree of tasks may go (a top-level run is depth 0, its children
    1; a run at ``max_depth`` is not offered the ``task`` tool). ``max_children_per_run``:
    tasks one run may start in its life. ``max_concurrent``: children running at once in this
    daemon (the others wait, ``queued``). ``timeout_s``: a child's deadline when the call names
    none (a call may ask for less, never more than ``max_timeout_s``). ``max_tokens_per_tree``:
    the tokens the children of one top-level run may spend together (once spent, the running
    children are stopped and no new one starts: ``budget_exceeded``). ``answer_share``: the
    share of the parent's context window a child's answer may take in the parent's tool
    result (cut with a note beyond it). ``question_timeout_s``: how long a child's
    ``ask_parent`` waits for an answer when it names no timeout (never past the child's own
    deadline; unanswered, the child's call ends as an error). ``max_repeated_calls``: a child
    that asks for the same tool call (same name, same arguments) this many times is stopped
    before its next model call (``loop``). ``max_usd_per_tree``: the dollars the children of
    one top-level run may spend together, priced per model call from the model's price data
    (a model without prices costs 0 and only the token budget bounds it); once spent the tree
    stops as for tokens (``budget_exceeded``). A ``task`` call may give its child a smaller
    ``budget_usd`` of its own. ``max_turns``: the model calls one child may make (its agent
    definition's ``max_turns`` and the executor's own limit may only lower it; past it the
    child ends ``max_turns`` and the parent gets that error).
    """

    max_depth: Annotated[int, msgspec.Meta(ge=0, le=8)] = 2
    max_children_per_run: Annotated[int, msgspec.Meta(ge=1, le=256)] = 8
    max_concurrent: Annotated[int, msgspec.Meta(ge=1, le=256)] = 8
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 600.0
    max_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 3600.0
    max_tokens_per_tree: Annotated[int, msgspec.Meta(ge=1)] = 2_000_000
    answer_share: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.15
    question_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 300.0
    max_repeated_calls: Annotated[int, msgspec.Meta(ge=2, le=1000)] = 5
    max_usd_per_tree: Annotated[float, msgspec.Meta(gt=0, le=100_000)] = 10.0
    max_turns: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 50
