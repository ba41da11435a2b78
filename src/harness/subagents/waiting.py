"""Which approvals of a session still wait: the one rule every reader of them uses.

A request in the ledger waits only while something waits for it: a call the session holds
unanswered (the gated call, or the ``agent_spawn`` / ``agent_send`` a subagent's call surfaced
through), or a background task that is ``waiting``. The agent's
:meth:`~harness.HarnessAgent.pending_approvals`, ``harness approvals list`` and the HTTP API all
list what this returns, and a new turn is refused while a call of the session is among it.
"""

from __future__ import annotations

from harness.approvals import ApprovalGate, PendingApproval, still_waiting
from harness.context import RuntimeContext
from harness.session import SessionStore
from harness.subagents.tasks import TaskRepository, TaskStatus

__all__ = ["waiting_approvals"]


async def waiting_approvals(
    gate: ApprovalGate,
    sessions: SessionStore,
    tasks: TaskRepository | None,
    ctx: RuntimeContext,
) -> list[PendingApproval]:
    """The session's requests that wait for a decision, oldest first (module docs)."""
    pending = await gate.pending(sessions.directory(ctx))
    if not pending:
        return []
    waiting = set()
    for task_id in {request.task_id for request in pending if request.task_id is not None}:
        record = await tasks.get(task_id, ctx.user_id) if tasks is not None else None
        if record is not None and record.status is TaskStatus.WAITING:
            waiting.add(task_id)
    return still_waiting(pending, await sessions.read(ctx), waiting)
