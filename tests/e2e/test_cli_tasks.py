"""Background tasks across processes: `harness run` starts one, `harness tasks` reads it.

Each `harness` invocation is its own process, so these tests also show that a task's record and
result outlive the process that ran it, and that the next process tells the agent about it.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _cli_runner import NO_MEMORIES, Cli, make_cli, read_session, squash, write_script

from harness.subagents import TaskRecord, TaskRepository, TaskStatus
from harness.workspace import WorkspaceManager

SPAWN = {
    "match": "(?i)count the files",
    "tool_calls": [
        {
            "name": "agent_spawn",
            "input": {
                "agent_id": "general-purpose",
                "task": "Count to three.",
                "timeout_seconds": 0,
            },
        }
    ],
}
TURNS = [
    NO_MEMORIES,
    SPAWN,
    {"match": "status: accepted", "text": "Started it in the background."},
    {"match": "Count to three", "text": "one, two, three"},
    {"match": "<system-reminder>", "text": "The subagent counted: one, two, three."},
]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


def run_turn(cli: Cli, workspace: Path, script: Path, prompt: str) -> str:
    result = cli.run(
        "run", prompt, "-w", workspace, "-m", f"scripted:{script}", "-s", "s1", "-u", "ann"
    )
    assert result.returncode == 0, result
    return result.stdout.strip()


def test_a_task_started_by_one_process_is_read_and_reported_by_the_next(
    cli: Cli, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    script = write_script(tmp_path / "script.json", TURNS)

    assert run_turn(cli, workspace, script, "Count the files, please.") == (
        "Started it in the background."
    )
    # The process waited for its background task before it exited: the result is on disk.
    listed = cli.run("tasks", "list", "-w", workspace, "-u", "ann", "--json")
    assert listed.returncode == 0, listed
    (task,) = json.loads(listed.stdout)
    assert (task["agent_id"], task["status"], task["session_id"]) == (
        "general-purpose",
        "completed",
        "s1",
    )
    shown = cli.run("tasks", "show", task["task_id"], "-w", workspace, "-u", "ann")
    assert shown.returncode == 0, shown
    assert f"task_id: {task['task_id']}" in shown.stdout
    assert "status: completed" in shown.stdout
    assert shown.stdout.rstrip().endswith("Result:\none, two, three")
    # Another user sees none of it.
    assert "No background tasks." in cli.run("tasks", "list", "-w", workspace).stdout
    other = cli.run("tasks", "show", task["task_id"], "-w", workspace, "-u", "bob")
    assert other.returncode == 2
    assert f"no task '{task['task_id']}' of user bob" in other.stderr

    # A new process continues the session: its first step is told about the task, once.
    assert run_turn(cli, workspace, script, "Anything new?") == (
        "The subagent counted: one, two, three."
    )
    messages = read_session(workspace, "s1", user="ann")
    notices = [m for m in messages if m.get("metadata", {}).get("reminder") == "task_delivery"]
    assert len(notices) == 1
    assert f'<task id="{task["task_id"]}" state="completed"' in notices[0]["content"][0]["text"]


def _write(workspace: Path, record: TaskRecord) -> None:
    manager = WorkspaceManager(workspace)
    repo = TaskRepository(manager, "harness")
    text = record.model_dump_json()
    asyncio.run(manager.write_text(repo.record_path(record.task_id), text, record.user_id))


def _record(task_id: str, *, heartbeat: datetime) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        agent_id="general-purpose",
        status=TaskStatus.RUNNING,
        session_id="s1",
        worker="elsewhere:1",
        created_at=heartbeat,
        started_at=heartbeat,
        heartbeat_at=heartbeat,
    )


def test_a_stale_task_shows_as_worker_lost_and_a_live_one_can_be_cancelled(
    cli: Cli, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    now = datetime.now(UTC)
    _write(workspace, _record("task_lost", heartbeat=now - timedelta(hours=1)))
    _write(workspace, _record("task_live", heartbeat=now))

    listed = cli.run("tasks", "list", "-w", workspace, "--json")
    assert listed.returncode == 0, listed
    rows = {row["task_id"]: row for row in json.loads(listed.stdout)}
    assert rows["task_lost"]["status"] == "failed"
    assert rows["task_lost"]["error"].startswith("worker lost (no heartbeat from elsewhere:1")
    assert rows["task_live"]["status"] == "running"
    table = cli.run("tasks", "list", "-w", workspace, "--status", "failed").stdout
    assert "task_lost" in table
    assert "task_live" not in table

    cancelled = cli.run("tasks", "cancel", "task_live", "-w", workspace)
    assert cancelled.returncode == 0, cancelled
    assert "cancellation requested (cancelled)" in cancelled.stdout
    data = json.loads(cli.run("tasks", "show", "task_live", "-w", workspace, "--json").stdout)
    assert (data["status"], data["cancel_requested"]) == ("cancelled", True)
    again = cli.run("tasks", "cancel", "task_lost", "-w", workspace)
    assert "had already finished: failed: worker lost" in again.stdout


def test_bad_options_are_usage_errors(cli: Cli, tmp_path: Path) -> None:
    result = cli.run("tasks", "list", "-w", tmp_path / "ws", "--status", "done")
    assert result.returncode == 2
    message = squash(result.stderr.replace("│", " "))
    assert f"use one of: {', '.join(TaskStatus)}" in message
