"""docs/architecture.md stays true: its contracts, hooks table and import graph are the code's."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from _imports import package_imports

from harness import filesystem
from harness.kernel import Hook

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def hooks_in_code() -> set[tuple[str, str, int, str]]:
    found: set[tuple[str, str, int, str]] = set()
    for package in ("harness.hooks", "harness.mcp"):
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, Hook):
                path = value.__module__.removeprefix("harness.").replace(".", "/") + ".py"
                events = ", ".join(e.__name__ for e in value.events) or "all"
                found.add((path, value.__name__, value.priority, events))
    return found


def hooks_in_doc() -> set[tuple[str, str, int, str]]:
    row = re.compile(r"^\| `([^`]+)` \| `([^`]+)` \| (\d+) \| ([^|]+) \|$", re.MULTILINE)
    return {(m[1], m[2], int(m[3]), m[4].strip()) for m in row.finditer(_section("The hooks"))}


def imports_in_doc() -> dict[str, set[str]]:
    block = _section("Who imports whom").split("```")[1]
    graph: dict[str, set[str]] = {}
    for line in block.strip().splitlines():
        package, _, targets = line.partition("->")
        graph[package.strip()] = {t.strip() for t in targets.split(",")}
    return graph


def contracts_in_doc() -> dict[str, list[str]]:
    row = re.compile(r"^\| `(\w+)` \| ((?:`\w+`(?:, )?)+) \|", re.MULTILINE)
    return {
        m[1]: re.findall(r"`(\w+)`", m[2])
        for m in row.finditer(_section("The filesystem contracts"))
    }


def test_the_contracts_table_names_each_contracts_methods() -> None:
    assert contracts_in_doc() == {
        name: sorted(getattr(filesystem, name).__abstractmethods__)
        for name in ("Storage", "FileTools")
    }


def test_the_hooks_table_is_every_hook_with_its_priority_and_events() -> None:
    assert hooks_in_doc() == hooks_in_code()


def test_the_import_graph_is_the_codes() -> None:
    assert imports_in_doc() == package_imports()


def test_the_checks_read_something() -> None:
    assert len(hooks_in_doc()) >= 10
    assert imports_in_doc()["kernel"] == {"context", "errors"}
