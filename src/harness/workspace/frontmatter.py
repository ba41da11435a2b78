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

The model writes these files, so the YAML is read within bounds: at most
:data:`MAX_FRONT_MATTER_CHARS`, nested at most :data:`MAX_DEPTH` deep (a thousand ``[`` would
exhaust Python's stack, and the error escaped every handler), and without anchors and aliases
(a few lines of them expand to a billion nodes). Declarations need none of these.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from harness.errors import FrontMatterError

__all__ = [
    "MAX_DEPTH",
    "MAX_FRONT_MATTER_CHARS",
    "FrontMatterError",
    "parse_front_matter",
    "string_list",
]

MAX_FRONT_MATTER_CHARS: Final = 64 * 1024
"""The longest front matter read; a declaration's is a few lines."""

MAX_DEPTH: Final = 32
"""The deepest nesting of lists and mappings the front matter may have."""


def _check_shape(front: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH`, and aliases, before the YAML is built.

    The parser walks the text with a stack of its own (it never recurses), so this pass is
    bounded whatever the text; only then does the recursive composer build the values.

    Raises:
        FrontMatterError: Naming which bound the text broke.
        yaml.YAMLError: The text is not YAML.
    """
    depth = 0
    for event in yaml.parse(front, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            msg = "the front matter uses an alias (*name); write the value out instead"
            raise FrontMatterError(msg)
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                msg = f"the front matter is nested deeper than {MAX_DEPTH} levels"
                raise FrontMatterError(msg)
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1


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
    front = "\n".join(lines[1:end])
    if len(front) > MAX_FRONT_MATTER_CHARS:
        msg = f"the front matter is {len(front):,} characters long, over {MAX_FRONT_MATTER_CHARS:,}"
        raise FrontMatterError(msg)
    try:
        _check_shape(front)
        data = yaml.safe_load(front)
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
