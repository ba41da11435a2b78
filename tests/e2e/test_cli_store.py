"""`harness run --store redis://...`: two workspaces (two workers) continue one session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli_runner import NO_MEMORIES, Cli, agent_requests, make_cli, write_script


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


def test_two_workers_share_a_session_through_the_store(
    cli: Cli, tmp_path: Path, redis_url: str
) -> None:
    script = write_script(
        tmp_path / "script.json",
        [NO_MEMORIES, {"match": "again", "text": "second"}, {"text": "first"}],
        log="requests.jsonl",
    )

    def run(worker: str, prompt: str, *extra: str) -> str:
        result = cli.run(
            "run", prompt, "-w", tmp_path / worker, "-m", f"scripted:{script}", "-s", "s1",
            "-u", "ann", *extra,
        )  # fmt: skip
        assert result.returncode == 0, result
        return result.stdout.strip()

    assert run("worker-a", "hello", "--store", redis_url) == "first"
    assert run("worker-b", "hello again", "--store", redis_url) == "second"
    last = agent_requests(tmp_path / "requests.jsonl")[-1]
    texts = [block["text"] for m in last for block in m["content"] if block.get("type") == "text"]
    assert texts[-3:] == ["hello", "first", "hello again"]  # worker B continued A's session
    assert not (tmp_path / "worker-a" / "users").exists()  # nothing on the workers' disks
    # Without the store, a worker's own disk has no such session.
    assert run("worker-b", "hello again") == "second"


def test_an_unknown_store_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    result = cli.run("run", "hi", "-w", tmp_path / "w", "-m", "scripted:x", "--store", "ftp://x")
    assert result.returncode == 2
    assert "unknown store 'ftp://x'; use redis://host:port/db" in result.stderr


def test_tasks_are_listed_from_the_store(cli: Cli, tmp_path: Path, redis_url: str) -> None:
    spawn = {"agent_id": "general-purpose", "task": "Count to two.", "timeout_seconds": 0}
    script = write_script(
        tmp_path / "script.json",
        [
            NO_MEMORIES,
            {"match": "^count", "tool_calls": [{"name": "agent_spawn", "input": spawn}]},
            {"match": "status: accepted", "text": "started"},
            {"match": "Count to two", "text": "one, two"},
        ],
    )
    common = ("-w", tmp_path / "worker", "-u", "ann")
    ran = cli.run("run", "count", *common, "-m", f"scripted:{script}", "--store", redis_url)
    assert ran.returncode == 0, ran

    listed = cli.run("tasks", "list", *common, "--json", "--store", redis_url)
    assert listed.returncode == 0, listed
    (task,) = json.loads(listed.stdout)
    assert task["status"] == "completed"
    shown = cli.run("tasks", "show", task["task_id"], *common, "--store", redis_url)
    assert shown.stdout.rstrip().endswith("Result:\none, two")
    # The worker's own disk holds none of it.
    assert "No background tasks." in cli.run("tasks", "list", *common).stdout
