"""Approvals of a background task's subagent: the task waits, a decision continues it, once.

The parent's turn is not held: it spawned the task with ``timeout_seconds=0`` and answered.
The child's gated call makes the task ``waiting`` (no slot, no heartbeat), its request is the
parent session's pending approval with the task's id, and a decision (from another agent, as
another process would give it) continues the task. A witness file outside the agent counts
the gated tool's runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from _witness import Witness

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.approvals import ApprovalRule, ReviewerDecision
from harness.models import ScriptedChatModel
from harness.subagents import TaskRecord, TaskStatus

CTX = RuntimeContext(session_id="s1", user_id="ann")
TURNS: tuple[dict[str, Any], ...] = (
    {
        "match": "^delegate the release",
        "tool_calls": [
            {
                "name": "agent_spawn",
                "input": {"agent_id": "general-purpose", "task": "ship it", "timeout_seconds": 0},
            }
        ],
    },
    {"match": "^ship it", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
    {"match": "status: accepted", "text": "started it in the background"},
    {"match": "deployed prod", "text": "the child shipped it"},
    {"match": "not executed", "text": "the child was told no"},
    {"text": "done", "repeat": True},
)


@pytest.fixture
def witness(tmp_path: Path) -> Witness:
    return Witness(tmp_path / "witness.txt")


def make(workspace: Path, witness: Witness, rule: ApprovalRule | None = None) -> HarnessAgent:
    return HarnessAgent(
        model=ScriptedChatModel(list(TURNS)),
        workspace=workspace,
        tools=witness.tools(),
        approvals={"deploy": rule or ApprovalRule()},
        memory=None,
        trace=False,
    )


async def waiting_task(workspace: Path, witness: Witness, rule: ApprovalRule | None = None) -> str:
    """Delegate in one agent (closed after), and return the id of the task that waits."""
    agent = make(workspace, witness, rule)
    try:
        reply = answer(await agent.call("delegate the release", ctx=CTX))
        assert reply.text == "started it in the background"
        assert agent.tasks is not None
        [record] = await agent.tasks.records(CTX.user_id)
        record = await agent.tasks.wait(record, 30)
    finally:
        await agent.aclose()
    assert record.status is TaskStatus.WAITING, record
    assert len(record.approvals) == 1
    return record.task_id


async def finished(agent: HarnessAgent, task_id: str) -> TaskRecord:
    assert agent.tasks is not None
    record = await agent.tasks.get(task_id, CTX.user_id)
    assert record is not None
    return await agent.tasks.wait(record, 30)


async def test_a_waiting_task_is_listed_does_not_hold_the_session_and_runs_once_approved(
    workspace: Path, witness: Witness
) -> None:
    task_id = await waiting_task(workspace, witness)
    agent = make(workspace, witness)
    try:
        [request] = await agent.pending_approvals(CTX)
        assert (request.tool, request.subagent, request.task_id) == (
            "deploy",
            "general-purpose",
            task_id,
        )
        assert request.tool_call_id is None
        assert (answer(await agent.call("hello", ctx=CTX))).text == "done"  # the session is free
        assert witness.runs() == []

        assert await agent.decide({request.id: "approve"}, ctx=CTX) == {request.id: task_id}
        record = await finished(agent, task_id)
        assert record.status is TaskStatus.COMPLETED, record
        assert await agent.tasks.result(record) == "the child shipped it"  # type: ignore[union-attr]
        await agent.decide({request.id: "approve"}, ctx=CTX)  # the same again: harmless
        assert await agent.pending_approvals(CTX) == []

        answer(await agent.call("what happened?", ctx=CTX))
        messages = await agent.sessions.load(CTX)
    finally:
        await agent.aclose()
    assert witness.runs() == ["deploy:prod"]
    notices = [m.text for m in messages if "background subagent" in m.text]
    assert len(notices) == 1
    assert "the child shipped it" in notices[0]


async def test_a_rejected_call_of_a_waiting_task_never_runs(
    workspace: Path, witness: Witness
) -> None:
    task_id = await waiting_task(workspace, witness)
    agent = make(workspace, witness)
    try:
        [request] = await agent.pending_approvals(CTX)
        await agent.decide({request.id: ReviewerDecision("reject", message="not today")}, ctx=CTX)
        record = await finished(agent, task_id)
        assert await agent.tasks.result(record) == "the child was told no"  # type: ignore[union-attr]
    finally:
        await agent.aclose()
    assert witness.runs() == []


async def test_two_decisions_at_once_continue_the_task_once(
    workspace: Path, witness: Witness
) -> None:
    task_id = await waiting_task(workspace, witness)
    first, second = make(workspace, witness), make(workspace, witness)
    try:
        [request] = await first.pending_approvals(CTX)
        decided = await asyncio.gather(
            first.decide({request.id: "approve"}, ctx=CTX),
            second.decide({request.id: "approve"}, ctx=CTX),
        )
        assert list(decided) == [{request.id: task_id}] * 2
        for agent in (first, second):
            assert (await finished(agent, task_id)).status is TaskStatus.COMPLETED
    finally:
        await first.aclose()
        await second.aclose()
    assert witness.runs() == ["deploy:prod"]


async def test_a_cancelled_waiting_task_waits_for_nothing(
    workspace: Path, witness: Witness
) -> None:
    task_id = await waiting_task(workspace, witness)
    agent = make(workspace, witness)
    try:
        assert agent.tasks is not None
        [request] = await agent.pending_approvals(CTX)
        cancelled = await agent.tasks.cancel(task_id, CTX.user_id)
        assert cancelled is not None
        assert cancelled.status is TaskStatus.CANCELLED
        assert await agent.pending_approvals(CTX) == []
        await agent.decide({request.id: "approve"}, ctx=CTX)  # too late: continues nothing
        assert (await finished(agent, task_id)).status is TaskStatus.CANCELLED
    finally:
        await agent.aclose()
    assert witness.runs() == []


async def test_a_waiting_task_whose_request_expired_goes_on_rejected(
    workspace: Path, witness: Witness
) -> None:
    task_id = await waiting_task(workspace, witness, ApprovalRule(expires_after=0.2))
    await asyncio.sleep(0.3)
    agent = make(workspace, witness)
    try:
        assert await agent.pending_approvals(CTX) == []  # expired: nobody can approve it now
        answer(await agent.call("anything new?", ctx=CTX))  # the parent's next step continues it
        record = await finished(agent, task_id)
        assert record.status is TaskStatus.COMPLETED, record
        assert await agent.tasks.result(record) == "the child was told no"  # type: ignore[union-attr]
    finally:
        await agent.aclose()
    assert witness.runs() == []


async def test_a_waiting_task_is_never_reported_lost(workspace: Path, witness: Witness) -> None:
    """No process runs it, so it sends no heartbeat: that is not a dead worker."""
    task_id = await waiting_task(workspace, witness)
    agent = make(workspace, witness)
    try:
        assert agent.tasks is not None
        later = agent.tasks.clock() + agent.tasks.stale_after * 10
        agent.tasks.clock = lambda: later
        record = await agent.tasks.get(task_id, CTX.user_id)
        assert record is not None
        assert record.status is TaskStatus.WAITING
    finally:
        await agent.aclose()
