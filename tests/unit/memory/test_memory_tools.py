from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from harness.context import RuntimeContext
from harness.tools import MemoryTools
from harness.tools.memory import add_bullet
from harness.workspace import WorkspaceManager

ANN = RuntimeContext(session_id="s", user_id="ann")
NOW = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)


def tools(workspace: Path) -> MemoryTools:
    return MemoryTools(WorkspaceManager(workspace), None, clock=lambda: NOW)


def seed(workspace: Path) -> None:
    base = workspace / "users" / "ann"
    (base / "memory").mkdir(parents=True)
    (base / "MEMORY.md").write_text("# Memory\n\n## People\n- Anna lives in Berlin.\n")
    (base / "memory" / "2026-03-01.md").write_text(
        "\n## Memory Flush — x\n- Ann likes green tea.\n"
    )
    (workspace / "users" / "bob" / "memory").mkdir(parents=True)
    (workspace / "users" / "bob" / "memory" / "2026-03-01.md").write_text("- Bob's secret tea\n")


async def test_search_without_index_scans_the_users_files(workspace: Path) -> None:
    seed(workspace)
    out = await tools(workspace).memory_search("green tea", ANN)
    assert out.startswith(
        "Found 1 matches:\n\nSource: memory/2026-03-01.md#L3 (trust: unknown; origin: no record)"
        "\n  [unknown] - Ann likes green tea."
    )
    assert "Bob" not in out
    assert await tools(workspace).memory_search("   ", ANN) == "No query provided"
    assert (await tools(workspace).memory_search("zebra", ANN)) == (
        "No matching memories found for: zebra"
    )


async def test_get_numbers_lines_and_stays_in_memory_files(workspace: Path) -> None:
    seed(workspace)
    t = tools(workspace)
    assert await t.memory_get("MEMORY.md", ANN, start_line=3, end_line=4) == (
        "3|## People\n4|[unknown] - Anna lives in Berlin."
    )
    assert await t.memory_get("AGENTS.md", ANN) == (
        "Error: memory_get reads only MEMORY.md and memory/*.md, not AGENTS.md"
    )
    assert (await t.memory_get("../bob/memory/2026-03-01.md", ANN)).startswith("Error:")
    assert await t.memory_get("memory/2026-02-01.md", ANN) == (
        "Error: file not found: memory/2026-02-01.md"
    )
    assert await t.memory_get("MEMORY.md", ANN, start_line=99) == (
        "Error: start_line 99 exceeds file length 4"
    )


async def test_save_to_today_and_to_a_section(workspace: Path) -> None:
    seed(workspace)
    t = tools(workspace)
    day = NOW.astimezone().date().isoformat()
    assert await t.memory_save("Ann's flight is on May 2.", ANN) == f"Saved to memory/{day}.md"
    log = (workspace / "users" / "ann" / "memory" / f"{day}.md").read_text()
    assert log == "\n## Memory Save — 2026-03-14T09:30:00+00:00\n- Ann's flight is on May 2.\n"
    assert await t.memory_save("Tom is Ann's brother.", ANN, target="MEMORY.md#People") == (
        "Saved to MEMORY.md (section People)"
    )
    assert (workspace / "users" / "ann" / "MEMORY.md").read_text() == (
        "# Memory\n\n## People\n- Anna lives in Berlin.\n- Tom is Ann's brother.\n"
    )
    assert (await t.memory_save("x", ANN, target="AGENTS.md")).startswith("Error: target must be")


async def test_concurrent_saves_to_memory_md_lose_nothing(workspace: Path) -> None:
    seed(workspace)
    t = tools(workspace)
    results = await asyncio.gather(
        *(t.memory_save(f"fact {i}", ANN, target="MEMORY.md#Facts") for i in range(20))
    )
    assert all(r == "Saved to MEMORY.md (section Facts)" for r in results)
    text = (workspace / "users" / "ann" / "MEMORY.md").read_text()
    assert sorted(line for line in text.splitlines() if line.startswith("- fact")) == sorted(
        f"- fact {i}" for i in range(20)
    )


def test_add_bullet() -> None:
    assert add_bullet("", "Notes", "a") == "## Notes\n- a\n"
    assert add_bullet("# T\n\n## A\n- x\n\n## B\n- y\n", "A", "z") == (
        "# T\n\n## A\n- x\n- z\n\n## B\n- y\n"
    )
    assert add_bullet("# T\n", "New", "n") == "# T\n\n## New\n- n\n"
