"""Cycles in a dependency graph: one representative per strongly connected component
(:func:`cycles`), or every elementary cycle up to a bound (:func:`elementary_cycles`)."""

from __future__ import annotations

from collections.abc import Mapping


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One representative cycle per strongly connected component (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in graph.get(node, ()):
                    comps.append(sorted(comp))
    return [_cycle_path(graph, comp) for comp in comps]


def _cycle_path(graph: Mapping[str, set[str]], comp: list[str]) -> list[str]:
    start = comp[0]
    members = set(comp)
    prev: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in members:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return list(reversed(path))
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return [start]


def elementary_cycles(
    graph: Mapping[str, set[str]], *, limit: int = 100, budget: int = 200_000
) -> tuple[list[list[str]], bool]:
    """Every elementary cycle (no repeated node), each once, starting at its smallest node.

    Bounded: at most ``limit`` cycles and ``budget`` search steps; the flag says whether the
    search stopped early (then more cycles may exist). Deterministic: nodes in sorted order.
    """
    nodes = sorted(graph)
    out: list[list[str]] = []
    steps = 0
    for start in nodes:
        # Only cycles whose smallest node is ``start``: search nodes >= start.
        path = [start]
        on_path = {start}
        stack = [iter(sorted(n for n in graph.get(start, ()) if n in graph and n >= start))]
        while stack:
            steps += 1
            if steps > budget or len(out) >= limit:
                return out, True
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                on_path.discard(path.pop())
                continue
            if nxt == start:
                out.append(list(path))
                continue
            if nxt in on_path:
                continue
            path.append(nxt)
            on_path.add(nxt)
            stack.append(iter(sorted(n for n in graph.get(nxt, ()) if n in graph and n >= start)))
    return out, False
