"""The approval desk: what a reviewer does with a session's waiting calls.

A person (at the command line, over HTTP, in Python) lists what waits and decides it; the
desk records the decisions in the ledger through the :class:`~harness.approvals.ApprovalGate`
and, for a request a background task's child made, continues that task at once, in the
background. Continuing a session's own turn is the agent's: it runs the turn
(``HarnessAgent.resume``), and the gate decides the waiting calls from the ledger as the turn
starts.

The desk is given what it cannot know from this layer: where a session's approvals are kept
(``session_of``), what still waits (``waiting``: a call the session holds unanswered, or a
background task) and how a task is continued (``continue_task``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from harness.approvals.gate import ApprovalGate
from harness.approvals.policy import DecisionKind, PendingApproval, ReviewerDecision
from harness.context import RuntimeContext

__all__ = ["ApprovalDesk", "ContinueTask"]

ContinueTask = Callable[
    [str, str, Mapping[str, ReviewerDecision], RuntimeContext], Awaitable[object]
]
"""``continue_task(task_id, child_key, decisions, ctx)``: a waiting task goes on, decided."""


class ApprovalDesk:
    """Lists and decides the approvals of an agent's sessions (module docs)."""

    def __init__(
        self,
        gate: ApprovalGate,
        *,
        session_of: Callable[[RuntimeContext], str],
        waiting: Callable[[RuntimeContext], Awaitable[list[PendingApproval]]],
        continue_task: ContinueTask | None = None,
    ) -> None:
        self.gate = gate
        self.session_of = session_of
        self.waiting = waiting
        self.continue_task = continue_task

    async def pending(self, ctx: RuntimeContext) -> list[PendingApproval]:
        """What the session's calls and tasks wait for, oldest first."""
        return await self.waiting(ctx)

    async def decide(
        self,
        decisions: Mapping[str, ReviewerDecision | DecisionKind],
        ctx: RuntimeContext,
        *,
        by: str | None = None,
    ) -> dict[str, str]:
        """Record decisions; those on a background task's requests continue that task.

        Returns ``{approval id: task id}`` for those. Nothing is recorded unless every
        decision is valid (:meth:`ApprovalGate.record` raises).
        """
        given = {
            ident: d if isinstance(d, ReviewerDecision) else ReviewerDecision(d)
            for ident, d in decisions.items()
        }
        key = self.session_of(ctx)
        await self.gate.record(key, given, by=by)
        if self.continue_task is None:
            return {}
        tasks = await self.gate.tasks_decided(key, given)
        for task_id, (child_key, taken) in tasks.items():
            await self.continue_task(task_id, child_key, taken, ctx)
        return {ident: task for task, (_, taken) in tasks.items() for ident in given.keys() & taken}
