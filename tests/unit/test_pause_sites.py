"""A pause is told from other outcomes in four places, named here; a fifth is a test failure.

Pausing is a value (``harness.kernel.outcome``): everything else reads what every outcome has
(``reply``, ``pending``, ``record()``). A new kind of pause, or a new reader, should have to
change these four and nothing that found its own way to ask. The check reads the source with
:mod:`ast`: an ``isinstance(..., Paused)`` (alone or in a tuple) or a ``case Paused(...)``
anywhere in ``src/harness`` is a site.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "harness"

SITES = {
    "kernel/outcome.py": "pending_of: what a tool's value waits for (the loop, background tasks)",
    "tools/subagents.py": "a child's outcome becomes its parent's tool value",
    "cli/_common.py": "the exit code of a turn",
    "serve/events.py": "the HTTP events of a turn",
}


def _names(node: ast.expr) -> list[str]:
    """The class names an ``isinstance`` second argument or a case pattern's class spells."""
    match node:
        case ast.Name(id=name) | ast.Attribute(attr=name):
            return [name]
        case ast.Tuple(elts=items):
            return [name for item in items for name in _names(item)]
        case ast.BinOp(op=ast.BitOr(), left=left, right=right):
            return _names(left) + _names(right)
    return []


def pause_tests(source: str) -> int:
    """How many places in ``source`` ask whether something is a ``Paused``.

    An ``isinstance`` is one; a ``match`` with any ``Paused`` case is one, however many cases
    it has.
    """
    found = 0
    for node in ast.walk(ast.parse(source)):
        match node:
            case ast.Call(func=ast.Name(id="isinstance"), args=[_, kinds]):
                found += "Paused" in _names(kinds)
            case ast.Match(cases=cases):
                found += any(
                    "Paused" in _names(pattern.cls)
                    for case in cases
                    for pattern in ast.walk(case.pattern)
                    if isinstance(pattern, ast.MatchClass)
                )
    return found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("isinstance(x, Paused)", 1),
        ("isinstance(x, (Finished, kernel.Paused))", 1),
        ("isinstance(x, Finished | Paused)", 1),
        ("match x:\n    case Paused(pending): pass\n    case Finished(): pass", 1),
        ("match x:\n    case Paused(accepted=False): pass\n    case Paused(): pass", 1),
        ("match x:\n    case Finished() | Paused(): pass", 1),
        ("match x:\n    case outcome.Paused(): pass", 1),
        ("isinstance(x, Finished)", 0),
        ("x.pending", 0),
    ],
)
def test_the_check_finds_every_spelling(source: str, expected: int) -> None:
    assert pause_tests(source) == expected


def test_only_the_four_named_places_tell_a_pause_apart() -> None:
    found = {
        str(path.relative_to(SRC)): count
        for path in sorted(SRC.rglob("*.py"))
        if (count := pause_tests(path.read_text(encoding="utf-8")))
    }

    assert set(found) == set(SITES), (
        "a pause is told apart outside the four named places; read what every outcome has "
        "(reply, pending, record()) or pending_of(value) instead"
    )
    assert all(count == 1 for count in found.values()), found
