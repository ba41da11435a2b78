"""`--store redis://...`: two workspaces (two workers) share sessions, memory, tasks and traces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _cli_runner import (
    CONSOLIDATION_PROMPT,
    FLUSH_PROMPT,
    NO_MEMORIES,
    Cli,
    agent_requests,
    make_cli,
    write_script,
)

from _outcomes import answer
from harness.cli import _agent
from harness.errors import WorkspaceError
from harness.stores import InMemoryStore


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
            "run", prompt, "-w", tmp_path / worker / "ws", "-m", f"scripted:{script}", "-s", "s1",
            "-u", "ann", *extra,
        )  # fmt: skip
        assert result.returncode == 0, result
        return result.stdout.strip()

    assert run("worker-a", "hello", "--store", redis_url) == "first"
    assert run("worker-b", "hello again", "--store", redis_url) == "second"
    last = agent_requests(tmp_path / "requests.jsonl")[-1]
    texts = [block["text"] for m in last for block in m["content"] if block.get("type") == "text"]
    assert texts[-3:] == ["hello", "first", "hello again"]  # worker B continued A's session
    assert not (tmp_path / "worker-a" / "ws" / "users").exists()  # nothing on the workers' disks
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


def fresh_files(indexed: str) -> int:
    """How many files `harness memory index` read, checking that none was known before."""
    match = re.match(r"Indexed (\d+) files \(0 unchanged, 0 removed\)", indexed)
    assert match, indexed
    return int(match[1])


def test_every_reading_command_reads_the_store(cli: Cli, tmp_path: Path, redis_url: str) -> None:
    """What worker A wrote is what `sessions show`, `memory` and `trace` show on worker B.

    The Redis server serves the whole test session: this test's user and session are its own.
    """
    # No consolidation turn: the run's own background consolidation fails (and is only logged),
    # so the one `memory consolidate` runs below has the daily log to merge.
    script = write_script(
        tmp_path / "script.json",
        [
            {"match": FLUSH_PROMPT + r"[\s\S]*Anna", "text": "- Anna moved to Lisbon."},
            {"match": "Anna", "text": "Noted."},
        ],
    )
    merge = write_script(
        tmp_path / "merge.json",
        [{"match": CONSOLIDATION_PROMPT, "text": "# Memory\n\n- Anna lives in Lisbon."}],
    )
    worker_a = ("-w", tmp_path / "a" / "worker", "-u", "lena", "--store", redis_url)
    ran = cli.run("run", "Anna has news.", *worker_a, "-s", "s-lena", "-m", f"scripted:{script}")
    assert ran.returncode == 0, ran
    worker_b = ("-w", tmp_path / "b" / "worker", "-u", "lena", "--store", redis_url)

    shown = cli.run("sessions", "show", "s-lena", *worker_b, "--json")
    assert shown.returncode == 0, shown
    assert json.loads(shown.stdout)["messages"] == 2

    indexed = cli.run("memory", "index", *worker_b)
    assert indexed.returncode == 0, indexed
    # Worker B's own index (beside its directory) takes the daily log and the transcript from
    # the store (with the files other tests left there): its disk has none of them.
    assert fresh_files(indexed.stdout) >= 2
    found = cli.run("memory", "search", "Lisbon", *worker_b, "--json")
    assert found.returncode == 0, found
    assert any("Anna moved to Lisbon" in hit["content"] for hit in json.loads(found.stdout))
    rebuilt = cli.run("memory", "index", "--rebuild", *worker_b)
    assert rebuilt.returncode == 0, rebuilt
    assert fresh_files(rebuilt.stdout) >= 2

    consolidated = cli.run("memory", "consolidate", *worker_b, "-m", f"scripted:{merge}")
    assert consolidated.returncode == 0, consolidated
    assert consolidated.stdout.startswith("MEMORY.md updated from 1 daily logs")
    # Worker A's disk has no MEMORY.md; the store has the new one, and B's search finds it.
    assert not (tmp_path / "a" / "worker" / "users").exists()
    found = cli.run("memory", "search", "lives Lisbon", *worker_b, "--json")
    assert any(hit["path"].endswith("MEMORY.md") for hit in json.loads(found.stdout))

    traced = cli.run("trace", "s-lena", *worker_b, "--json")
    assert traced.returncode == 0, traced
    assert json.loads(traced.stdout)["total"]["steps"] >= 1

    # Without the store, worker B's own disk has none of it.
    local_b = ("-w", tmp_path / "b" / "worker", "-u", "lena")
    absent = cli.run("sessions", "show", "s-lena", *local_b, "--json")
    assert absent.returncode == 1
    assert "no saved session 's-lena'" in absent.stderr
    assert "No matching memories" in cli.run("memory", "search", "Lisbon", *local_b).stdout
    missing = cli.run("trace", "s-lena", *local_b)
    assert missing.returncode == 2
    assert "no trace of session 's-lena' of user lena" in missing.stderr


class ClosedStore(InMemoryStore):
    """Remembers that the command closed it."""

    closed = False

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("workspace_usable", [True, False])
async def test_run_and_chat_close_their_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workspace_usable: bool
) -> None:
    """The store's connection is closed after the turn, and when the agent cannot be built."""
    store = ClosedStore()
    monkeypatch.setattr(_agent, "open_store", lambda url: store)
    script = write_script(tmp_path / "script.json", [NO_MEMORIES, {"text": "hi"}])
    workspace = tmp_path / "ws"
    if not workspace_usable:
        workspace.write_text("a file where the workspace should be")
    given = _agent.AgentArgs(
        workspace=workspace, model=f"scripted:{script}", store="redis://unused"
    )

    if workspace_usable:
        async with _agent.opened_agent(given) as agent:
            assert (answer(await agent.call("hello"))).text == "hi"
            assert not store.closed
    else:
        with pytest.raises(WorkspaceError):
            async with _agent.opened_agent(given):
                pass
    assert store.closed
