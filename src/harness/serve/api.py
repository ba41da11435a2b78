"""The native API: turns as server-sent events, sessions, approvals, traces, tasks, memory.

Memory is searched and reviewed here too; ``docs/serve.md``, "Native API", documents every route.

Every route acts for the caller's user (:func:`~harness.serve.http.caller`) and reaches only
that user's namespace: a session, task, trace or memory entry id of another user is simply not
found.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.background import BackgroundTask

from harness.approvals import DecisionKind, ReviewerDecision
from harness.context import RuntimeContext
from harness.errors import ApprovalConflict, HarnessError, RequestRefused, UnknownApproval
from harness.memory.presentation import search_memory
from harness.memory.provenance import Decision, excluded_record
from harness.observability import read_trace, summarize
from harness.serve.events import encode_sse, message_json
from harness.serve.highlight import Highlighter, HighlightRequest
from harness.serve.http import read_body
from harness.serve.state import ServeState
from harness.serve.streams import IdentifiedEvent
from harness.serve.turn_log import parse_event_id
from harness.session.catalogue import SessionCatalogue
from harness.subagents import TaskRecord, TaskRepository
from harness.workspace import user_prefix

__all__ = ["native_router"]


class TurnRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: str
    detach: bool = False
    """The turn goes on when the client leaves; ``GET .../events`` picks it up again."""
    rewind: bool = False
    """``input`` replaces the session's last input and what followed it (edit, regenerate)."""


class RenameRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(max_length=2_000)


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: DecisionKind
    arguments: dict[str, Any] | None = None
    message: str | None = Field(default=None, max_length=20_000)


class DecisionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decisions: dict[str, DecisionBody] = Field(min_length=1, max_length=100)


class ReviewRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: Decision


def native_router(state: ServeState) -> APIRouter:
    router = APIRouter(prefix="/v1")
    agent = state.turns.agent
    catalogue = SessionCatalogue(agent.workspace, agent.name)
    highlighter = Highlighter()
    prices = state.config.limits.prices if state.config.limits else None

    @router.post("/sessions/{session_id}/turns", response_model=None)
    async def start_turn(session_id: str, request: Request) -> Response:
        user = state.authenticate(request)
        ctx = state.context(user, session_id)
        body = await read_body(request, TurnRequest, state.config)
        turn = await state.streams.start(ctx, body.input, detach=body.detach, rewind=body.rewind)
        return _streamed(turn.identified(state.config.ping_seconds), turn.closing())

    @router.get("/sessions/{session_id}/events", response_model=None)
    async def reattach(
        session_id: str, request: Request, after: str | None = None
    ) -> StreamingResponse:
        """The session's latest turn again: what it streamed after ``Last-Event-ID``, then on.

        From any worker: the turn's own process reads its events in memory, another reads the
        session's turn log (:mod:`harness.serve.turn_log`). Without an id, from its start.
        """
        ctx = _ctx(request, session_id)
        since = parse_event_id(request.headers.get("last-event-id") or after)
        events = await state.reattach(ctx, since)
        if events is None:
            raise _not_found("turn of session", session_id, code="no_turn")
        return _streamed(events)

    @router.post("/sessions/{session_id}/cancel")
    async def cancel_turn(session_id: str, request: Request) -> dict[str, Any]:
        """Stop the session's running turn, in this worker or another (within a second)."""
        ctx = _ctx(request, session_id)
        return {"session_id": session_id, "cancelled": await state.cancel(ctx)}

    @router.get("/sessions/{session_id}/approvals")
    async def approvals(session_id: str, request: Request) -> dict[str, Any]:
        ctx = _ctx(request, session_id)
        return {"data": [p.as_dict() for p in await agent.pending_approvals(ctx)]}

    @router.post("/sessions/{session_id}/approvals", response_model=None)
    async def decide(session_id: str, request: Request) -> Response:
        """Record decisions (all or none), then continue the turn as a stream.

        Decisions that are all on background tasks' calls answer 202 with the tasks that go on
        (``{"tasks": {approval id: task id}}``): no turn of the session waited for them.
        """
        ctx = _ctx(request, session_id)
        body = await read_body(request, DecisionsRequest, state.config)
        try:
            given = {
                ident: ReviewerDecision(d.kind, arguments=d.arguments, message=d.message)
                for ident, d in body.decisions.items()
            }
            tasks = await agent.decide(given, ctx=ctx, by=f"http:{ctx.user_id or '-'}")
        except UnknownApproval as exc:
            raise RequestRefused(404, "approval_not_found", str(exc)) from None
        except ApprovalConflict as exc:
            raise RequestRefused(409, "approval_conflict", str(exc)) from None
        except ValueError as exc:
            raise RequestRefused(400, "invalid_decision", str(exc)) from None
        if tasks.keys() == given.keys():  # background tasks go on; no turn of the session waits
            return JSONResponse({"tasks": tasks}, status_code=202)
        turn = await state.streams.start(ctx, None)
        return _streamed(turn.identified(state.config.ping_seconds), turn.closing())

    @router.get("/sessions")
    async def sessions(
        request: Request, limit: Annotated[int, Query(ge=1, le=1_000)] = 100
    ) -> dict[str, Any]:
        """The caller's sessions, most recently active first, with their titles."""
        user = state.authenticate(request)
        infos = await catalogue.list(user, limit=limit)
        return {"data": [info.as_dict() for info in infos]}

    @router.get("/sessions/{session_id}")
    async def history(session_id: str, request: Request) -> dict[str, Any]:
        ctx = _ctx(request, session_id)
        messages = await agent.sessions.read(ctx)  # a turn may be appending to it
        if not messages:
            raise _not_found("session", session_id)
        shown = messages[-state.config.max_history :]
        return {
            "session_id": session_id,
            "title": await catalogue.title(session_id, ctx.user_id),
            "running": await state.running(ctx),
            "total": len(messages),
            "messages": [message_json(m) for m in shown],
        }

    @router.patch("/sessions/{session_id}")
    async def rename(session_id: str, request: Request) -> dict[str, Any]:
        """Title the session (a blank title goes back to the head of its first message)."""
        ctx = _ctx(request, session_id)
        body = await read_body(request, RenameRequest, state.config)
        try:
            info = await catalogue.rename(session_id, ctx.user_id, body.title)
        except KeyError:
            raise _not_found("session", session_id) from None
        return info.as_dict()

    @router.delete("/sessions/{session_id}")
    async def delete(session_id: str, request: Request) -> dict[str, Any]:
        """Delete the session; 409 ``session_busy`` while a turn runs on it."""
        ctx = _ctx(request, session_id)
        if not await state.delete(ctx):
            raise _not_found("session", session_id)
        return {"id": session_id, "deleted": True}

    @router.get("/sessions/{session_id}/trace")
    async def trace(session_id: str, request: Request) -> dict[str, Any]:
        ctx = _ctx(request, session_id)
        assert ctx.session_id is not None
        _, records = await read_trace(agent.workspace, agent.name, ctx.session_id, ctx.user_id)
        if records is None:
            raise _not_found("trace of session", session_id)
        return {
            "session_id": session_id,
            "calls": [call.as_dict() for call in summarize(records, prices)],
            "records": records[-2_000:],
        }

    @router.get("/tasks")
    async def tasks(request: Request, session: str | None = None) -> dict[str, Any]:
        user = state.authenticate(request)
        records = await _tasks().records(user, session_id=session)
        return {"data": [_task_json(r) for r in records]}

    @router.get("/tasks/{task_id}")
    async def task(task_id: str, request: Request) -> dict[str, Any]:
        user = state.authenticate(request)
        repo = _tasks()
        record = await repo.get(task_id, user)
        if record is None:
            raise _not_found("task", task_id)
        return _task_json(record, await repo.result(record))

    @router.post("/tasks/{task_id}/cancel")
    async def cancel(task_id: str, request: Request) -> dict[str, Any]:
        user = state.authenticate(request)
        record = await _tasks().cancel(task_id, user)
        if record is None:
            raise _not_found("task", task_id)
        return _task_json(record)

    @router.get("/memory/search")
    async def search(
        request: Request,
        q: Annotated[str, Query(min_length=1, max_length=2_000)],
        limit: Annotated[int, Query(ge=1, le=50)] = 5,
    ) -> dict[str, Any]:
        user = state.authenticate(request)
        maintenance = agent.maintenance
        if maintenance is None or maintenance.index is None:
            raise RequestRefused(404, "memory_off", "this agent has no long-term memory index")
        try:  # through the one rule of what memory shows (harness.memory.presentation)
            hits = await search_memory(
                maintenance, agent.provenance, q, limit, user, relative=user_prefix(user)
            )
        except HarnessError as exc:
            raise RequestRefused(503, "memory_unavailable", str(exc)) from None
        return {
            "data": [
                {
                    "path": hit.path,
                    "line_number": hit.first,
                    "last_line": hit.last,
                    "content": hit.content,
                    "rank": hit.rank,
                    "trust": hit.trust.value,
                    "origin": hit.origin,
                    "lines": [{"text": line.text, "trust": line.trust.value} for line in hit.lines],
                }
                for hit in hits
            ]
        }

    @router.get("/memory/review")
    async def review(request: Request) -> dict[str, Any]:
        """The user's memory entries kept out of the prompt, and why.

        As ``harness memory review --json``: waiting for review, or rejected (a rejection can
        be undone).
        """
        user = state.authenticate(request)
        book = await agent.provenance.book(user)
        return {"data": [excluded_record(book, entry) for entry in book.excluded()]}

    @router.post("/memory/review/{entry_id}")
    async def decide_entry(entry_id: str, request: Request) -> dict[str, Any]:
        """Promote (trust) or reject one of the user's entries: ``harness memory promote``.

        The latest decision counts, so either can be undone; the same one again is harmless.
        Another user's entry id is not found, as an unknown one is.
        """
        user = state.authenticate(request)
        body = await read_body(request, ReviewRequest, state.config)
        try:
            entry = await agent.provenance.review(
                user, entry_id, body.decision, by=f"http:{user or '-'}"
            )
        except KeyError:
            raise _not_found("memory entry", entry_id, code="entry_not_found") from None
        return {**entry.as_record(), "decision": body.decision}

    @router.post("/highlight")
    async def highlight(request: Request) -> dict[str, Any]:
        """A reply's code blocks as runs of (class, text), for the page to color.

        Pygments, in a thread, within limits (:mod:`harness.serve.highlight`); reads nothing of
        the user's, but wants the key all the same, so the server lexes for its users only.
        """
        state.authenticate(request)
        body = await read_body(request, HighlightRequest, state.config)
        return {"blocks": await highlighter.highlight(body.blocks)}

    def _ctx(request: Request, session_id: str) -> RuntimeContext:
        return state.context(state.authenticate(request), session_id)

    def _tasks() -> TaskRepository:
        if agent.tasks is None:
            raise RequestRefused(404, "tasks_off", "this agent runs no background tasks")
        return agent.tasks

    return router


def _not_found(what: str, name: str, *, code: str | None = None) -> RequestRefused:
    return RequestRefused(
        404, code or f"{what.split()[0]}_not_found", f"no {what} {name[:80]!r} for this user"
    )


def _task_json(record: TaskRecord, result: str | None = None) -> dict[str, Any]:
    data = record.model_dump(mode="json")
    data.pop("user_id", None)
    if result is not None:
        data["result"] = result
    return data


def _streamed(
    events: AsyncIterator[IdentifiedEvent | None], background: BackgroundTask | None = None
) -> StreamingResponse:
    return StreamingResponse(
        _sse(events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        background=background,
    )


async def _sse(events: AsyncIterator[IdentifiedEvent | None]) -> AsyncIterator[bytes]:
    """The turn's events as SSE with their ids; a comment line for each None (a ping)."""
    async for event in events:
        if event is None:
            yield b": ping\n\n"
        else:
            ident, name, data = event
            yield encode_sse(name, data, ident=ident)
