from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path

from harness.workspace import WorkspaceManager

WRITER = """
import asyncio, sys
from harness.workspace import WorkspaceManager

async def main():
    ws = WorkspaceManager(sys.argv[1])
    worker = sys.argv[2]
    await asyncio.gather(*(
        ws.append_text("memory/2026-03-14.md", f"- record {worker}-{i} " + "x" * 300 + "\\n", "ann")
        for i in range(200)
    ))

asyncio.run(main())
"""


def test_eight_processes_append_1600_whole_records(workspace: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(workspace), str(n)]) for n in range(8)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    text = (workspace / "users" / "ann" / "memory" / "2026-03-14.md").read_text()
    lines = text.splitlines()
    assert len(lines) == 1600
    counts = Counter(line.split(" ")[2] for line in lines)
    assert len(counts) == 1600
    assert set(counts.values()) == {1}
    assert all(line.endswith("x" * 300) for line in lines)


async def test_concurrent_appends_in_one_process(workspace: Path) -> None:
    ws = WorkspaceManager(workspace)
    await asyncio.gather(*(ws.append_text("memory/d.md", f"- {i}\n") for i in range(300)))
    lines = (workspace / "memory" / "d.md").read_text().splitlines()
    assert sorted(lines) == sorted(f"- {i}" for i in range(300))
