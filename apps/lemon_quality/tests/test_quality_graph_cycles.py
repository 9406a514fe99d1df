"""The cycle finder: every reported path is a real cycle, and acyclic graphs report none."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from hypothesis import given
from hypothesis import strategies as st

from lemon_quality._graph import cycles

_NODES = [f"app{i}" for i in range(7)]
_GRAPHS = st.dictionaries(
    st.sampled_from(_NODES), st.sets(st.sampled_from(_NODES), max_size=4), max_size=7
)


def _has_cycle(graph: dict[str, set[str]]) -> bool:
    known = {n: {d for d in deps if d in graph} for n, deps in graph.items()}
    try:
        tuple(TopologicalSorter(known).static_order())
    except CycleError:
        return True
    return False


@given(_GRAPHS)
def test_cycles_are_real_and_found_exactly_when_the_graph_has_one(
    graph: dict[str, set[str]],
) -> None:
    found = cycles(graph)
    assert bool(found) == _has_cycle(graph)
    for path in found:
        for a, b in zip(path, [*path[1:], path[0]], strict=True):
            assert b in graph[a], (path, graph)
    assert len({frozenset(p) for p in found}) == len(found)


def test_a_self_loop_is_a_cycle() -> None:
    assert cycles({"a": {"a"}}) == [["a"]]


def test_edges_to_unknown_nodes_are_ignored() -> None:
    assert cycles({"a": {"b"}, "b": {"outside"}}) == []
