"""`harness sessions list` and `show`: what a newcomer looks for, and a clear line when absent."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.main import app
from harness.context import RuntimeContext
from harness.kernel import Msg, ToolResultBlock, ToolUseBlock
from harness.session import SessionStore
from harness.workspace import WorkspaceManager

CONVERSATION = [
    Msg(role="user", content="What is in notes.md?"),
    Msg(
        role="assistant",
        name="harness",
        content=[ToolUseBlock(id="t1", name="read_file", input={"path": "notes.md"})],
    ),
    Msg(
        role="tool",
        name="read_file",
        content=[ToolResultBlock(id="t1", name="read_file", output="Launch on Friday. " * 40)],
    ),
    Msg(role="assistant", name="harness", content="It says: launch on Friday."),
]


def save(workspace: Path, session: str, messages: list[Msg], *, user: str | None = None) -> Path:
    store = SessionStore(WorkspaceManager(workspace), "harness")
    ctx = RuntimeContext(session_id=session, user_id=user)
    asyncio.run(store.save(ctx, messages))
    return store.workspace.local_path(store.path(ctx))


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_missing_session_is_one_error_line_that_says_how_to_list_them(workspace: Path) -> None:
    save(workspace, "notes", CONVERSATION, user="ada")

    code, stdout, stderr = invoke("sessions", "show", "nots", "-w", str(workspace), "-u", "ada")

    assert code == 1
    assert stdout == ""
    (line,) = stderr.splitlines()
    assert "'nots'" in line
    assert f"`harness sessions list --workspace {workspace} --user ada`" in line
    # Another user's session of that name is not this user's either.
    code, _, stderr = invoke("sessions", "show", "notes", "-w", str(workspace), "--json")
    assert code == 1
    assert "'notes'" in stderr


def test_show_prints_the_last_messages_with_their_tool_calls(workspace: Path) -> None:
    save(workspace, "notes", CONVERSATION)

    code, stdout, _ = invoke("sessions", "show", "notes", "-w", str(workspace), "--messages", "3")

    assert code == 0, stdout
    lines = stdout.splitlines()
    assert lines[0].endswith(": 4 messages in agents/harness/context/notes/")
    assert lines[1] == "Last 3:"
    assert lines[2] == "  assistant (harness): -> read_file"
    assert lines[3].startswith("  tool (read_file): Launch on Friday. Launch")
    assert lines[3].endswith("...")
    assert len(lines[3]) <= 220  # the head of a long result, on one line
    assert lines[4] == "  assistant (harness): It says: launch on Friday."
    assert "What is in notes.md?" not in stdout

    _, everything, _ = invoke("sessions", "show", "notes", "-w", str(workspace))
    assert "Messages:" in everything
    assert "  user: What is in notes.md?" in everything

    _, none, _ = invoke("sessions", "show", "notes", "-w", str(workspace), "-n", "0")
    assert "harness" not in none.split("\n", 1)[1]


def test_show_json_carries_the_last_messages(workspace: Path) -> None:
    save(workspace, "notes", CONVERSATION)

    code, stdout, _ = invoke("sessions", "show", "notes", "-w", str(workspace), "--json", "-n", "2")

    assert code == 0
    info = json.loads(stdout)
    assert info["messages"] == 4
    first, last = info["last_messages"]
    assert (first["role"], first["name"], first["tool_calls"]) == ("tool", "read_file", [])
    assert first["tool_results"] == ["read_file"]
    assert last == {
        "id": CONVERSATION[3].id,
        "role": "assistant",
        "name": "harness",
        "text": "It says: launch on Friday.",
        "tool_calls": [],
        "tool_results": [],
    }
    _, default, _ = invoke("sessions", "show", "notes", "-w", str(workspace), "--json")
    assert [m["id"] for m in json.loads(default)["last_messages"]] == [m.id for m in CONVERSATION]


def test_list_shows_the_users_sessions_newest_first(workspace: Path) -> None:
    for age, (session, question) in enumerate(
        [("newest", "Plan the launch"), ("middle", "Draft the notes"), ("oldest", "Say hello")]
    ):
        path = save(workspace, session, [Msg(role="user", content=question)], user="ada")
        stamp = 1_700_000_000 - age * 3600
        os.utime(path, (stamp, stamp))
    save(workspace, "bobs", CONVERSATION, user="bob")

    code, stdout, _ = invoke("sessions", "list", "-w", str(workspace), "-u", "ada", "--json")

    assert code == 0
    listed = json.loads(stdout)
    assert [s["id"] for s in listed] == ["newest", "middle", "oldest"]
    assert [s["title"] for s in listed] == ["Plan the launch", "Draft the notes", "Say hello"]
    assert [s["messages"] for s in listed] == [1, 1, 1]
    assert [s["updated_at"] for s in listed] == [1_700_000_000 - h * 3600 for h in range(3)]

    _, limited, _ = invoke("sessions", "list", "-w", str(workspace), "-u", "ada", "--limit", "2")
    assert "newest" in limited
    assert "middle" in limited
    assert "oldest" not in limited
    assert "Plan the launch" in limited
    assert "bobs" not in limited

    _, bobs, _ = invoke("sessions", "list", "-w", str(workspace), "-u", "bob", "--json")
    assert [(s["id"], s["messages"]) for s in json.loads(bobs)] == [("bobs", 4)]


def test_list_of_no_sessions_says_so(workspace: Path) -> None:
    code, stdout, stderr = invoke("sessions", "list", "-w", str(workspace))

    assert code == 0
    assert stdout == ""
    assert "No saved sessions" in stderr
    _, as_json, _ = invoke("sessions", "list", "-w", str(workspace), "--json")
    assert json.loads(as_json) == []


def test_rename_titles_a_session_as_the_listing_shows_it(workspace: Path) -> None:
    save(workspace, "notes", CONVERSATION)
    code, stdout, _ = invoke("sessions", "rename", "notes", "Launch\nplans", "-w", str(workspace))
    assert code == 0, stdout
    assert "'Launch plans'" in stdout
    code, stdout, _ = invoke("sessions", "list", "--json", "-w", str(workspace))
    assert [s["title"] for s in json.loads(stdout)] == ["Launch plans"]

    code, stdout, _ = invoke("sessions", "rename", "notes", "", "-w", str(workspace))
    assert code == 0
    assert "'What is in notes.md?'" in stdout  # back to the head of its first message

    code, _, stderr = invoke("sessions", "rename", "nots", "x", "-w", str(workspace))
    assert code == 1
    assert "no saved session 'nots'" in stderr


def test_the_missing_session_line_stays_one_short_line(tmp_path: Path) -> None:
    odd = tmp_path / "two\nlines"

    code, _, stderr = invoke("sessions", "show", "x" * 5000, "-w", str(odd), "-u", "ada")

    assert code == 1
    (line,) = stderr.splitlines()
    assert len(line) < 400
    assert "`harness sessions list --user ada` (with the same --workspace)" in line
