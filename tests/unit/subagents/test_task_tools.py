"""The task tools: task_output, task_cancel and task_list, and their exact output."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.context import RuntimeContext
from harness.subagents.tasks import TaskRecord, TaskRepository, TaskStatus
from harness.tools.tasks import TaskTools
from harness.workspace import WorkspaceManager

ANN = RuntimeContext(session_id="s1", user_id="ann")
BOB = RuntimeContext(session_id="s1", user_id="bob")
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
STAMP = "2026-01-02T03:04:05Z"


class SteppingClock:
    """Starts at T0 and moves one millisecond per reading (so records sort by creation)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
async def repo(workspace: Path) -> AsyncIterator[TaskRepository]:
    tasks = TaskRepository(WorkspaceManager(workspace), "harness", clock=SteppingClock())
    yield tasks
    await tasks.aclose(0)


@pytest.fixture
def tools(repo: TaskRepository) -> TaskTools:
    return TaskTools(repo)


class Blocker:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def __call__(self) -> str:
        self.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return "never"


async def finished(repo: TaskRepository, text: str, agent: str = "writer") -> TaskRecord:
    async def work() -> str:
        return text

    return await repo.wait(await repo.submit(ANN, agent_id=agent, work=work), 5)


async def failing(repo: TaskRepository, message: str) -> TaskRecord:
    async def work() -> str:
        raise RuntimeError(message)

    return await repo.wait(await repo.submit(ANN, agent_id="worker", work=work), 5)


async def running(repo: TaskRepository, agent: str = "worker") -> tuple[TaskRecord, Blocker]:
    work = Blocker()
    record = await repo.submit(ANN, agent_id=agent, work=work)
    await asyncio.wait_for(work.started.wait(), 5)
    return record, work


def header(record: TaskRecord, status: str) -> str:
    return (
        f"task_id: {record.task_id}\nagent_id: {record.agent_id}\nstatus: {status}\n"
        f"created_at: {STAMP}\n\n"
    )


# -- task_output ----------------------------------------------------------------------------


async def test_output_of_a_completed_task_is_its_full_result(
    repo: TaskRepository, tools: TaskTools
) -> None:
    text = "".join(f"paragraph {i} of the report\n" for i in range(6000))
    record = await finished(repo, text)

    out = await tools.task_output(record.task_id, ANN)

    assert out == header(record, "completed") + "Result:\n" + text
    assert re.search(r"^created_at: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", out, re.MULTILINE)


async def test_output_of_a_failed_task_is_its_error(repo: TaskRepository, tools: TaskTools) -> None:
    record = await failing(repo, "the API refused")

    out = await tools.task_output(record.task_id, ANN)

    assert out == header(record, "failed: the API refused") + "Error: the API refused"


async def test_output_of_a_cancelled_task(repo: TaskRepository, tools: TaskTools) -> None:
    record, _ = await running(repo)
    await repo.cancel(record.task_id, "ann")

    out = await tools.task_output(record.task_id, ANN)

    assert out == header(record, "cancelled") + "Task was cancelled."


async def test_a_peek_does_not_wait(repo: TaskRepository, tools: TaskTools) -> None:
    record, work = await running(repo)
    loop = asyncio.get_running_loop()
    began = loop.time()

    out = await tools.task_output(record.task_id, ANN, block=False)

    assert loop.time() - began < 1
    assert out == header(record, "running") + "Task still running..."
    assert not work.cancelled


async def test_a_peek_at_a_queued_task_says_pending(workspace: Path) -> None:
    repo = TaskRepository(
        WorkspaceManager(workspace), "harness", max_running=1, clock=SteppingClock()
    )
    try:
        await running(repo)
        queued = await repo.submit(ANN, agent_id="later", work=Blocker())

        out = await TaskTools(repo).task_output(queued.task_id, ANN, block=False)

        assert out.startswith(header(queued, "pending") + "Task pending ")
        assert "\n" not in out.removeprefix(header(queued, "pending"))
    finally:
        await repo.aclose(0)


async def test_blocking_waits_until_the_task_finishes(
    repo: TaskRepository, tools: TaskTools
) -> None:
    gate = asyncio.Event()

    async def work() -> str:
        await gate.wait()
        return "worth the wait"

    record = await repo.submit(ANN, agent_id="writer", work=work)
    asyncio.get_running_loop().call_later(0.2, gate.set)

    out = await tools.task_output(record.task_id, ANN)  # blocks by default

    assert out == header(record, "completed") + "Result:\nworth the wait"
    out = await tools.task_output(record.task_id, ANN, block=True, timeout_ms=5000)
    assert out.endswith("Result:\nworth the wait")


async def test_a_wait_that_times_out_reports_the_task_still_running(
    repo: TaskRepository, tools: TaskTools
) -> None:
    record, work = await running(repo)
    loop = asyncio.get_running_loop()
    began = loop.time()

    out = await tools.task_output(record.task_id, ANN, block=True, timeout_ms=150)

    elapsed = loop.time() - began
    assert 0.1 <= elapsed < 2
    assert out == header(record, "running") + "Task still running..."
    assert "Error" not in out
    assert not work.cancelled
    stored = await repo.get(record.task_id, "ann")
    assert stored is not None
    assert stored.status is TaskStatus.RUNNING


async def test_output_errors(repo: TaskRepository, tools: TaskTools) -> None:
    record = await finished(repo, "ann's secret")

    assert await tools.task_output("", ANN) == "Error: task_id is required"
    assert await tools.task_output("   ", ANN) == "Error: task_id is required"
    assert await tools.task_output("x", ANN) == "Error: No background task found with ID: x"
    assert await tools.task_output("../../etc/passwd", ANN) == (
        "Error: No background task found with ID: ../../etc/passwd"
    )
    assert await tools.task_output(record.task_id, BOB) == (
        f"Error: No background task found with ID: {record.task_id}"
    )


async def test_output_tolerates_spaces_around_the_id(
    repo: TaskRepository, tools: TaskTools
) -> None:
    record = await finished(repo, "ok")
    assert (await tools.task_output(f" {record.task_id}\n", ANN)).endswith("Result:\nok")


# -- task_cancel ----------------------------------------------------------------------------


async def test_cancel_of_a_running_task(repo: TaskRepository, tools: TaskTools) -> None:
    record, work = await running(repo)

    out = await tools.task_cancel(record.task_id, ANN)

    assert out == (
        f"task_id: {record.task_id}\nstatus: cancelled\nCancellation requested successfully."
    )
    assert work.cancelled
    stored = await repo.get(record.task_id, "ann")
    assert stored is not None
    assert stored.status is TaskStatus.CANCELLED


@pytest.mark.parametrize("outcome", ["completed", "failed", "cancelled"])
async def test_cancel_of_a_finished_task_is_refused(
    repo: TaskRepository, tools: TaskTools, outcome: str
) -> None:
    if outcome == "completed":
        record = await finished(repo, "done")
    elif outcome == "failed":
        record = await failing(repo, "boom")
    else:
        record, _ = await running(repo)
        await repo.cancel(record.task_id, "ann")

    out = await tools.task_cancel(record.task_id, ANN)

    assert out == (
        f"task_id: {record.task_id}\nstatus: {outcome}\n"
        "note: Task already in terminal state, cannot cancel."
    )
    stored = await repo.get(record.task_id, "ann")
    assert stored is not None
    assert stored.status.value == outcome


async def test_cancel_errors(repo: TaskRepository, tools: TaskTools) -> None:
    record, work = await running(repo)

    assert await tools.task_cancel("", ANN) == "Error: task_id is required"
    assert await tools.task_cancel("nope", ANN) == "Error: No background task found with ID: nope"
    assert await tools.task_cancel(record.task_id, BOB) == (
        f"Error: No background task found with ID: {record.task_id}"
    )
    assert not work.cancelled


# -- task_list ------------------------------------------------------------------------------


async def test_list_when_there_is_nothing(tools: TaskTools) -> None:
    assert await tools.task_list(ANN) == "No background tasks tracked."
    assert await tools.task_list(ANN, status="all") == "No background tasks tracked."
    assert await tools.task_list(ANN, status="running") == (
        "No background tasks tracked with status 'running'."
    )


async def test_list_shows_each_task_oldest_first(repo: TaskRepository, tools: TaskTools) -> None:
    done = await finished(repo, "x", agent="researcher")
    failed = await failing(repo, "boom")
    live, _ = await running(repo, agent="coder")

    out = await tools.task_list(ANN)

    assert out == (
        "3 tracked task(s):\n"
        f"- task_id: {done.task_id}  agent: researcher  status: completed  created: {STAMP}\n"
        f"- task_id: {failed.task_id}  agent: worker  status: failed: boom  created: {STAMP}\n"
        f"- task_id: {live.task_id}  agent: coder  status: running  created: {STAMP}"
    )
    assert await tools.task_list(BOB) == "No background tasks tracked."


async def test_list_filters_by_status(repo: TaskRepository, tools: TaskTools) -> None:
    done = await finished(repo, "x")
    live, _ = await running(repo)

    assert await tools.task_list(ANN, status="completed") == (
        "1 tracked task(s):\n"
        f"- task_id: {done.task_id}  agent: writer  status: completed  created: {STAMP}"
    )
    for spelling in ("running", " RUNNING "):
        out = await tools.task_list(ANN, status=spelling)
        assert out.splitlines()[0] == "1 tracked task(s):"
        assert live.task_id in out
        assert done.task_id not in out
    assert await tools.task_list(ANN, status="failed") == (
        "No background tasks tracked with status 'failed'."
    )
    assert (await tools.task_list(ANN, status="all")).startswith("2 tracked task(s):")


async def test_list_rejects_an_unknown_status(tools: TaskTools) -> None:
    out = await tools.task_list(ANN, status="bogus")

    assert out.startswith("Error:")
    assert "bogus" in out
    for name in ("all", "pending", "running", "completed", "failed", "cancelled"):
        assert name in out


async def test_a_long_list_shows_the_newest(repo: TaskRepository, tools: TaskTools) -> None:
    records = [await finished(repo, str(i)) for i in range(53)]

    lines = (await tools.task_list(ANN)).splitlines()

    assert lines[0] == "53 tracked task(s):"
    assert lines[1] == "(the 3 oldest are not shown)"
    assert len(lines) == 2 + 50
    assert records[2].task_id not in "\n".join(lines)
    assert lines[2].startswith(f"- task_id: {records[3].task_id}  ")
    assert lines[-1].startswith(f"- task_id: {records[-1].task_id}  ")


def test_the_tools_are_the_three_methods(tools: TaskTools) -> None:
    assert [t.__name__ for t in tools.tools()] == ["task_output", "task_cancel", "task_list"]
