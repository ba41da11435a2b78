"""The approval gate: what happens to a gated tool call, from the policy and the ledger alone.

A new call a rule gates is recorded as requested and deferred (the call pauses), unless the
in-process resolver decides it at once. A call found waiting when a call starts is taken from
the session only when the ledger holds its request with the same fingerprint; then what the
ledger says decides it, once:

============================  ===========================================================
the ledger holds              what the call gets
============================  ===========================================================
no decision, not expired      it waits again (the call pauses again)
expired (decided or not)      an error result: not executed, the request expired
reject                        an error result: not executed, rejected (with the reason)
respond                       the reviewer's text as its result; the tool does not run
approve / edit                ``started`` is recorded (synced), then the tool runs (an edit
                              with the reviewer's arguments, validated, and said so)
started, never finished       an error result: the outcome is unknown, it is not run again
                              (unless its rule says the tool is idempotent)
finished                      the result the ledger recorded; the tool does not run again
============================  ===========================================================

A session line that names a call differently from its request (edited in the workspace) runs
nothing: its result says the call does not match what was requested.

A *journaling* gate (``journal=True``: a durable agent, :mod:`harness.durable`) keeps every
call in the ledger, gated or not: a call no rule gates is recorded as requested, approved by
``journal`` and started, in one step, before it runs, and its end when it finishes. A call
found unanswered that the ledger does not hold never started (its worker died between saving
the model's reply and starting it): it is decided as a new call, so a gated one still waits.
An ungated call that started and never finished is "outcome unknown" unless the policy names
its tool idempotent (``ApprovalPolicy.idempotent``).

A call whose tool surfaced a subagent's waiting call (:meth:`ApprovalGate.delegated`) waits
for that request; once it is decided, the child goes on with the decision
(:attr:`ApprovalGate.continue_child`) and the call's result is the child's reply, kept in the
ledger as a run's is. A background task's child surfaces its requests bound to the task
instead (nothing of the session waits); a decision on them continues the task
(:meth:`ApprovalGate.tasks_decided` says which, with what).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final

from pydantic import ValidationError

from harness.approvals.ledger import (
    Approval,
    ApprovalLedger,
    Approvals,
    Decided,
    Finished,
    Record,
    Requested,
    Started,
    decision_record,
)
from harness.approvals.policy import (
    ApprovalPolicy,
    ApprovalRule,
    DecisionKind,
    PendingApproval,
    ReviewerDecision,
)
from harness.context import RuntimeContext
from harness.errors import ApprovalConflict, InvalidDecision, UnknownApproval
from harness.kernel import (
    Decision,
    Defer,
    Msg,
    Paused,
    Run,
    Substitute,
    Tool,
    ToolResultBlock,
    ToolUseBlock,
    unanswered_calls,
)

__all__ = ["ApprovalGate", "fingerprint", "still_waiting"]

logger = logging.getLogger(__name__)

MAX_KEPT_RESULT: Final = 20_000
"""Characters of a gated tool's result the ledger keeps (what a resume replays after a crash)."""

JOURNALED_EXPIRY: Final = 10 * 365 * 86_400.0
"""A journaled run's request never waits (it starts when it is recorded): it does not expire."""

Clock = Callable[[], float]

ContinueChild = Callable[
    [str, Mapping[str, ReviewerDecision], RuntimeContext], Awaitable[str | Paused]
]
"""``continue_child(child_key, decisions, ctx)``: the waiting parent call's result, once the
child went on with the decisions, or the child's pause while it still waits."""


def fingerprint(
    tool: str, arguments: Mapping[str, Any], agent: str, ctx: RuntimeContext, call_id: str
) -> str:
    """What binds a decision to one call: tool, arguments, agent, session, user and call id."""
    bound = [tool, arguments, agent, ctx.session_id, ctx.user_id, call_id]
    return hashlib.sha256(json.dumps(bound, sort_keys=True, default=str).encode()).hexdigest()


def _decisions(approvals: Iterable[Approval]) -> dict[str, ReviewerDecision]:
    """The decisions taken on ``approvals``, by request id."""
    return {a.request.id: a.decided.decision for a in approvals if a.decided is not None}


class ApprovalGate:
    """Decides gated calls from ``policy`` and ``ledger`` (module docs); one per agent."""

    def __init__(
        self,
        policy: ApprovalPolicy,
        ledger: ApprovalLedger,
        *,
        clock: Clock = time.time,
        journal: bool = False,
    ) -> None:
        self.policy = policy
        self.ledger = ledger
        self.clock = clock
        self.journal = journal
        self.continue_child: ContinueChild | None = None
        """Continues a subagent whose call waited, with decisions (the subagent tools')."""
        self.tools: Callable[[str], Tool | None] | None = None
        """The agent's tools by name: a reviewer's edited arguments are checked against the
        tool's schema when the decision is recorded, so a typo costs no approval."""

    # -- what the agent asks ---------------------------------------------------------------

    async def decide(
        self,
        key: str,
        agent: str,
        ctx: RuntimeContext,
        call: ToolUseBlock,
        tool: Tool | None,
        *,
        resumed: bool,
    ) -> Decision | None:
        """The decision for ``call``, or None to leave the kernel's default."""
        if resumed:
            decided = await self._resumed(key, agent, ctx, call, tool)
            if decided is not None or not self.journal:
                return decided
            # Not in the journal: it never started, so it is as new as when the model made it.
        rule = self.policy.rule_for(call.name, tool.func if tool is not None else None)
        if rule is None or not self._gates(rule, call, ctx, tool):
            return await self._journaled(key, agent, ctx, call) if self.journal else None
        return await self._request(key, agent, ctx, call, rule, tool)

    async def finished(self, key: str, call: ToolUseBlock, result: ToolResultBlock) -> None:
        """Record the end of a gated run (after the tool's result is final).

        A call whose subagent was continued records its start with its end: continuing a
        child again is harmless (the child's own ledger runs each of its calls once), so
        nothing of it had to be durable before it ran.
        """
        output = result.text[:MAX_KEPT_RESULT]

        def change(approvals: Approvals) -> list[Record]:
            for approval in approvals.of_call(call.id):
                if approval.finished is not None:
                    continue
                ident, now = approval.request.id, self.clock()
                end = Finished(id=ident, at=now, output=output, is_error=result.is_error)
                if approval.started:
                    return [end.as_record()]
                if approval.request.child_key:
                    start = Started(id=ident, at=now, arguments=call.input)
                    return [start.as_record(), end.as_record()]
            return []

        await self.ledger.update(key, Approvals, change)

    async def delegated(
        self,
        key: str,
        agent: str,
        ctx: RuntimeContext,
        pending: Sequence[Mapping[str, Any]],
        *,
        task_id: str | None = None,
    ) -> None:
        """Record the requests a subagent surfaced as this session's.

        Each is bound to what waits for it: the paused call it came through
        (``via_tool_call``), or, with ``task_id``, the background task whose child made it.
        A decision on it continues the child (:attr:`continue_child`, or the task).
        """
        now = self.clock()
        surfaced = [
            p for p in pending if p.get("child_key") and (task_id or p.get("via_tool_call"))
        ]

        def request(p: Mapping[str, Any]) -> Requested:
            if task_id is not None:  # nothing of the session's waits: the task does
                call, bound = None, fingerprint("task", {}, agent, ctx, task_id)
            else:
                call = str(p["via_tool_call"])
                bound = fingerprint(
                    str(p.get("via_tool")), p.get("via_input") or {}, agent, ctx, call
                )
            return Requested(
                id=str(p["id"]),
                at=now,
                tool=str(p.get("tool")),
                arguments=dict(p.get("arguments") or {}),
                description=str(p.get("description") or ""),
                decisions=tuple(p.get("decisions") or ("reject",)),
                expires_at=p.get("expires_at") or now,
                agent=agent,
                session_id=ctx.session_id,
                user_id=ctx.user_id,
                tool_call_id=call,
                fingerprint=bound,
                subagent=p.get("subagent"),
                child_key=str(p["child_key"]),
                task_id=task_id,
            )

        def change(approvals: Approvals) -> list[Record]:
            return [request(p).as_record() for p in surfaced if str(p["id"]) not in approvals.by_id]

        if surfaced:
            await self.ledger.update(key, Approvals, change)

    async def tasks_decided(
        self, key: str, ids: Iterable[str]
    ) -> dict[str, tuple[str, dict[str, ReviewerDecision]]]:
        """The background tasks that requests ``ids`` belong to, each with its decisions.

        ``{task id: (child key, every decision on that task's requests)}``: what continues
        each task (the same decision given to its child again is harmless).
        """
        wanted = set(ids)

        def ask(approvals: Approvals) -> dict[str, tuple[str, dict[str, ReviewerDecision]]]:
            tasks = {
                approval.request.task_id
                for ident in wanted
                if (approval := approvals.by_id.get(ident)) is not None
            }
            found: dict[str, tuple[str, dict[str, ReviewerDecision]]] = {}
            for task_id in sorted(task for task in tasks if task):
                mine = approvals.of_task(task_id)
                found[task_id] = (str(mine[-1].request.child_key), _decisions(mine))
            return found

        return await self.ledger.query(key, Approvals, ask)

    async def waiting(self, key: str) -> set[str]:
        """The tool-call ids this session's ledger has requests for (left unrepaired on load)."""
        return await self.ledger.query(key, Approvals, Approvals.calls)

    async def pending(self, key: str) -> list[PendingApproval]:
        """The session's approvals that wait for a decision, oldest first.

        Not those expired: an expired request counts as rejected.
        """
        now = self.clock()

        def ask(approvals: Approvals) -> list[PendingApproval]:
            return [
                approval.pending()
                for approval in approvals.by_id.values()
                if approval.decided is None
                and not approval.started
                and now <= approval.request.expires_at
            ]

        return await self.ledger.query(key, Approvals, ask)

    async def record(
        self, key: str, decisions: Mapping[str, ReviewerDecision], *, by: str | None = None
    ) -> None:
        """Record reviewers' decisions, all or none.

        The same decision again is harmless; another decision for one already decided is an
        :class:`ApprovalConflict`; an id the session has no request for is an
        :class:`UnknownApproval`; a decision the rule does not allow, or edited arguments the
        tool's schema refuses, is an :class:`~harness.errors.InvalidDecision` (a ``ValueError``).
        """

        def change(approvals: Approvals) -> list[Record]:
            added: list[Record] = []
            for ident, decision in decisions.items():
                approval = approvals.by_id.get(ident)
                if approval is None:
                    msg = f"no approval {ident!r} in this session; list them with pending()"
                    raise UnknownApproval(msg)
                if approval.decided is not None:
                    taken = approval.decided.decision
                    if decision_record(taken) != decision_record(decision):
                        msg = (
                            f"approval {ident!r} was already decided "
                            f"({taken.kind}); a decision is final"
                        )
                        raise ApprovalConflict(msg)
                    continue
                if decision.kind not in approval.request.decisions:
                    allowed = ", ".join(approval.request.decisions)
                    msg = f"approval {ident!r} allows {allowed}, not {decision.kind}"
                    raise InvalidDecision(msg)
                if decision.kind == "edit" and decision.arguments is not None:
                    self._check_arguments(ident, approval.request, decision.arguments)
                decided = Decided(id=ident, at=self.clock(), decision=decision, by=by)
                added.append(decided.as_record())
            return added

        await self.ledger.update(key, Approvals, change)

    def _check_arguments(self, ident: str, request: Requested, arguments: Any) -> None:
        """Refuse edited arguments the tool's schema refuses (a subagent's tool is its own).

        Raises:
            InvalidDecision: They do not validate; nothing is recorded.
        """
        if self.tools is None or request.child_key:
            return
        tool = self.tools(request.tool)
        if tool is None:
            return
        try:
            tool.input_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
                for error in exc.errors()[:3]
            )
            msg = (
                f"the edited arguments of approval {ident!r} do not fit the tool "
                f"{request.tool!r} ({problems}); nothing was recorded: edit them again"
            )
            raise InvalidDecision(msg) from None

    # -- how ------------------------------------------------------------------------------

    def _gates(
        self, rule: ApprovalRule, call: ToolUseBlock, ctx: RuntimeContext, tool: Tool | None
    ) -> bool:
        if tool is not None:
            try:
                tool.input_model.model_validate(call.input)
            except ValidationError:
                return True  # arguments that do not validate wait too: the gate fails closed
        return rule.gates(call.input, ctx)

    async def _request(
        self,
        key: str,
        agent: str,
        ctx: RuntimeContext,
        call: ToolUseBlock,
        rule: ApprovalRule,
        tool: Tool | None,
    ) -> Decision:
        now = self.clock()
        request = _requested(
            "apr",
            agent,
            ctx,
            call,
            at=now,
            description=rule.describe(call.name, call.input),
            decisions=tuple(sorted(rule.decisions)),
            expires_at=now + rule.expires_after,
            idempotent=rule.idempotent,
        )
        await self.ledger.update(key, Approvals, lambda _: [request.as_record()])
        pending = request.pending()
        if self.policy.resolver is not None:
            try:
                decision = await self.policy.resolver(pending)
            except Exception:
                logger.warning("the approval resolver failed; the call waits", exc_info=True)
                decision = None
            if decision is not None:
                await self.record(key, {pending.id: decision}, by="resolver")
                decided = await self._resumed(key, agent, ctx, call, tool)
                if decided is not None:
                    return decided
        return Defer(pending.as_dict())

    async def _journaled(
        self, key: str, agent: str, ctx: RuntimeContext, call: ToolUseBlock
    ) -> Decision:
        """An ungated call of a journaling gate: requested, approved and started in one step."""
        now = self.clock()
        request = _requested(
            "run",
            agent,
            ctx,
            call,
            at=now,
            description="journaled run (no approval needed)",
            decisions=("approve",),
            expires_at=now + JOURNALED_EXPIRY,
            idempotent=call.name in self.policy.idempotent,
        )
        records = [
            request.as_record(),
            Decided(
                id=request.id, at=now, decision=ReviewerDecision("approve"), by="journal"
            ).as_record(),
            Started(id=request.id, at=now, arguments=call.input).as_record(),
        ]
        await self.ledger.update(key, Approvals, lambda _: records)
        return Run()

    async def _resumed(
        self, key: str, agent: str, ctx: RuntimeContext, call: ToolUseBlock, tool: Tool | None
    ) -> Decision | None:
        mine = await self.ledger.query(key, Approvals, lambda view: view.of_call(call.id))
        if not mine:
            return None  # not a call that waited: the kernel's lost result
        if mine[-1].request.child_key:
            return await self._delegated(key, agent, ctx, call, mine)
        approval = mine[-1]
        request = approval.request
        if request.fingerprint != fingerprint(call.name, call.input, agent, ctx, call.id):
            logger.warning(
                "tool call %s does not match its approval request %s", call.id, request.id
            )
            return _refused(call, "it does not match the call that was submitted for approval")
        if approval.finished is not None:
            return _kept(call, approval.finished)
        if approval.started and not request.idempotent:
            return _unknown(call)
        decided = approval.decided
        if self.clock() > request.expires_at:
            return _refused(call, "its approval request expired before it could run")
        if decided is None:
            return Defer(approval.pending().as_dict())
        decision = decided.decision
        kind = decision.kind
        if kind == "reject":
            reason = decision.message
            return _refused(call, "a reviewer rejected it" + (f": {reason}" if reason else ""))
        if kind == "respond":
            return Substitute(
                ToolResultBlock(
                    id=call.id,
                    name=call.name,
                    output=(f"A reviewer answered instead of running the tool: {decision.message}"),
                )
            )
        arguments = decision.arguments if kind == "edit" else None
        if arguments is not None and tool is not None:
            try:
                tool.input_model.model_validate(arguments)
            except ValidationError as exc:
                return _refused(
                    call,
                    f"the reviewer's arguments do not validate ({exc.error_count()} problem(s))",
                )
        if not await self._start(key, request, arguments if arguments is not None else call.input):
            return _unknown(call)  # another resume started it meanwhile
        if arguments is None:
            return Run()
        return Run(arguments=arguments, note="run with arguments a reviewer edited")

    async def _delegated(
        self,
        key: str,
        agent: str,
        ctx: RuntimeContext,
        call: ToolUseBlock,
        mine: list[Approval],
    ) -> Decision:
        """A call whose tool (a subagent) waited: continue the child once it is decided."""
        surfaced = [a for a in mine if a.request.child_key == mine[-1].request.child_key]
        first = surfaced[0].request
        if first.fingerprint != fingerprint(call.name, call.input, agent, ctx, call.id):
            return _refused(call, "it does not match the call that was submitted for approval")
        done = next((a.finished for a in surfaced if a.finished is not None), None)
        if done is not None:
            return _kept(call, done)
        now = self.clock()
        decisions = _decisions(surfaced)
        open_ = [a for a in surfaced if a.decided is None and now <= a.request.expires_at]
        if open_ and not decisions:
            first_open, *rest = (a.pending().as_dict() for a in open_)
            return Defer(first_open, rest)
        continue_child = self.continue_child
        if continue_child is None:
            return _refused(call, "this agent cannot continue its subagents")

        async def continued() -> str | Paused:
            """The child, continued: its reply is the call's result, its pause the call's."""
            return await continue_child(str(first.child_key), decisions, ctx)

        return Run(instead=continued)

    async def _start(self, key: str, request: Requested, arguments: Mapping[str, Any]) -> bool:
        """Record that the run starts, unless it started already; whether it was recorded."""
        claimed = False

        def start(approvals: Approvals) -> list[Record]:
            nonlocal claimed
            now = approvals.by_id.get(request.id)
            claimed = now is not None and not (now.started and not request.idempotent)
            if not claimed:
                return []
            return [Started(id=request.id, at=self.clock(), arguments=arguments).as_record()]

        await self.ledger.update(key, Approvals, start)
        return claimed


def _requested(
    kind: str,
    agent: str,
    ctx: RuntimeContext,
    call: ToolUseBlock,
    *,
    at: float,
    description: str,
    decisions: tuple[DecisionKind, ...],
    expires_at: float,
    idempotent: bool,
) -> Requested:
    """A new request for ``call``, bound to it by its fingerprint; its id starts with ``kind``."""
    return Requested(
        id=f"{kind}_{secrets.token_hex(8)}",
        at=at,
        tool=call.name,
        arguments=call.input,
        description=description,
        decisions=decisions,
        expires_at=expires_at,
        agent=agent,
        session_id=ctx.session_id,
        user_id=ctx.user_id,
        tool_call_id=call.id,
        fingerprint=fingerprint(call.name, call.input, agent, ctx, call.id),
        idempotent=idempotent,
    )


def _kept(call: ToolUseBlock, finished: Finished) -> Substitute:
    """The result the ledger kept of a run that finished: the tool does not run again."""
    return Substitute(
        ToolResultBlock(
            id=call.id, name=call.name, output=finished.output, is_error=finished.is_error
        )
    )


def _unknown(call: ToolUseBlock) -> Substitute:
    return Substitute(
        ToolResultBlock(
            id=call.id,
            name=call.name,
            output=(
                "Error: this tool call started but its end was not recorded (the process "
                "stopped while it ran); whether it took effect is unknown, and it was not run "
                "again. Check before you retry."
            ),
            is_error=True,
        )
    )


def still_waiting(
    pending: list[PendingApproval], messages: Sequence[Msg], tasks: Collection[str] = ()
) -> list[PendingApproval]:
    """The requests something still waits for.

    That is a call the session holds unanswered, or a background task of ``tasks`` (those
    ``waiting``). A request whose call never reached the session (its process stopped before
    the save), or whose task went on without it (cancelled, lost), waits for nothing.
    """
    calls = {call.id for call in unanswered_calls(messages)}
    return [
        request
        for request in pending
        if (request.tool_call_id in calls if request.task_id is None else request.task_id in tasks)
    ]


def _refused(call: ToolUseBlock, why: str) -> Substitute:
    return Substitute(
        ToolResultBlock(
            id=call.id, name=call.name, output=f"Error: not executed: {why}.", is_error=True
        )
    )
