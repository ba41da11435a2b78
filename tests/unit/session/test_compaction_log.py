from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.main import app
from harness.context import RuntimeContext
from harness.kernel import Msg
from harness.session import CompactionLog
from harness.workspace import WorkspaceManager


async def test_records_are_appended_per_session_and_user(workspace: Path) -> None:
    log = CompactionLog(WorkspaceManager(workspace), "bot")
    ctx = RuntimeContext(session_id="s1", user_id="ann")
    await log.append(ctx, {"messages_before": 60, "messages_after": 21})
    await log.append(ctx, {"messages_before": 70, "messages_after": 22})
    path = workspace / "users" / "ann" / "agents" / "bot" / "sessions" / "s1.compactions.jsonl"
    with path.open("a") as handle:
        handle.write("not json\n")
    assert await log.read("s1", "ann") == [
        {"messages_before": 60, "messages_after": 21},
        {"messages_before": 70, "messages_after": 22},
    ]
    assert await log.read("s1") == []


def test_sessions_show_lists_the_compactions(workspace: Path) -> None:
    path = workspace / "agents" / "harness" / "sessions" / "s1.compactions.jsonl"
    path.parent.mkdir(parents=True)
    record = {
        "time": "2026-11-30T10:00:00+00:00",
        "messages_before": 60,
        "messages_after": 21,
        "tokens_before": 81000,
        "tokens_after": 9000,
        "first_kept_id": "m40",
        "flush": {"status": "ok", "detail": ""},
        "offload": {"status": "failed", "detail": "disk full"},
        "summary_hash": "abcdef0123456789",
    }
    path.write_text(json.dumps(record) + "\n")
    saved = workspace / "agents" / "harness" / "context" / "s1" / "messages.jsonl"
    saved.parent.mkdir(parents=True)
    saved.write_text(Msg(role="user", content="hi").model_dump_json() + "\n")
    runner = CliRunner()
    result = runner.invoke(app, ["sessions", "show", "s1", "-w", str(workspace), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["messages"] == 1
    assert shown["compactions"] == [record]
    text = runner.invoke(app, ["sessions", "show", "s1", "-w", str(workspace)])
    assert text.exit_code == 0
    assert "60 -> 21" in text.output
    assert "m40" in text.output
    assert "failed" in text.output
    empty = runner.invoke(app, ["sessions", "show", "s2", "-w", str(workspace)])
    assert empty.exit_code == 1  # no saved session s2: one error line naming the list
    assert "no saved session 's2'" in empty.output
