"""The command line: ``harness run --approval TOOL`` exits 3 with what waits; ``harness
approvals`` lists it and continues the turn with a decision; a new turn waits until then."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli._common import EXIT_PAUSED
from harness.cli.main import app


def script(tmp_path: Path) -> str:
    turns = [
        {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
        {
            "match": "clean",
            "tool_calls": [{"name": "write_file", "input": {"path": "out.txt", "content": "x"}}],
        },
        {"text": "finished", "repeat": True},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted:{path}"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def pending(workspace: Path) -> list[dict[str, object]]:
    code, output = invoke("approvals", "list", "-w", str(workspace), "--json")
    assert code == 0, output
    found = json.loads(output)
    assert isinstance(found, list)
    return found


def test_a_paused_run_exits_3_and_approve_continues_it(workspace: Path, tmp_path: Path) -> None:
    model = script(tmp_path)
    code, output = invoke(
        "run", "-w", str(workspace), "--model", model, "--approval", "write_file", "clean up"
    )

    assert code == EXIT_PAUSED == 3, output
    [request] = pending(workspace)
    assert request["tool"] == "write_file"
    assert f"approval {request['id']}: write_file" in output
    assert not (workspace / "out.txt").exists()

    code, output = invoke("run", "-w", str(workspace), "--model", model, "something else")
    assert code == 3, output  # a new turn waits too; its message is not kept
    code, output = invoke(
        "approvals", "approve", str(request["id"]), "-w", str(workspace), "--model", model
    )
    assert code == 0, output
    assert output.strip().endswith("finished")
    assert (workspace / "out.txt").read_text() == "x"
    assert pending(workspace) == []


def test_reject_and_bad_edits_are_said_plainly(workspace: Path, tmp_path: Path) -> None:
    model = script(tmp_path)
    invoke("run", "-w", str(workspace), "--model", model, "--approval", "write_file", "clean")
    [request] = pending(workspace)
    ident = str(request["id"])

    code, output = invoke("approvals", "edit", ident, "-a", "{not json", "-w", str(workspace))
    assert code == 2
    assert "--arguments is not JSON" in output
    code, output = invoke(
        "approvals", "reject", ident, "-m", "not now", "-w", str(workspace), "--model", model
    )
    assert code == 0, output
    assert not (workspace / "out.txt").exists()
    code, output = invoke("approvals", "approve", ident, "-w", str(workspace), "--model", model)
    assert code == 1  # a decision is final
    assert "already decided" in output
    code, output = invoke(
        "approvals", "approve", "apr_nope", "-w", str(workspace), "--model", model
    )
    assert code == 1
    assert "no approval 'apr_nope'" in output


def test_chat_asks_inline_and_runs_the_call_only_on_yes(workspace: Path, tmp_path: Path) -> None:
    model = script(tmp_path)
    args = ["chat", "-w", str(workspace), "--model", model, "--approval", "write_file"]

    refused = CliRunner().invoke(app, [*args, "-s", "one"], input="clean\nn\n/exit\n")
    assert refused.exit_code == 0, refused.output
    assert "approve? [y/N]" in refused.output
    assert not (workspace / "out.txt").exists()

    approved = CliRunner().invoke(app, [*args, "-s", "two"], input="clean\ny\n/exit\n")
    assert approved.exit_code == 0, approved.output
    assert "finished" in approved.output
    assert (workspace / "out.txt").read_text() == "x"


def test_a_background_tasks_call_is_listed_and_approve_continues_the_task(
    workspace: Path, tmp_path: Path
) -> None:
    """`harness run` answers (the task waits, not the turn); the list names the task, and
    approving it continues the task and prints its state."""
    turns = [
        {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
        {
            "match": "^delegate",
            "tool_calls": [
                {
                    "name": "agent_spawn",
                    "input": {"agent_id": "general-purpose", "task": "clean", "timeout_seconds": 0},
                }
            ],
        },
        {
            "match": "^clean",
            "tool_calls": [{"name": "write_file", "input": {"path": "out.txt", "content": "x"}}],
        },
        {"match": "status: accepted", "text": "started", "repeat": True},
        {"text": "finished", "repeat": True},
    ]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"turns": turns}))
    model = f"scripted:{path}"
    code, output = invoke(
        "run", "-w", str(workspace), "--model", model, "--approval", "write_file", "delegate"
    )
    assert code == 0, output
    assert output.strip().endswith("started")
    [request] = pending(workspace)
    assert str(request["task_id"]).startswith("task_")
    code, listed = invoke("approvals", "list", "-w", str(workspace))
    assert f"[background task {request['task_id']}]" in listed
    assert not (workspace / "out.txt").exists()

    code, output = invoke(
        "approvals",
        "approve",
        str(request["id"]),
        "-w",
        str(workspace),
        "--model",
        model,
        "--approval",
        "write_file",
    )
    assert code == 0, output
    assert f"task_id: {request['task_id']}" in output
    assert "status: completed" in output
    assert (workspace / "out.txt").read_text() == "x"
    assert pending(workspace) == []


def test_list_finds_every_sessions_calls_and_reject_takes_its_reason_by_m(
    workspace: Path, tmp_path: Path
) -> None:
    """``approvals list`` looked in the session "default" alone, without saying so; and
    ``reject ID -m "why"`` exited 2, since -m was --model too."""
    model = script(tmp_path)
    for session in ("s1", "s2"):
        argv = ["run", "-w", str(workspace), "-s", session, "--model", model]
        code, output = invoke(*argv, "--approval", "write_file", "clean up")
        assert code == 3, output

    code, listed = invoke("approvals", "list", "-w", str(workspace))
    assert code == 0, listed
    assert "[session s1]" in listed
    assert "[session s2]" in listed
    [first, second] = pending(workspace)
    assert [first["session_id"], second["session_id"]] == ["s1", "s2"]
    code, output = invoke("approvals", "list", "-w", str(workspace), "-s", "s9")
    assert code == 0, output
    assert "in session 's9' of the shared namespace (no --user given)" in output

    code, output = invoke(
        "approvals", "reject", str(first["id"]), "-w", str(workspace), "-s", "s1",
        "-m", "not on a Friday", "--model", model,
    )  # fmt: skip
    assert code == 0, output
    ledger = json.dumps(
        [json.loads(line) for path in workspace.parent.rglob("*.jsonl") for line in
         path.read_text().splitlines() if "not on a Friday" in line]
    )  # fmt: skip
    assert "not on a Friday" in ledger
    assert [request["session_id"] for request in pending(workspace)] == ["s2"]
