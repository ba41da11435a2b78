from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _models import FunctionModel

from harness.compaction import ToolResultEvictionConfig, evictions_cleanup
from harness.kernel import Msg
from harness.memory import MemoryConfig, MemoryMaintenance, PeriodicGate
from harness.workspace import WorkspaceManager

NOW = datetime(2026, 6, 30, 12, 0, tzinfo=UTC)


def echo_merge(messages: list[Msg]) -> str:
    return "\n".join(line for line in messages[1].text.splitlines() if line.startswith("- "))


def make(workspace: Path, model: FunctionModel | None, **config: object) -> MemoryMaintenance:
    manager = WorkspaceManager(workspace)
    running = MemoryMaintenance(
        manager,
        config=MemoryConfig(index=False, **config),  # type: ignore[arg-type]
        model=model,
        index=None,
        gate=PeriodicGate(lambda: NOW),
        clock=lambda: NOW,
        cleanup=evictions_cleanup(manager),
    )
    running._holders = 1
    return running


def touch(path: Path, text: str, when: datetime) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (when.timestamp(), when.timestamp()))


async def test_full_pass_archives_consolidates_and_prunes_every_namespace(workspace: Path) -> None:
    old_day = (NOW - timedelta(days=91)).date().isoformat()
    recent_day = (NOW - timedelta(days=3)).date().isoformat()
    touch(workspace / "memory" / f"{old_day}.md", "- ancient", NOW - timedelta(days=91))
    touch(workspace / "memory" / f"{recent_day}.md", "- recent shared", NOW - timedelta(days=3))
    touch(workspace / "memory" / "notes.md", "- not a date", NOW - timedelta(days=400))
    alice = workspace / "users" / "alice"
    touch(alice / "memory" / f"{recent_day}.md", "- alice fact", NOW - timedelta(days=3))
    sessions = alice / "agents" / "bot" / "sessions"
    touch(sessions / "old.jsonl", "{}", NOW - timedelta(days=181))
    touch(sessions / "old.log.jsonl", "{}", NOW - timedelta(days=181))
    touch(sessions / "new.jsonl", "{}", NOW - timedelta(days=1))
    touch(sessions / "sessions.json", "{}", NOW - timedelta(days=365))

    report = await make(workspace, FunctionModel(echo_merge)).run()

    assert report.archived == [f"memory/{old_day}.md"]
    assert (workspace / "memory" / "archive" / f"{old_day}.md").read_text() == "- ancient"
    assert (workspace / "memory" / "notes.md").exists()
    assert sorted(report.consolidated) == ["(shared)", "alice"]
    assert (workspace / "MEMORY.md").read_text() == "- recent shared\n- not a date\n"
    # alice had no MEMORY.md of her own: hers starts empty, never from the shared one (the
    # memory of calls without a user, which no user may read)
    assert (alice / "MEMORY.md").read_text() == "- alice fact\n"
    assert sorted(report.pruned) == [
        "agents/bot/sessions/old.jsonl",
        "agents/bot/sessions/old.log.jsonl",
    ]
    assert (sessions / "new.jsonl").exists()
    assert (sessions / "sessions.json").exists()
    assert report.expired == []


async def test_old_tasks_and_traces_expire_with_the_sessions(workspace: Path) -> None:
    """Task records and results, traces and subagent registries go with old sessions."""
    agent = workspace / "users" / "alice" / "agents" / "bot"
    old, recent = NOW - timedelta(days=181), NOW - timedelta(days=179)
    touch(agent / "tasks" / "t-old.result.md", "result", old)
    touch(agent / "tasks" / "t-old.json", "{}", old)
    touch(agent / "tasks" / "t-new.json", "{}", recent)  # e.g. kept fresh by its heartbeat
    touch(agent / "traces" / "s-old.jsonl", "{}", old)
    touch(agent / "traces" / "s-new.jsonl", "{}", recent)
    touch(workspace / "agents" / "bot" / "traces" / "shared.jsonl", "{}", old)
    touch(agent / "children" / "s-old.json", "{}", old)
    touch(agent / "children" / "s-new.json", "{}", recent)
    deleted: list[str] = []
    running = make(workspace, None)
    delete = running.workspace.delete

    async def recording_delete(path: str, user_id: str | None = None) -> None:
        deleted.append(path)
        await delete(path, user_id)

    running.workspace.delete = recording_delete  # type: ignore[method-assign]

    report = await running.run()

    assert sorted(report.expired) == [
        "agents/bot/children/s-old.json",
        "agents/bot/tasks/t-old.json",
        "agents/bot/tasks/t-old.result.md",
        "agents/bot/traces/s-old.jsonl",
        "agents/bot/traces/shared.jsonl",
    ]
    assert report.pruned == []
    # A record goes before its result: no reader sees "completed" without the result.
    assert deleted.index("agents/bot/tasks/t-old.json") < deleted.index(
        "agents/bot/tasks/t-old.result.md"
    )
    assert sorted(p.name for p in (agent / "tasks").iterdir()) == ["t-new.json"]
    assert sorted(p.name for p in (agent / "traces").iterdir()) == ["s-new.jsonl"]
    assert sorted(p.name for p in (agent / "children").iterdir()) == ["s-new.json"]
    assert not (workspace / "agents" / "bot" / "traces" / "shared.jsonl").exists()


async def test_consolidation_requests_are_throttled_per_user(workspace: Path) -> None:
    touch(workspace / "memory" / "2026-06-29.md", "- fact", NOW)
    model = FunctionModel(echo_merge)
    running = make(workspace, model)
    try:
        assert await running.request_consolidation("alice") is not None
        assert await running.request_consolidation("alice") is None
        assert await running.request_consolidation("bob") is not None
        shared = await running.request_consolidation(None)
        assert shared is not None
        await shared
        assert (workspace / "MEMORY.md").read_text() == "- fact\n"  # ran in the background
    finally:
        await running.release()
    assert running._worker is None


async def test_without_a_model_nothing_is_requested(workspace: Path) -> None:
    running = make(workspace, None)
    assert await running.request_consolidation("alice") is None
    await running.release()


async def test_the_worker_is_shared_per_workspace_and_stops_with_its_last_holder(
    workspace: Path,
) -> None:
    ws = WorkspaceManager(workspace)
    config = MemoryConfig(index=False)
    first = MemoryMaintenance.for_workspace(ws, config=config, model=None)
    second = MemoryMaintenance.for_workspace(WorkspaceManager(workspace), config=config, model=None)
    assert first is second
    await first.start()
    worker = first._worker
    assert worker is not None
    await first.release()
    assert not worker.done()
    await second.release()
    assert worker.done()
    third = MemoryMaintenance.for_workspace(ws, config=config, model=None)
    assert third is not first
    await third.release()


async def test_release_right_after_queuing_a_job_always_stops_the_worker(workspace: Path) -> None:
    touch(workspace / "memory" / "2026-06-29.md", "- fact", NOW)
    for _ in range(30):
        running = make(workspace, FunctionModel(echo_merge), consolidation_min_gap=timedelta(0))
        await running.start()
        assert await running.request_consolidation(None) is not None
        await asyncio.wait_for(running.release(), timeout=5)
        assert running._worker is None


async def test_full_pass_deletes_old_evicted_tool_results(workspace: Path) -> None:
    old = (
        workspace / "users" / "alice" / "large_tool_results" / "bot" / "shell-0123456789abcdef.txt"
    )
    new = workspace / "large_tool_results" / "bot" / "shell-fedcba9876543210.txt"
    touch(old, "x" * 10, NOW - timedelta(days=8))
    touch(new, "y" * 10, NOW - timedelta(days=1))
    report = await make(workspace, None).run()
    assert report.evictions_deleted == [
        "users/alice/large_tool_results/bot/shell-0123456789abcdef.txt"
    ]
    assert not old.exists()
    assert new.exists()


async def test_the_eviction_age_is_configurable(workspace: Path) -> None:
    evicted = workspace / "large_tool_results" / "bot" / "shell-0123456789abcdef.txt"
    touch(evicted, "x", NOW - timedelta(days=3))
    running = make(workspace, None)
    running.cleanup = evictions_cleanup(running.workspace, ToolResultEvictionConfig(max_age_days=2))
    report = await running.run()
    assert report.evictions_deleted == ["large_tool_results/bot/shell-0123456789abcdef.txt"]


async def test_a_worker_without_a_cleanup_leaves_evicted_results_alone(workspace: Path) -> None:
    evicted = workspace / "large_tool_results" / "bot" / "shell-0123456789abcdef.txt"
    touch(evicted, "x", NOW - timedelta(days=30))
    running = make(workspace, None)
    running.cleanup = None
    assert (await running.run()).evictions_deleted == []
    assert evicted.exists()


async def test_agents_with_other_memory_models_or_settings_each_consolidate_with_their_own(
    workspace: Path,
) -> None:
    """The registry once made the first agent's memory model serve every agent (issue 28)."""
    touch(workspace / "memory" / "2026-06-29.md", "- fact", NOW)
    config = MemoryConfig(index=False, consolidation_min_gap=timedelta(0))
    first_model, second_model = FunctionModel(echo_merge), FunctionModel(echo_merge)

    def clock() -> datetime:
        return NOW

    first = MemoryMaintenance.for_workspace(
        WorkspaceManager(workspace), config=config, model=first_model, clock=clock
    )
    second = MemoryMaintenance.for_workspace(
        WorkspaceManager(workspace), config=config, model=second_model, clock=clock
    )
    stricter = MemoryMaintenance.for_workspace(
        WorkspaceManager(workspace),
        config=MemoryConfig(index=False, max_memory_tokens=500),
        model=first_model,
        clock=clock,
    )
    same = MemoryMaintenance.for_workspace(
        WorkspaceManager(workspace), config=config, model=first_model, clock=clock
    )
    try:
        assert len({id(first), id(second), id(stricter)}) == 3
        assert same is first  # a subagent shares its parent's worker
        assert second.consolidator is not None
        assert stricter.consolidator is not None
        assert second.consolidator.model is second_model
        assert stricter.consolidator.max_memory_tokens == 500

        ran = await second.request_consolidation(None)
        assert ran is not None
        await ran
        assert second_model.requests
        assert not first_model.requests
    finally:
        for running in (first, second, stricter, same):
            await running.release()
    assert first._worker is None
    assert second._worker is None


async def test_work_a_call_schedules_starts_once_the_call_has_returned(workspace: Path) -> None:
    """``holding``: a job scheduled with the call's context waits for the call's block to end
    (failed or not), starts in order, and never waits for another session's call."""
    from harness.context import RuntimeContext

    maintenance = make(workspace, None)
    ran: list[str] = []

    def job(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            ran.append(name)

        return run

    ctx = RuntimeContext(session_id="s", user_id="ann", agent="bot")
    other = RuntimeContext(session_id="t", user_id="ann", agent="bot")

    async def failing_call() -> None:
        with maintenance.holding(ctx):
            maintenance.schedule("k", job("first"), ctx=ctx)
            maintenance.schedule("k", job("second"), ctx=ctx)
            maintenance.schedule("o", job("other session"), ctx=other)
            await asyncio.sleep(0.01)
            assert ran == ["other session"]
            raise RuntimeError("the call failed")

    with pytest.raises(RuntimeError, match="the call failed"):
        await failing_call()
    await maintenance.settled()
    assert ran == ["other session", "first", "second"]

    ran.clear()  # outside any call: at once
    maintenance.schedule("k", job("later"), ctx=ctx)
    await maintenance.settled()
    assert ran == ["later"]
