from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from _models import FunctionModel

from harness.kernel import Msg
from harness.memory import STATE_PATH, MemoryConsolidator
from harness.workspace import WorkspaceManager

T0 = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


def write_log(workspace: Path, name: str, text: str, user: str | None = None) -> Path:
    base = workspace / "users" / user if user else workspace
    path = base / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def merged(messages: list[Msg]) -> str:
    """A stand-in for the model: the current file plus every new bullet."""
    user = messages[1].text
    current = user.split("Current MEMORY.md:\n", 1)[1].split("\n\nNew daily log entries", 1)[0]
    bullets = [line for line in user.splitlines() if line.startswith("- ")]
    keep = [] if current == "(empty)" else current.splitlines()
    return "\n".join(keep + [b for b in bullets if b not in keep])


async def test_new_logs_are_merged_and_the_watermark_moves(workspace: Path) -> None:
    write_log(workspace, "2026-03-13.md", "## Memory Flush — x\n- Anna moved to Berlin.")
    model = FunctionModel(merged)
    consolidator = MemoryConsolidator(WorkspaceManager(workspace), model, clock=lambda: T0)
    result = await consolidator.consolidate()
    assert result.updated
    assert result.merged == ("memory/2026-03-13.md",)
    assert (workspace / "MEMORY.md").read_text() == "- Anna moved to Berlin.\n"
    assert (workspace / STATE_PATH).read_text() == T0.isoformat()
    assert await consolidator.watermark() == T0
    system, user = model.requests[0]
    assert "Aim for 4000 tokens (about 16000 characters)" in system.text
    assert "### 2026-03-13.md\n## Memory Flush — x\n- Anna moved to Berlin." in user.text

    # nothing modified since the watermark: no model call
    old = T0.timestamp() - 60
    os.utime(workspace / "memory" / "2026-03-13.md", (old, old))
    again = await consolidator.consolidate()
    assert not again.updated
    assert len(model.requests) == 1


async def test_blank_answer_changes_nothing(workspace: Path) -> None:
    write_log(workspace, "2026-03-13.md", "- fact")
    (workspace / "MEMORY.md").write_text("- old\n")
    result = await MemoryConsolidator(
        WorkspaceManager(workspace), FunctionModel(lambda _: "  ")
    ).consolidate()
    assert not result.updated
    assert (workspace / "MEMORY.md").read_text() == "- old\n"
    assert not (workspace / STATE_PATH).exists()


async def test_per_user_namespace(workspace: Path) -> None:
    write_log(workspace, "2026-03-13.md", "- alice fact", user="alice")
    write_log(workspace, "2026-03-13.md", "- shared fact")
    consolidator = MemoryConsolidator(WorkspaceManager(workspace), FunctionModel(merged))
    await consolidator.consolidate("alice")
    assert (workspace / "users" / "alice" / "MEMORY.md").read_text() == "- alice fact\n"
    assert not (workspace / "MEMORY.md").exists()


async def test_an_edit_made_during_consolidation_survives(workspace: Path) -> None:
    write_log(workspace, "2026-03-13.md", "- new fact")
    (workspace / "MEMORY.md").write_text("- old fact\n")
    first_call = asyncio.Event()
    proceed = asyncio.Event()

    async def slow_merge(messages: list[Msg]) -> str:
        if not first_call.is_set():
            first_call.set()
            await proceed.wait()
        return merged(messages)

    model = FunctionModel(slow_merge)
    task = asyncio.create_task(MemoryConsolidator(WorkspaceManager(workspace), model).consolidate())
    await first_call.wait()
    # somebody edits MEMORY.md while the model is working
    (workspace / "MEMORY.md").write_text("- old fact\n- edited by the user meanwhile\n")
    proceed.set()
    result = await task
    assert result.updated
    assert (workspace / "MEMORY.md").read_text() == (
        "- old fact\n- edited by the user meanwhile\n- new fact\n"
    )
    assert len(model.requests) == 2  # the merge was redone on the edited file


KILL_SCRIPT = """
import asyncio, sys
from harness.kernel import ChatResponse, TextBlock
from harness.memory import MemoryConsolidator
from harness.workspace import WorkspaceManager

OLD = "- old\\n" + "o" * 200_000 + "\\n"
NEW = "- new " + "n" * 300_000

class Big:
    model_name = "big"
    async def stream(self, messages, tools, **options):
        yield ChatResponse(content=[TextBlock(text=NEW)])

async def main():
    ws = WorkspaceManager(sys.argv[1])
    while True:
        (ws.root / "memory" / "2026-03-13.md").touch()
        await MemoryConsolidator(ws, Big()).consolidate()
        await ws.replace_text("MEMORY.md", OLD, expected=NEW + "\\n")

asyncio.run(main())
"""


def test_sigkill_during_consolidation_leaves_old_or_new(workspace: Path) -> None:
    old = "- old\n" + "o" * 200_000 + "\n"
    new = "- new " + "n" * 300_000
    write_log(workspace, "2026-03-13.md", "- fact")
    rng = random.Random(7)
    for _ in range(8):
        (workspace / "MEMORY.md").write_text(old)
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(workspace)])
        time.sleep(0.6 + rng.random() * 0.8)  # after start-up, somewhere in the loop
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert (workspace / "MEMORY.md").read_text() in (old, new + "\n")
    leftovers = [p.name for p in workspace.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) <= 8  # a killed writer may leave its temp file; never a torn MEMORY.md


async def test_a_users_first_consolidation_never_starts_from_the_shared_memory(
    workspace: Path,
) -> None:
    """The shared MEMORY.md is the memory of calls without a user, which no user may read; a
    user's first consolidation used to copy it into theirs (and into the model's request)."""
    (workspace / "MEMORY.md").write_text("- shared: the office is in Lyon\n")
    write_log(workspace, "2026-03-13.md", "- alice fact", user="alice")
    model = FunctionModel(merged)
    await MemoryConsolidator(WorkspaceManager(workspace), model).consolidate("alice")
    assert "Lyon" not in model.requests[0][1].text
    assert (workspace / "users" / "alice" / "MEMORY.md").read_text() == "- alice fact\n"
    assert (workspace / "MEMORY.md").read_text() == "- shared: the office is in Lyon\n"
