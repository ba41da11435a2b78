"""``harness sessions show`` only reads: a damaged session is shown as it is, never repaired."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.main import app
from harness.context import RuntimeContext
from harness.kernel import Msg, ToolUseBlock
from harness.session import SessionStore
from harness.workspace import WorkspaceManager


def test_showing_a_damaged_session_leaves_its_files_as_they_were(workspace: Path) -> None:
    ctx = RuntimeContext(session_id="s1")
    sessions = SessionStore(WorkspaceManager(workspace), "harness")
    call = Msg(role="assistant", content=[ToolUseBlock(id="t1", name="read_file", input={})])
    asyncio.run(sessions.save(ctx, [Msg(role="user", content="hello"), call]))
    path = sessions.workspace.local_path(sessions.path(ctx))
    with path.open("a") as file:
        file.write('{"role": "tool", "content": [{"type": "tool_re\n')  # a torn line
        file.write('{"role": "assistant", "con')  # and a last line without its newline
    before = sorted((p.name, p.read_bytes()) for p in path.parent.iterdir())

    result = CliRunner().invoke(app, ["sessions", "show", "s1", "-w", str(workspace), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["messages"] == 2  # what parses, as it is
    assert sorted((p.name, p.read_bytes()) for p in path.parent.iterdir()) == before
    assert not (path.parent / "quarantine.jsonl").exists()
