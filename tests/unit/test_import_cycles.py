"""No two modules of the harness import each other, however indirectly.

``test_layering.py`` holds packages to the layers; this holds modules inside a package too
(``serve/state.py`` and ``serve/turns.py`` once imported each other, and ``cli/main.py`` and the
command modules it registers). Imports are read from the source with :mod:`ast`, so a deferred
import inside a function and one under ``if TYPE_CHECKING:`` count as any other: each still
says that one module needs the other, and hiding it from the interpreter does not undo that.
What two modules share belongs in a module below both.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Set
from typing import Final

import pytest
from _imports import module_graph, module_imports

KNOWN: Final = frozenset[frozenset[str]]()
"""Cycles left to break, each to be removed from here by the commit that breaks it (none)."""


def circles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module, each sorted.

    Tarjan's algorithm, iterative: a chain of imports may be longer than the recursion limit
    allows for.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def one_cycle(graph: Mapping[str, Set[str]], component: list[str]) -> list[str]:
    """A shortest import cycle through the first module of ``component``, for the message."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{component} is not a cycle")  # pragma: no cover


def test_no_modules_import_each_other() -> None:
    graph = module_graph()
    found = circles(graph)
    new = [c for c in found if frozenset(c) not in KNOWN]

    assert not new, "import cycles:\n" + "\n".join(" -> ".join(one_cycle(graph, c)) for c in new)


def test_the_known_cycles_still_exist() -> None:
    """A cycle broken is taken off :data:`KNOWN`, so it cannot come back unseen."""
    found = {frozenset(c) for c in circles(module_graph())}

    assert found >= KNOWN, (
        f"no longer cycles, remove from KNOWN: {sorted(map(sorted, KNOWN - found))}"
    )


def test_the_graph_has_the_modules_and_their_imports() -> None:
    graph = module_graph()

    assert "harness.serve.turns" in graph["harness.serve.streams"]
    assert "harness.cli._agent" in graph["harness.cli.main"]
    assert "harness.agent" in graph["harness"]


MODULES = frozenset({"harness", "harness.a", "harness.b", "harness.p", "harness.p.c"})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import harness.a", {"harness.a"}),
        ("from harness import a, nothing", {"harness.a", "harness"}),
        ("from harness.p import c", {"harness.p.c"}),
        ("from harness.p import NAME", {"harness.p"}),
        ("def f():\n    from harness.b import x", {"harness.b"}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import harness.b",
            {"harness.b"},
        ),
        ("from . import c", {"harness.p.c"}),
        ("from .. import b", {"harness.b"}),
        ("from ..a import x", {"harness.a"}),
        ("import json\nfrom harnessing import a", set()),
    ],
)
def test_the_reading_itself(source: str, expected: set[str]) -> None:
    assert module_imports(source, "harness.p", MODULES) == expected


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_the_cycle_finder_itself(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert circles(graph) == expected


def test_a_cycle_is_shown_as_a_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}

    assert one_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
