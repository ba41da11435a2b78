"""YAML front matter of the workspace's Markdown declarations (subagents, skills).

A declaration file starts with a line ``---``, then YAML, then a line ``---``, then the body::

    ---
    name: researcher
    description: Finds and summarizes sources.
    ---
    You are a careful researcher...

Only a line that is exactly ``---`` closes the front matter, so ``---`` inside a YAML string does
not cut it short (the original split at the first ``---`` anywhere). Problems are raised as
:class:`FrontMatterError` with a message that says what is wrong, for the caller to report
with the file's name.
"""

from __future__ import annotations

from typing import Any

import yaml

from harness.errors import FrontMatterError

__all__ = ["FrontMatterError", "parse_front_matter", "string_list"]


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split a declaration into its front matter (a mapping) and its stripped body."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        msg = "it does not start with a '---' line opening the front matter"
        raise FrontMatterError(msg)
    try:
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.rstrip() == "---")
    except StopIteration:
        msg = "the front matter is not closed by a '---' line"
        raise FrontMatterError(msg) from None
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        msg = f"the front matter is not valid YAML ({_first_line(exc)})"
        raise FrontMatterError(msg) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        msg = f"the front matter must be a mapping of keys to values, not {type(data).__name__}"
        raise FrontMatterError(msg)
    return data, "\n".join(lines[end + 1 :]).strip()


def string_list(value: object, key: str) -> tuple[str, ...]:
    """A YAML list of names, or one comma-separated string of them (both are common)."""
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list):
        items = value
    else:
        msg = f"'{key}' must be a list of names or a comma-separated string"
        raise FrontMatterError(msg)
    names = []
    for item in items:
        if not isinstance(item, str):
            msg = f"'{key}' must hold names (strings), got {item!r}"
            raise FrontMatterError(msg)
        if item.strip():
            names.append(item.strip())
    return tuple(names)


def _first_line(exc: yaml.YAMLError) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
