"""The approval ledger: what was requested, decided, started and finished, out of the model's reach.

One append-only list of records per session, in the workspace's approvals ledger
(:mod:`harness.workspace.ledger`): beside the workspace (``<parent>/.<workspace name>.approvals/``,
which neither the file tools nor the sandbox can reach) for a workspace on this machine's disk,
or in the store (Redis) under a namespace of its own for a workspace in a store. The session
files are in the workspace, which a sandboxed command can write; so a waiting call is taken
from the session only when the ledger has a request for it with the same fingerprint (tool,
arguments, agent, session, user, call id).

Every change is one atomic step (an ``flock`` and an ``fsync`` on the local disk, a
compare-and-set in a store): that is what makes two reviewers deciding at once, or two workers
resuming at once, end with one decision and one run.

Records are typed (:data:`ApprovalRecord`: frozen dataclasses, one per kind), and stored as
JSON objects (one per line on disk), each with ``kind``, ``id`` (the approval's) and ``at``
(seconds since the epoch), exactly as before they were typed:

- ``requested`` (:class:`Requested`): the pending approval
  (:class:`~harness.approvals.PendingApproval`'s fields), its ``fingerprint`` and whether the
  tool is ``idempotent``;
- ``decided`` (:class:`Decided`): ``decision`` (``kind``, ``arguments``, ``message``), and ``by``;
- ``started`` (:class:`Started`): the run began, with the ``arguments`` it runs with;
- ``finished`` (:class:`Finished`): the run ended, with its ``result`` (``output``, ``is_error``).

A record that does not read as its kind (a hand edit) is left out, as a torn line is.

The gate reads them through :class:`Approvals`, a view the ledger keeps per session and brings
up to date with the new records only, indexed by approval id, by tool call and by background
task: deciding one of a thousand waiting calls costs what deciding one does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from harness.approvals.policy import DecisionKind, PendingApproval, ReviewerDecision
from harness.workspace.ledger import FileLedger, MemoryLedger, Record, StoreLedger
from harness.workspace.ledger import Ledger as ApprovalLedger
from harness.workspace.ledger import ledger_for as _ledger_for

if TYPE_CHECKING:
    from harness.stores.base import BaseStore
    from harness.workspace import WorkspaceManager

__all__ = [
    "Approval",
    "ApprovalLedger",
    "ApprovalRecord",
    "Approvals",
    "Decided",
    "FileLedger",
    "Finished",
    "MemoryLedger",
    "Record",
    "Requested",
    "Started",
    "StoreLedger",
    "ledger_for",
    "parse_record",
]


def ledger_for(workspace: WorkspaceManager, store: BaseStore | None = None) -> ApprovalLedger:
    """Where a workspace's approvals are kept: out of the model's reach, beside the leases."""
    return _ledger_for(workspace, "approvals", store)


@dataclass(frozen=True, slots=True, kw_only=True)
class Requested:
    """A call waits for a decision: what the reviewer is shown, and what binds it to the call.

    ``tool_call_id`` is the session's call that waits (the gated call, or the subagent tool
    call a child's request surfaced through); a background task's request has ``task_id``
    instead. ``child_key`` names the subagent whose call it is, when it is one.
    """

    kind: ClassVar[str] = "requested"
    id: str
    at: float
    tool: str
    arguments: Mapping[str, Any]
    description: str
    decisions: tuple[DecisionKind, ...]
    expires_at: float
    agent: str
    session_id: str | None
    user_id: str | None
    tool_call_id: str | None
    fingerprint: str
    idempotent: bool = False
    subagent: str | None = None
    child_key: str | None = None
    task_id: str | None = None

    def as_record(self) -> Record:
        """As stored (the fields of a subagent's request only on one)."""
        record: Record = {
            "kind": self.kind,
            "id": self.id,
            "at": self.at,
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "description": self.description,
            "decisions": list(self.decisions),
            "expires_at": self.expires_at,
            "agent": self.agent,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "tool_call_id": self.tool_call_id,
            "idempotent": self.idempotent,
            "fingerprint": self.fingerprint,
        }
        if self.child_key is not None:
            record |= {"subagent": self.subagent, "child_key": self.child_key}
        if self.task_id is not None:
            record["task_id"] = self.task_id
        return record

    def pending(self) -> PendingApproval:
        """The request as a reviewer is shown it."""
        return PendingApproval(
            id=self.id,
            tool=self.tool,
            arguments=self.arguments,
            description=self.description,
            decisions=frozenset(self.decisions),
            requested_at=self.at,
            expires_at=self.expires_at,
            agent=self.agent,
            session_id=self.session_id,
            user_id=self.user_id,
            tool_call_id=self.tool_call_id,
            subagent=self.subagent,
            task_id=self.task_id,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """A reviewer's decision (the first one counts; a decision is final)."""

    kind: ClassVar[str] = "decided"
    id: str
    at: float
    decision: ReviewerDecision
    by: str | None = None

    def as_record(self) -> Record:
        return {
            "kind": self.kind,
            "id": self.id,
            "at": self.at,
            "decision": decision_record(self.decision),
            "by": self.by,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Started:
    """The run began, with these arguments (recorded, and synced, before the tool runs)."""

    kind: ClassVar[str] = "started"
    id: str
    at: float
    arguments: Mapping[str, Any]

    def as_record(self) -> Record:
        return {"kind": self.kind, "id": self.id, "at": self.at, "arguments": dict(self.arguments)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Finished:
    """The run ended with this result (what a resume replays instead of running it again)."""

    kind: ClassVar[str] = "finished"
    id: str
    at: float
    output: str
    is_error: bool = False

    def as_record(self) -> Record:
        result = {"output": self.output, "is_error": self.is_error}
        return {"kind": self.kind, "id": self.id, "at": self.at, "result": result}


ApprovalRecord = Requested | Decided | Started | Finished
"""One record of the approval ledger."""


def decision_record(decision: ReviewerDecision) -> Record:
    """A decision as stored."""
    return {
        "kind": decision.kind,
        "arguments": dict(decision.arguments) if decision.arguments is not None else None,
        "message": decision.message,
    }


def parse_record(record: Record) -> ApprovalRecord | None:
    """The typed record of a stored one; None for one that does not read as its kind."""
    try:
        kind, ident, at = record["kind"], record["id"], float(record.get("at") or 0.0)
        if not isinstance(ident, str):
            return None
        if kind == "requested":
            return Requested(
                id=ident,
                at=at,
                tool=str(record["tool"]),
                arguments=dict(record.get("arguments") or {}),
                description=str(record.get("description") or ""),
                decisions=tuple(record.get("decisions") or ("reject",)),
                expires_at=float(record["expires_at"]),
                agent=str(record["agent"]),
                session_id=record.get("session_id"),
                user_id=record.get("user_id"),
                tool_call_id=record.get("tool_call_id"),
                fingerprint=str(record.get("fingerprint") or ""),
                idempotent=bool(record.get("idempotent")),
                subagent=record.get("subagent"),
                child_key=record.get("child_key"),
                task_id=record.get("task_id"),
            )
        if kind == "decided":
            given = record["decision"]
            decision = ReviewerDecision(
                given["kind"], arguments=given.get("arguments"), message=given.get("message")
            )
            return Decided(id=ident, at=at, decision=decision, by=record.get("by"))
        if kind == "started":
            return Started(id=ident, at=at, arguments=dict(record.get("arguments") or {}))
        if kind == "finished":
            result = record.get("result") or {}
            return Finished(
                id=ident,
                at=at,
                output=str(result.get("output", "")),
                is_error=bool(result.get("is_error")),
            )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return None


@dataclass(frozen=True, slots=True)
class Approval:
    """One approval as the ledger's records tell it: its request, decision, starts and end."""

    request: Requested
    decided: Decided | None = None
    started: int = 0
    finished: Finished | None = None

    def pending(self) -> PendingApproval:
        return self.request.pending()


class Approvals:
    """A session's approvals, folded from its records one at a time (a ledger view).

    Indexed by approval id (in the order requested), by the session's tool call that waits,
    and by background task, so each question the gate asks costs the same however many
    approvals the session holds.
    """

    def __init__(self) -> None:
        self.by_id: dict[str, Approval] = {}
        self._by_call: dict[str, list[str]] = {}
        self._by_task: dict[str, list[str]] = {}

    def add(self, record: Record) -> None:
        typed = parse_record(record)
        if typed is None:
            return
        ident = typed.id
        if isinstance(typed, Requested):
            self.by_id[ident] = Approval(typed)
            for index, value in (
                (self._by_call, typed.tool_call_id),
                (self._by_task, typed.task_id),
            ):
                if value is not None and ident not in index.setdefault(value, []):
                    index[value].append(ident)
            return
        known = self.by_id.get(ident)
        if known is None:
            return
        if isinstance(typed, Decided) and known.decided is None:
            self.by_id[ident] = Approval(known.request, typed, known.started, known.finished)
        elif isinstance(typed, Started):
            self.by_id[ident] = Approval(known.request, known.decided, known.started + 1, None)
        elif isinstance(typed, Finished) and known.started:
            self.by_id[ident] = Approval(known.request, known.decided, known.started, typed)

    def of_call(self, tool_call_id: str) -> list[Approval]:
        """The approvals requested for the session's tool call, oldest first."""
        return [self.by_id[ident] for ident in self._by_call.get(tool_call_id, ())]

    def of_task(self, task_id: str) -> list[Approval]:
        """The approvals requested for a background task, oldest first."""
        return [self.by_id[ident] for ident in self._by_task.get(task_id, ())]

    def calls(self) -> set[str]:
        """The session's tool calls that have requests (left unrepaired on load)."""
        return set(self._by_call)
