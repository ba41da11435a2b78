"""The reference pages name every option and command there is.

In docs/configuration.md, each configuration dataclass's fields and every parameter of
``HarnessAgent`` must appear as a code span in a table row (``| `name` |``) of its section, so
adding an option without documenting it fails here instead of leaving the reference silently
behind; numeric and boolean defaults must match the code. docs/cli.md must describe every
``harness`` command and mention each of its long options.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from harness import (
    CompactionConfig,
    HarnessAgent,
    MemoryConfig,
    SubagentFactory,
    SubagentsConfig,
    SubagentSpec,
    ToolResultEvictionConfig,
    TruncateArgsConfig,
    WorkspaceContextConfig,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
REFERENCE = DOCS / "configuration.md"
CLI_PAGE = DOCS / "cli.md"

CONFIG_CLASSES: tuple[type, ...] = (
    MemoryConfig,
    CompactionConfig,
    TruncateArgsConfig,
    ToolResultEvictionConfig,
    WorkspaceContextConfig,
    SubagentsConfig,
    SubagentSpec,
    SubagentFactory,
)


def _sections() -> dict[str, set[str]]:
    """The names in the first column of each ``## Section``'s table rows."""
    sections: dict[str, set[str]] = {}
    current = ""
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections.setdefault(current, set())
        elif match := re.match(r"\| `([A-Za-z_][A-Za-z0-9_]*)` \|", line):
            sections.setdefault(current, set()).add(match.group(1))
    return sections


@pytest.mark.parametrize("cls", CONFIG_CLASSES, ids=lambda cls: cls.__name__)
def test_every_field_is_documented(cls: type) -> None:
    sections = _sections()
    assert cls.__name__ in sections, f"docs/configuration.md has no '## {cls.__name__}' section"
    fields = {field.name for field in dataclasses.fields(cls)}
    missing = sorted(fields - sections[cls.__name__])
    assert not missing, f"docs/configuration.md, ## {cls.__name__}, lacks rows for: {missing}"
    stale = sorted(sections[cls.__name__] - fields)
    assert not stale, f"docs/configuration.md, ## {cls.__name__}, documents unknown: {stale}"


def test_every_agent_parameter_is_documented() -> None:
    documented = _sections().get("HarnessAgent", set())
    parameters = set(inspect.signature(HarnessAgent.__init__).parameters) - {"self"}
    missing = sorted(parameters - documented)
    assert not missing, f"docs/configuration.md, ## HarnessAgent, lacks rows for: {missing}"
    stale = sorted(documented - parameters)
    assert not stale, f"docs/configuration.md, ## HarnessAgent, documents unknown: {stale}"


@pytest.mark.parametrize("cls", CONFIG_CLASSES, ids=lambda cls: cls.__name__)
def test_documented_defaults_match(cls: type) -> None:
    """A number or boolean default in the table is the dataclass's default."""
    rows = {
        match.group(1): match.group(2)
        for line in REFERENCE.read_text(encoding="utf-8")
        .split(f"## {cls.__name__}\n", 1)[1]
        .split("\n## ", 1)[0]
        .splitlines()
        if (match := re.match(r"\| `(\w+)` \| [^|]*(?:\\\|[^|]*)* \| `([^`]*)` \|", line))
    }
    for field in dataclasses.fields(cls):
        if field.default is dataclasses.MISSING or field.name not in rows:
            continue
        if isinstance(field.default, bool | int | float) or field.default is None:
            assert rows[field.name] == repr(field.default), (
                f"docs/configuration.md says {cls.__name__}.{field.name} defaults to "
                f"{rows[field.name]}, the code says {field.default!r}"
            )


def _commands() -> dict[str, list[str]]:
    """Every leaf command of the ``harness`` app (``"memory search"``) and its long options."""
    import typer

    from harness.cli.main import app

    found: dict[str, list[str]] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        children = getattr(command, "commands", None)
        if children:
            for name, child in children.items():
                walk(child, (*path, name))
            return
        options = [o for p in command.params for o in p.opts if o.startswith("--")]
        found[" ".join(path)] = [o for o in options if o != "--help"]

    walk(typer.main.get_command(app), ())
    return found


def test_every_command_and_option_is_in_the_cli_page() -> None:
    text = CLI_PAGE.read_text(encoding="utf-8")
    commands = _commands()
    assert "memory search" in commands  # the walk reaches nested groups
    for command, options in commands.items():
        top = command.split()[0]
        assert f"`harness {command}" in text, f"docs/cli.md does not describe `harness {command}`"
        section = text.split(f"## harness {top}\n", 1)
        assert len(section) == 2, f"docs/cli.md has no '## harness {top}' section"
        body = section[1].split("\n## ", 1)[0]
        if " " in command:  # a subcommand: its own bullet
            body = body.split(f"`harness {command}", 1)[1].split("\n- `harness ", 1)[0]
        missing = [option for option in options if f"`{option}" not in body]
        assert not missing, f"docs/cli.md, `harness {command}`, does not mention {missing}"
