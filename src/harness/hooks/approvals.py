"""Approvals: a gated tool call waits for a person before it runs, durably, and runs once.

At each :class:`~harness.kernel.ToolDecision` the hook asks the
:class:`~harness.approvals.ApprovalGate`: a new call its policy gates is recorded in the ledger
and deferred (the call pauses: :class:`~harness.kernel.Paused`); a call found waiting
when a call starts is decided from the ledger (run once, rejected, answered, or waiting
again). At :class:`~harness.kernel.PostActing` it records the end of a gated run, with the
result memory keeps, so a crash before the session is saved never runs the tool again. At the
:class:`~harness.kernel.PostCall` of a paused call, it records what a tool surfaced (a
subagent's call waiting for approval) as a request of this session, bound to the call it came
through.

Priority 1000, after every other hook: its decision is the last word on whether a tool runs,
and the result it records is the one memory keeps (after eviction and every other edit).

Trust boundary: the policy is the operator's (Python); the ledger is out of the model's reach
(beside the workspace, or in the store); what the session file says of a waiting call is
believed only where the ledger's fingerprint matches it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from harness.approvals.gate import ApprovalGate
from harness.context import RuntimeContext
from harness.kernel import Event, Hook, HookHost, PostActing, PostCall, Run, ToolDecision, Toolkit

__all__ = ["ApprovalHook"]


class ApprovalHook(Hook):
    """Decides gated tool calls and records their runs (module docs)."""

    priority = 1000
    events: ClassVar[tuple[type[Event], ...]] = (ToolDecision, PostActing, PostCall)

    def __init__(self, gate: ApprovalGate, session_of: Callable[[RuntimeContext], str]) -> None:
        self.gate = gate
        self.session_of = session_of
        self._toolkit: Toolkit | None = None
        self._running: set[tuple[str, str]] = set()  # (call, tool call) of gated runs

    def attach(self, agent: HookHost) -> None:
        self._toolkit = agent.toolkit

    async def on_event(self, event: Event) -> None:
        key = self.session_of(event.ctx)
        if isinstance(event, ToolDecision):
            call = event.tool_call
            tool = self._toolkit.get(call.name) if self._toolkit is not None else None
            decision = await self.gate.decide(
                key, event.agent, event.ctx, call, tool, resumed=event.resumed
            )
            if decision is not None:
                event.decision = decision
            if isinstance(decision, Run):  # the gate recorded its start: its end is recorded too
                self._running.add((event.call_id, call.id))
        elif isinstance(event, PostActing):
            ran = (event.call_id, event.tool_call.id)
            if ran in self._running:
                self._running.discard(ran)
                await self.gate.finished(key, event.tool_call, event.result)
        elif isinstance(event, PostCall):
            # A run whose subagent waits again ended without a result: nothing to record.
            self._running = {ran for ran in self._running if ran[0] != event.call_id}
            # What a tool surfaced (a subagent's waiting call) becomes this session's request.
            await self.gate.delegated(key, event.agent, event.ctx, event.outcome.pending)
