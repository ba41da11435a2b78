"""Front matter the model wrote is read within bounds, and a bad one is a FrontMatterError.

Front matter nested a few thousand deep raised RecursionError from the YAML composer, which no
handler caught: one such ``subagents/x.md`` in the shared root failed every later call of every
user before the model ran. Aliases could expand a few lines into a billion nodes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import FrontMatterError
from harness.workspace.frontmatter import MAX_DEPTH, MAX_FRONT_MATTER_CHARS, parse_front_matter


def _nested(depth: int, style: str) -> str:
    if style == "flow-list":
        return "a: " + "[" * depth + "1" + "]" * depth
    if style == "flow-map":
        return "a: " + "{a: " * depth + "1" + "}" * depth
    if style == "unclosed":
        return "a: " + "[" * depth
    return "\n".join("  " * level + "- " for level in range(depth)) + "x"  # block lists


@settings(max_examples=30, deadline=None)
@given(
    depth=st.integers(min_value=MAX_DEPTH + 1, max_value=20_000),
    style=st.sampled_from(["flow-list", "flow-map", "unclosed", "block"]),
)
def test_deep_nesting_is_a_front_matter_error(depth: int, style: str) -> None:
    with pytest.raises(FrontMatterError):
        parse_front_matter(f"---\n{_nested(depth, style)}\n---\nbody")


def test_nesting_within_the_bound_is_read() -> None:
    data, body = parse_front_matter(f"---\n{_nested(MAX_DEPTH - 1, 'flow-list')}\n---\nbody")
    assert body == "body"
    assert "a" in data


def test_aliases_are_refused() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    with pytest.raises(FrontMatterError, match="alias"):
        parse_front_matter(f"---\n{bomb}---\nbody")


def test_oversized_front_matter_is_refused() -> None:
    big = "description: " + "x" * (MAX_FRONT_MATTER_CHARS + 1)
    with pytest.raises(FrontMatterError, match="characters long"):
        parse_front_matter(f"---\n{big}\n---\n")
