"""The durable task repository: bounded, results first, real cancels, survives restarts."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest

from harness.context import RuntimeContext
from harness.subagents.tasks import WORKER_LOST, TaskRecord, TaskRepository, TaskStatus
from harness.workspace import WorkspaceManager

CTX = RuntimeContext(session_id="s1")
ALICE = RuntimeContext(session_id="s1", user_id="alice")
BOB = RuntimeContext(session_id="s1", user_id="bob")
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
TASKS = "agents/harness/tasks"


class Make(Protocol):
    def __call__(self, ws: WorkspaceManager | None = None, **kwargs: Any) -> TaskRepository: ...


@pytest.fixture
async def make(workspace: Path) -> AsyncIterator[Make]:
    """Builds repositories on the test workspace and stops their tasks afterwards."""
    made: list[TaskRepository] = []

    def _make(ws: WorkspaceManager | None = None, **kwargs: Any) -> TaskRepository:
        repo = TaskRepository(ws or WorkspaceManager(workspace), "harness", **kwargs)
        made.append(repo)
        return repo

    yield _make
    for repo in made:
        await repo.aclose(0)


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def wait_until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"condition not met within {seconds} s")
        await asyncio.sleep(0.005)


def on_disk(workspace: Path, task_id: str, user: str | None = None) -> dict[str, Any]:
    prefix = f"users/{user}/" if user else ""
    data: dict[str, Any] = json.loads(
        (workspace / f"{prefix}{TASKS}/{task_id}.json").read_text(encoding="utf-8")
    )
    return data


def result_file(workspace: Path, task_id: str, user: str | None = None) -> Path:
    prefix = f"users/{user}/" if user else ""
    return workspace / f"{prefix}{TASKS}/{task_id}.result.md"


class Blocker:
    """Work that waits in a long sleep and remembers whether it started and was cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False
        self.finished = False

    async def __call__(self) -> str:
        self.started.set()
        try:
            await asyncio.sleep(3600)  # a long tool call
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.finished = True
        return "never"


def returning(text: str) -> Callable[[], Any]:
    async def work() -> str:
        return text

    return work


# -- construction ---------------------------------------------------------------------------


def test_invalid_limits_are_rejected(workspace: Path) -> None:
    ws = WorkspaceManager(workspace)
    with pytest.raises(ValueError, match="max_running"):
        TaskRepository(ws, "harness", max_running=0)
    with pytest.raises(ValueError, match="stale_after_seconds"):
        TaskRepository(ws, "harness", heartbeat_seconds=5, stale_after_seconds=5)


# -- 1. bounded, FIFO -----------------------------------------------------------------------


async def test_at_most_max_running_run_at_once_and_the_rest_wait_pending_in_order(
    make: Make,
) -> None:
    repo = make(max_running=8)
    running = 0
    peak = 0
    started: list[int] = []
    gates = [asyncio.Event() for _ in range(20)]

    def count_is(n: int) -> Callable[[], bool]:
        return lambda: len(started) == n

    def job(i: int) -> Callable[[], Any]:
        async def work() -> str:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            started.append(i)
            try:
                await gates[i].wait()
            finally:
                running -= 1
            return f"result {i}"

        return work

    records = [await repo.submit(CTX, agent_id="worker", work=job(i)) for i in range(20)]
    # While slots are free a task is recorded as running at once; then they queue.
    assert [r.status for r in records] == [TaskStatus.RUNNING] * 8 + [TaskStatus.PENDING] * 12

    await wait_until(lambda: len(started) == 8)
    await asyncio.sleep(0.1)  # time for a ninth to (wrongly) start
    assert running == 8
    assert sorted(started) == list(range(8))
    for i, record in enumerate(records):
        stored = await repo.get(record.task_id, None)
        assert stored is not None
        assert stored.status is (TaskStatus.RUNNING if i < 8 else TaskStatus.PENDING), i

    # Finish one at a time: each freed slot goes to the oldest waiting task.
    for n in range(20):
        gates[started[n]].set()
        if n + 8 < 20:
            await wait_until(count_is(n + 9))
            assert started[n + 8] == n + 8
            assert running <= 8

    finals = [await repo.wait(r, 5) for r in records]
    assert peak == 8
    assert [f.status for f in finals] == [TaskStatus.COMPLETED] * 20
    assert [await repo.result(f) for f in finals] == [f"result {i}" for i in range(20)]
    starts = [f.started_at for f in finals if f.started_at is not None]
    assert len(starts) == 20
    assert starts == sorted(starts)


# -- 2. results first -----------------------------------------------------------------------


async def test_the_full_result_is_written_before_the_record_says_completed(
    make: Make, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = WorkspaceManager(workspace)
    repo = make(ws)
    big = "".join(f"line {i}: résumé of the findings ✓\n" for i in range(5000))
    assert len(big.encode()) > 100_000
    events: list[tuple[str, str]] = []
    write_text = ws.write_text
    update_text = ws.update_text

    async def spy_write(path: str, text: str, user_id: str | None = None) -> str:
        if path.endswith(".result.md"):
            task_id = path.rsplit("/", 1)[-1].removesuffix(".result.md")
            events.append(("result written while", on_disk(workspace, task_id)["status"]))
        return await write_text(path, text, user_id)

    async def spy_update(
        path: str, transform: Callable[[str], str], user_id: str | None = None
    ) -> str:
        text = await update_text(path, transform, user_id)
        status = json.loads(text)["status"]
        if status == "completed":
            task_id = path.rsplit("/", 1)[-1].removesuffix(".json")
            saved = result_file(workspace, task_id).read_text(encoding="utf-8")
            events.append(("completed with result of", str(len(saved))))
        return text

    monkeypatch.setattr(ws, "write_text", spy_write)
    monkeypatch.setattr(ws, "update_text", spy_update)

    record = await repo.submit(CTX, agent_id="writer", work=returning(big))
    final = await repo.wait(record, 5)

    assert final.status is TaskStatus.COMPLETED
    assert events == [
        ("result written while", "running"),
        ("completed with result of", str(len(big))),
    ]
    assert final.result_path == f"{TASKS}/{record.task_id}.result.md"
    assert await repo.result(final) == big
    assert result_file(workspace, record.task_id).read_text(encoding="utf-8") == big


# -- 3. failures are failures ---------------------------------------------------------------


async def test_work_that_raises_fails_with_its_message_and_no_result(
    make: Make, workspace: Path
) -> None:
    repo = make()

    async def broken() -> str:
        raise RuntimeError("the tool exploded")

    record = await repo.submit(CTX, agent_id="worker", work=broken)
    final = await repo.wait(record, 5)

    assert final.status is TaskStatus.FAILED
    assert final.error == "the tool exploded"
    assert final.describe_status == "failed: the tool exploded"
    assert final.result_path is None
    assert final.finished_at is not None
    assert await repo.result(final) is None
    assert not result_file(workspace, record.task_id).exists()
    assert on_disk(workspace, record.task_id)["status"] == "failed"


async def test_an_exception_without_a_message_fails_with_its_type(make: Make) -> None:
    repo = make()

    async def broken() -> str:
        raise KeyError

    final = await repo.wait(await repo.submit(CTX, agent_id="w", work=broken), 5)
    assert final.status is TaskStatus.FAILED
    assert final.describe_status == "failed: KeyError"


# -- 4. cancel means stop -------------------------------------------------------------------


async def test_cancel_of_a_running_task_stops_its_coroutine_promptly(
    make: Make, workspace: Path
) -> None:
    repo = make()
    work = Blocker()
    record = await repo.submit(CTX, agent_id="worker", work=work)
    await asyncio.wait_for(work.started.wait(), 5)

    loop = asyncio.get_running_loop()
    began = loop.time()
    after = await asyncio.wait_for(repo.cancel(record.task_id, None), 5)

    assert loop.time() - began < 2
    assert work.cancelled
    assert work.finished
    assert after is not None
    assert after.status is TaskStatus.CANCELLED
    assert on_disk(workspace, record.task_id)["status"] == "cancelled"
    assert not result_file(workspace, record.task_id).exists()


async def test_cancel_of_a_pending_task_means_it_never_starts(make: Make) -> None:
    repo = make(max_running=1)
    first = Blocker()
    queued = Blocker()
    running = await repo.submit(CTX, agent_id="worker", work=first)
    waiting = await repo.submit(CTX, agent_id="worker", work=queued)
    await asyncio.wait_for(first.started.wait(), 5)
    stored = await repo.get(waiting.task_id, None)
    assert stored is not None
    assert stored.status is TaskStatus.PENDING

    after = await repo.cancel(waiting.task_id, None)
    assert after is not None
    assert after.status is TaskStatus.CANCELLED

    await repo.cancel(running.task_id, None)  # frees the only slot
    await asyncio.sleep(0.1)
    assert not queued.started.is_set()
    final = await repo.get(waiting.task_id, None)
    assert final is not None
    assert final.status is TaskStatus.CANCELLED
    assert final.started_at is None


async def test_cancel_of_a_finished_task_leaves_it_as_it_was(make: Make, workspace: Path) -> None:
    repo = make()

    async def broken() -> str:
        raise RuntimeError("boom")

    done = await repo.wait(await repo.submit(CTX, agent_id="w", work=returning("ok")), 5)
    failed = await repo.wait(await repo.submit(CTX, agent_id="w", work=broken), 5)
    for record in (done, failed):
        path = workspace / f"{TASKS}/{record.task_id}.json"
        before = path.read_bytes()
        after = await repo.cancel(record.task_id, None)
        assert after == record
        assert path.read_bytes() == before
    assert await repo.result(done) == "ok"


async def test_cancel_of_an_unknown_task_is_none(make: Make) -> None:
    assert await make().cancel("task_missing", None) is None


# -- 5. adopt -------------------------------------------------------------------------------


async def test_an_adopted_running_task_has_its_result_recorded(make: Make) -> None:
    repo = make()
    gate = asyncio.Event()

    async def child() -> str:
        await gate.wait()
        return "the adopted answer"

    running = asyncio.create_task(child())
    record = await repo.adopt(CTX, agent_id="worker", running=running, task="do it")
    assert record.status is TaskStatus.RUNNING
    assert record.started_at == record.created_at
    stored = await repo.get(record.task_id, None)
    assert stored is not None
    assert stored.status is TaskStatus.RUNNING

    gate.set()
    final = await repo.wait(record, 5)
    assert final.status is TaskStatus.COMPLETED
    assert await repo.result(final) == "the adopted answer"
    assert final.task == "do it"


async def test_an_adopted_task_that_raises_fails(make: Make) -> None:
    repo = make()

    async def child() -> str:
        await asyncio.sleep(0)
        raise ValueError("bad input")

    record = await repo.adopt(CTX, agent_id="w", running=asyncio.create_task(child()))
    final = await repo.wait(record, 5)
    assert final.describe_status == "failed: bad input"


# -- 6. restarts lose nothing ---------------------------------------------------------------

READER = """
import asyncio, json, sys
from harness.subagents.tasks import TaskRepository
from harness.workspace import WorkspaceManager

async def main():
    repo = TaskRepository(WorkspaceManager(sys.argv[1]), "harness")
    record = await repo.get(sys.argv[2], sys.argv[3])
    print(json.dumps({"status": record.status.value, "result": await repo.result(record)}))

asyncio.run(main())
"""

WRITER = """
import asyncio, sys
from harness.context import RuntimeContext
from harness.subagents.tasks import TaskRepository
from harness.workspace import WorkspaceManager

async def main():
    repo = TaskRepository(WorkspaceManager(sys.argv[1]), "harness")
    ctx = RuntimeContext(session_id="s1", user_id=sys.argv[2])
    async def work():
        return "from the other process\\n" * 6000
    record = await repo.submit(ctx, agent_id="writer", work=work)
    await repo.wait(record, 30)
    await repo.aclose()
    print(record.task_id)

asyncio.run(main())
"""


async def run_python(script: str, *args: str) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_second_process_reads_a_completed_task_and_its_result(
    make: Make, workspace: Path
) -> None:
    repo = make()
    text = "".join(f"finding {i}: ünïcode ok\n" for i in range(4000))
    record = await repo.submit(ALICE, agent_id="writer", work=returning(text))
    assert (await repo.wait(record, 5)).status is TaskStatus.COMPLETED

    out = json.loads(await run_python(READER, str(workspace), record.task_id, "alice"))
    assert out == {"status": "completed", "result": text}


async def test_a_task_completed_by_an_earlier_process_is_readable_here(
    make: Make, workspace: Path
) -> None:
    task_id = (await run_python(WRITER, str(workspace), "alice")).strip()
    repo = make()

    record = await repo.get(task_id, "alice")
    assert record is not None
    assert record.status is TaskStatus.COMPLETED
    assert record.worker != repo.worker
    assert await repo.result(record) == "from the other process\n" * 6000
    assert [r.task_id for r in await repo.undelivered(ALICE)] == [task_id]


# -- 7. lost workers ------------------------------------------------------------------------


def orphan(status: TaskStatus, heartbeat: datetime) -> TaskRecord:
    return TaskRecord(
        task_id="task_orphan",
        agent_id="worker",
        status=status,
        session_id="s1",
        worker="deadhost:4242",
        created_at=T0 - timedelta(hours=1),
        started_at=T0 - timedelta(hours=1) if status is TaskStatus.RUNNING else None,
        heartbeat_at=heartbeat,
    )


@pytest.mark.parametrize(
    ("age", "lost"),
    [
        (timedelta(seconds=60), True),  # the boundary counts as stale
        (timedelta(hours=2), True),
        (timedelta(seconds=60) - timedelta(microseconds=1), False),
        (timedelta(0), False),
    ],
)
@pytest.mark.parametrize("status", [TaskStatus.RUNNING, TaskStatus.PENDING])
async def test_an_unowned_task_whose_heartbeat_is_stale_is_reported_lost(
    make: Make, workspace: Path, age: timedelta, lost: bool, status: TaskStatus
) -> None:
    writer = make(clock=FakeClock(T0 - age))
    await writer.workspace.write_text(
        writer.record_path("task_orphan"), orphan(status, T0 - age).model_dump_json()
    )
    reader = make(clock=FakeClock(T0), heartbeat_seconds=10, stale_after_seconds=60)

    record = await reader.get("task_orphan", None)

    assert record is not None
    stored = on_disk(workspace, "task_orphan")
    if lost:
        assert record.status is TaskStatus.FAILED
        assert record.error is not None
        assert record.error.startswith(WORKER_LOST)
        assert "deadhost:4242" in record.error
        assert record.describe_status.startswith(f"failed: {WORKER_LOST}")
        assert record.finished_at == T0
        assert stored["status"] == "failed"
        assert stored["error"] == record.error
        assert [r.status for r in await reader.records(None)] == [TaskStatus.FAILED]
    else:
        assert record.status is status
        assert stored["status"] == status.value


async def test_a_task_lost_in_one_repository_is_lost_for_all(make: Make, workspace: Path) -> None:
    """Created by one instance that then went away, read by a fresh one much later."""
    clock = FakeClock(T0)
    first = make(clock=clock)
    work = Blocker()
    record = await first.submit(CTX, agent_id="worker", work=work)
    await asyncio.wait_for(work.started.wait(), 5)

    later = make(clock=FakeClock(T0 + timedelta(minutes=5)))
    lost = await later.get(record.task_id, None)

    assert lost is not None
    assert lost.status is TaskStatus.FAILED
    assert lost.error is not None
    assert lost.error.startswith(WORKER_LOST)
    assert on_disk(workspace, record.task_id)["status"] == "failed"


async def test_a_live_local_task_is_never_reported_lost(make: Make, workspace: Path) -> None:
    owner = make(heartbeat_seconds=0.05, stale_after_seconds=0.2)
    other = make(heartbeat_seconds=0.05, stale_after_seconds=0.2)

    started = asyncio.Event()

    async def slow() -> str:
        started.set()
        await asyncio.sleep(0.6)
        return "done"

    record = await owner.submit(CTX, agent_id="worker", work=slow)
    await asyncio.wait_for(started.wait(), 5)
    beats: list[str] = []
    loop = asyncio.get_running_loop()
    until = loop.time() + 0.5
    while loop.time() < until:
        mine = await owner.get(record.task_id, None)
        theirs = await other.get(record.task_id, None)
        assert mine is not None
        assert mine.status is TaskStatus.RUNNING
        assert theirs is not None
        assert theirs.status is TaskStatus.RUNNING
        beats.append(on_disk(workspace, record.task_id)["heartbeat_at"])
        await asyncio.sleep(0.05)

    assert len(set(beats)) >= 3  # the heartbeat kept moving
    assert beats == sorted(beats)
    final = await owner.wait(record, 5)
    assert final.status is TaskStatus.COMPLETED


async def test_the_owner_never_reports_its_own_live_task_lost(make: Make) -> None:
    """Even when its clock says the heartbeat is long overdue (a stalled event loop)."""
    clock = FakeClock(T0)
    owner = make(clock=clock)
    work = Blocker()
    record = await owner.submit(CTX, agent_id="worker", work=work)
    await asyncio.wait_for(work.started.wait(), 5)

    clock.now = T0 + timedelta(hours=1)
    mine = await owner.get(record.task_id, None)

    assert mine is not None
    assert mine.status is TaskStatus.RUNNING
    assert [r.status for r in await owner.records(None)] == [TaskStatus.RUNNING]
    assert not work.cancelled


# -- 8. cross-process cancel ----------------------------------------------------------------


async def test_cancel_of_a_task_another_worker_runs_is_obeyed_at_its_heartbeat(
    make: Make, workspace: Path
) -> None:
    owner = make(WorkspaceManager(workspace), heartbeat_seconds=0.05, stale_after_seconds=5)
    other = make(WorkspaceManager(workspace))
    work = Blocker()
    record = await owner.submit(ALICE, agent_id="worker", work=work)
    await asyncio.wait_for(work.started.wait(), 5)

    after = await other.cancel(record.task_id, "alice")

    assert after is not None
    assert after.status is TaskStatus.CANCELLED
    assert after.cancel_requested
    await wait_until(lambda: work.cancelled, seconds=3)
    final = await owner.wait(record, 5)
    assert final.status is TaskStatus.CANCELLED
    stored = on_disk(workspace, record.task_id, "alice")
    assert stored["status"] == "cancelled"
    assert stored["cancel_requested"] is True
    assert not result_file(workspace, record.task_id, "alice").exists()


@pytest.mark.parametrize("heartbeat", [0.05, 10.0])
async def test_a_queued_task_cancelled_by_another_worker_never_starts(
    make: Make, heartbeat: float
) -> None:
    """Whether the owner's heartbeat sees the cancel first or the freed slot does."""
    owner = make(max_running=1, heartbeat_seconds=heartbeat, stale_after_seconds=60)
    other = make()
    first = Blocker()
    queued = Blocker()
    running = await owner.submit(CTX, agent_id="worker", work=first)
    waiting = await owner.submit(CTX, agent_id="worker", work=queued)
    await asyncio.wait_for(first.started.wait(), 5)

    after = await other.cancel(waiting.task_id, None)
    assert after is not None
    assert after.status is TaskStatus.CANCELLED

    await asyncio.sleep(0.2)  # a few owner heartbeats
    await owner.cancel(running.task_id, None)
    final = await owner.wait(waiting, 5)
    await asyncio.sleep(0.05)
    assert final.status is TaskStatus.CANCELLED
    assert not queued.started.is_set()


# -- 9. listing and user namespaces ---------------------------------------------------------


async def test_records_filter_by_status_and_session_oldest_first(make: Make) -> None:
    repo = make()
    s2 = RuntimeContext(session_id="s2")

    async def broken() -> str:
        raise RuntimeError("no")

    done = await repo.wait(await repo.submit(CTX, agent_id="a", work=returning("x")), 5)
    failed = await repo.wait(await repo.submit(s2, agent_id="b", work=broken), 5)
    running = await repo.submit(CTX, agent_id="c", work=Blocker())

    def ids(records: list[TaskRecord]) -> list[str]:
        return [r.task_id for r in records]

    assert ids(await repo.records(None)) == [done.task_id, failed.task_id, running.task_id]
    assert ids(await repo.records(None, status=TaskStatus.COMPLETED)) == [done.task_id]
    assert ids(await repo.records(None, status=TaskStatus.FAILED)) == [failed.task_id]
    assert ids(await repo.records(None, session_id="s1")) == [done.task_id, running.task_id]
    assert ids(await repo.records(None, session_id="s2")) == [failed.task_id]
    assert await repo.records(None, status=TaskStatus.RUNNING, session_id="s2") == []
    assert await repo.records(None, status=TaskStatus.CANCELLED) == []


async def test_users_never_see_each_others_tasks(make: Make, workspace: Path) -> None:
    repo = make()
    work = Blocker()
    record = await repo.submit(ALICE, agent_id="worker", work=work)
    await asyncio.wait_for(work.started.wait(), 5)

    assert (workspace / f"users/alice/{TASKS}/{record.task_id}.json").is_file()
    assert not (workspace / f"{TASKS}/{record.task_id}.json").exists()
    assert await repo.get(record.task_id, "bob") is None
    assert await repo.get(record.task_id, None) is None
    assert await repo.records("bob") == []
    assert await repo.records(None) == []
    assert await repo.cancel(record.task_id, "bob") is None
    assert not work.cancelled

    mine = await repo.get(record.task_id, "alice")
    assert mine is not None
    assert mine.status is TaskStatus.RUNNING
    assert [r.task_id for r in await repo.records("alice")] == [record.task_id]

    await repo.cancel(record.task_id, "alice")
    assert work.cancelled
    assert await repo.undelivered(BOB) == []
    assert [r.task_id for r in await repo.undelivered(ALICE)] == [record.task_id]


# -- 10. completion notices -----------------------------------------------------------------


async def test_finished_tasks_are_undelivered_until_marked_even_across_restarts(
    make: Make, workspace: Path
) -> None:
    repo = make()
    other_session = RuntimeContext(session_id="s2", user_id="alice")
    one = await repo.wait(await repo.submit(ALICE, agent_id="a", work=returning("1")), 5)
    two = await repo.wait(await repo.submit(ALICE, agent_id="a", work=returning("2")), 5)
    elsewhere = await repo.wait(
        await repo.submit(other_session, agent_id="a", work=returning("3")), 5
    )
    still = await repo.submit(ALICE, agent_id="a", work=Blocker())

    pending = await repo.undelivered(ALICE)
    assert sorted(r.task_id for r in pending) == sorted([one.task_id, two.task_id])
    assert [r.task_id for r in await repo.undelivered(other_session)] == [elsewhere.task_id]
    assert await repo.undelivered(BOB) == []

    await repo.mark_delivered([r for r in pending if r.task_id == one.task_id])
    assert [r.task_id for r in await repo.undelivered(ALICE)] == [two.task_id]
    assert on_disk(workspace, one.task_id, "alice")["delivered_at"] is not None

    restarted = make()
    assert [r.task_id for r in await restarted.undelivered(ALICE)] == [two.task_id]
    assert [r.task_id for r in await restarted.undelivered(other_session)] == [elsewhere.task_id]
    await restarted.mark_delivered(await restarted.undelivered(ALICE))
    assert await restarted.undelivered(ALICE) == []
    assert await repo.undelivered(ALICE) == []  # marked by the other instance

    await repo.cancel(still.task_id, "alice")
    assert [r.task_id for r in await repo.undelivered(ALICE)] == [still.task_id]
    assert await make().undelivered(ALICE) == [await repo.get(still.task_id, "alice")]


async def test_a_task_another_worker_finishes_later_is_found_at_the_next_listing(
    make: Make,
) -> None:
    """Worker B continues a session whose background task runs, and ends, on worker A."""
    clock = FakeClock(T0)
    worker_b = make(clock=clock, heartbeat_seconds=10)
    assert await worker_b.undelivered(ALICE) == []  # listed: nothing yet
    worker_a = make()
    done = await worker_a.wait(await worker_a.submit(ALICE, agent_id="a", work=returning("x")), 5)
    assert done.status is TaskStatus.COMPLETED

    clock.now = T0 + timedelta(seconds=10)  # B lists again once per heartbeat_seconds
    found = await worker_b.undelivered(ALICE)

    assert [(r.task_id, r.status) for r in found] == [(done.task_id, TaskStatus.COMPLETED)]
    await worker_b.mark_delivered(found)
    assert await worker_a.undelivered(ALICE) == []  # told once, by whichever worker told it


async def test_a_task_running_when_its_worker_died_is_delivered_as_lost(
    make: Make, workspace: Path
) -> None:
    """A restart within the stale window sees the task running; it is reported once stale."""
    writer = make(clock=FakeClock(T0))
    await writer.workspace.write_text(
        writer.record_path("task_orphan"), orphan(TaskStatus.RUNNING, T0).model_dump_json()
    )
    clock = FakeClock(T0 + timedelta(seconds=5))
    restarted = make(clock=clock, heartbeat_seconds=10, stale_after_seconds=60)
    session = RuntimeContext(session_id="s1")
    assert await restarted.undelivered(session) == []  # still running, as far as anyone knows

    clock.now = T0 + timedelta(seconds=60)
    (lost,) = await restarted.undelivered(session)

    assert lost.task_id == "task_orphan"
    assert lost.describe_status.startswith(f"failed: {WORKER_LOST}")
    assert on_disk(workspace, "task_orphan")["status"] == "failed"


# -- 11. shutdown ---------------------------------------------------------------------------


async def test_aclose_waits_for_short_tasks_and_cancels_long_ones(make: Make) -> None:
    repo = make()

    async def short() -> str:
        await asyncio.sleep(0.05)
        return "made it"

    long = Blocker()
    quick = await repo.submit(CTX, agent_id="w", work=short)
    slow = await repo.submit(CTX, agent_id="w", work=long)
    await asyncio.wait_for(long.started.wait(), 5)

    loop = asyncio.get_running_loop()
    began = loop.time()
    await repo.aclose(0.5)
    assert loop.time() - began < 3

    done = await repo.get(quick.task_id, None)
    stopped = await repo.get(slow.task_id, None)
    assert done is not None
    assert done.status is TaskStatus.COMPLETED
    assert await repo.result(done) == "made it"
    assert stopped is not None
    assert stopped.status is TaskStatus.CANCELLED
    assert long.cancelled


# -- 12. corrupt records --------------------------------------------------------------------


async def test_a_corrupt_record_is_skipped_with_a_warning(
    make: Make, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = make()
    good = await repo.wait(await repo.submit(CTX, agent_id="w", work=returning("fine")), 5)
    tasks = workspace / TASKS
    (tasks / "task_garbled.json").write_text("{not json", encoding="utf-8")
    (tasks / "task_binary.json").write_bytes(b"\xff\xfe\x00\x81 garbage")
    (tasks / "task_partial.json").write_text('{"task_id": "task_partial"}', encoding="utf-8")

    with caplog.at_level(logging.WARNING, logger="harness.subagents.tasks"):
        records = await repo.records(None)
        assert await repo.get("task_garbled", None) is None

    assert [r.task_id for r in records] == [good.task_id]
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    for name in ("task_garbled", "task_binary", "task_partial"):
        assert name in warned


# -- waiting --------------------------------------------------------------------------------


async def test_wait_returns_at_once_for_a_task_that_already_finished(make: Make) -> None:
    repo = make()
    record = await repo.submit(CTX, agent_id="w", work=returning("quick"))
    await repo.wait(record, 5)

    loop = asyncio.get_running_loop()
    began = loop.time()
    final = await repo.wait(record, 5)  # the stale pending record, the task no longer live
    assert loop.time() - began < 0.3
    assert final.status is TaskStatus.COMPLETED
    assert await make().wait(record, 5) == final  # another instance: no polling delay either
    assert loop.time() - began < 0.3


async def test_wait_on_a_task_run_elsewhere_polls_until_it_ends_or_times_out(make: Make) -> None:
    owner = make()
    other = make()
    gate = asyncio.Event()

    async def work() -> str:
        await gate.wait()
        return "eventually"

    record = await owner.submit(CTX, agent_id="w", work=work)
    still = await other.wait(record, 0.2)
    assert still.status in (TaskStatus.PENDING, TaskStatus.RUNNING)

    asyncio.get_running_loop().call_later(0.1, gate.set)
    final = await other.wait(record, 5)
    assert final.status is TaskStatus.COMPLETED
    assert await other.result(final) == "eventually"


def _forged(task_id: str, *, user: str | None, session: str = "s1") -> str:
    return TaskRecord(
        task_id=task_id,
        agent_id="general-purpose",
        status=TaskStatus.COMPLETED,
        user_id=user,
        session_id=session,
        task="forged",
        created_at=T0,
        finished_at=T0,
        result_path=f"users/bob/{TASKS}/{task_id}.result.md",
    ).model_dump_json()


@pytest.mark.parametrize(
    ("file_id", "claimed_id", "claimed_user"),
    [
        ("task_forged", "task_forged", "bob"),  # names another user
        ("task_forged", "task_forged", None),  # names the calls without a user
        ("task_forged", "task_other", "alice"),  # names another task of hers
    ],
)
async def test_a_record_is_the_namespaces_it_was_read_from(
    workspace: Path,
    make: Make,
    caplog: pytest.LogCaptureFixture,
    file_id: str,
    claimed_id: str,
    claimed_user: str | None,
) -> None:
    """A record alice's model wrote naming bob used to make bob's session announce alice's
    text and read and write bob's namespace; identity now comes from where it was read."""
    records = workspace / "users" / "alice" / TASKS
    records.mkdir(parents=True)
    (records / f"{file_id}.json").write_text(_forged(claimed_id, user=claimed_user))
    bob_files = workspace / "users" / "bob" / TASKS
    bob_files.mkdir(parents=True)
    (bob_files / f"{claimed_id}.result.md").write_text("bob's result")
    repo = make()
    with caplog.at_level(logging.WARNING, logger="harness.subagents"):
        assert await repo.get(file_id, "alice") is None
        assert await repo.records("alice") == []
        for ctx in (ALICE, BOB, CTX):
            assert await repo.undelivered(ctx) == []
    assert "ignored the task record users/alice/" in caplog.text
    assert sorted(p.name for p in bob_files.iterdir()) == [f"{claimed_id}.result.md"]


async def test_a_record_rewritten_while_its_task_runs_cannot_redirect_it(
    workspace: Path, make: Make
) -> None:
    repo = make()
    blocker = Blocker()
    record = await repo.submit(ALICE, agent_id="general-purpose", work=blocker)
    await blocker.started.wait()
    path = workspace / "users" / "alice" / TASKS / f"{record.task_id}.json"
    path.write_text(_forged(record.task_id, user="bob"))
    cancelled = await repo.cancel(record.task_id, "alice")
    assert cancelled is not None
    assert cancelled.user_id == "alice"
    assert on_disk(workspace, record.task_id, "alice")["user_id"] == "alice"
    assert await repo.undelivered(BOB) == []
    assert not (workspace / "users" / "bob").exists()
