"""The exception tree drawn in ``harness.errors``' docstring is the real one."""

from __future__ import annotations

import re

import harness.errors


def _drawn() -> dict[str, str | None]:
    """Each class of the drawn tree and its drawn parent (None for the root)."""
    doc = harness.errors.__doc__ or ""
    block = doc.split("::", 1)[1].split("\n\n", 2)[1]  # the indented block after "::"
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = re.search(r"[A-Z]\w+", line[4:])  # the block is indented by four
        assert match is not None, line
        depth = match.start() // 4  # each level of the drawing is four characters wide
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[match.group()] = stack[-1][1] if stack else None
        stack.append((depth, match.group()))
    return parents


def _real() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in harness.errors.__all__:
        cls = getattr(harness.errors, name)
        bases = [b for b in cls.__bases__ if issubclass(b, harness.errors.HarnessError)]
        assert len(bases) <= 1, name
        found[name] = bases[0].__name__ if bases else None
    return found


def test_the_drawn_tree_is_the_class_hierarchy() -> None:
    assert _drawn() == _real()


def test_the_value_errors_named_are_the_ones_there_are() -> None:
    doc = harness.errors.__doc__ or ""
    sentence = doc.split("are ``ValueError`` too")[0].rsplit("\n\n", 1)[1]
    named = set(re.findall(r"``(\w+)``", sentence))
    real = {
        name
        for name in harness.errors.__all__
        if issubclass(getattr(harness.errors, name), ValueError)
        and not any(
            issubclass(base, ValueError)
            for base in getattr(harness.errors, name).__bases__
            if base is not ValueError
        )
    }
    assert named == real
