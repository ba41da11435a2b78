"""``POST /v1/responses``: a harness agent behind the OpenAI Responses API.

The ``openai`` SDK's ``client.responses.create(...)`` (whole or streamed),
``client.responses.stream(...)`` and LangChain's ``ChatOpenAI(use_responses_api=True)`` talk to
the agent as they would to a model. What differs from a model, and why (as for chat
completions, :mod:`harness.serve.openai_api`):

- ``model`` names the agent: the agent chooses its model.
- The conversation is the harness's session. ``conversation`` (an id, or ``{"id": ...}``) or the
  ``X-Harness-Session`` header names it; ``previous_response_id`` continues the session the
  response belongs to; without any of them the input's resent history names it
  (:mod:`harness.serve.conversations`: the session a turn left with that history, else a new
  one that keeps it), and its response's id then continues it. Only the *new turn* of
  ``input`` is taken (its user messages after its last assistant item): the session already
  holds what came before.
- ``instructions``, system and developer messages, ``tools``, ``temperature`` and the other
  options are accepted and ignored: the agent's instructions and tools are the operator's.
  ``store: false`` only keeps the response from ``GET /v1/responses/{id}``: the session keeps
  every turn.
- Tools run inside the harness; the output holds the text of the turn's steps, one message
  item each, the final answer last. No ``function_call`` item is ever sent: a client would
  take it as a call for *it* to run.

Response ids name their session: ``resp_`` + the session id in lowercase base32 + ``_`` +
random hex. A session is looked up only in the caller's own namespace (its key's user), so an
id someone made up, or took from another user, can reach no session but the caller's own,
which the caller may continue anyway (with ``conversation``). The random part keeps two
responses of one session apart; it is not a secret. Each finished response is kept for its
user (:class:`ResponseStore`) for ``GET``/``DELETE /v1/responses/{id}`` and its input items,
unless the request said ``store: false``.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from harness.context import RuntimeContext
from harness.errors import RequestRefused
from harness.serve.conversations import Said
from harness.serve.events import encode_sse
from harness.serve.http import read_body
from harness.serve.openai_api import (
    SESSION_HEADER,
    requested_output,
    served_model,
    waiting_text,
)
from harness.serve.state import ServeState, until_disconnected
from harness.serve.streams import TurnStream
from harness.serve.turns import check_session_id, failure_status
from harness.session import MESSAGES_FILE
from harness.workspace import WorkspaceManager
from harness.workspace.ledger import ledger_for, user_key

__all__ = ["ResponseStore", "response_id", "response_session", "responses_router"]

_PREFIX: Final = "resp_"
_CODE: Final = re.compile(r"[a-z2-7]*")
_NONCE: Final = re.compile(r"[0-9a-f]{1,64}")
_MAX_ID_CHARS: Final = 512
"""Longer than any id this server makes (a 128-character session id is 205 of base32)."""

_MODEL_ITEMS: Final = frozenset({"reasoning", "mcp_list_tools", "mcp_approval_request"})
"""Item types (besides ``*_call``) only a model writes: like an assistant message, they end
the turn before them."""


def response_id(session_id: str) -> str:
    """A new response id of ``session_id``'s session (:func:`response_session` reads it)."""
    code = base64.b32encode(session_id.encode("utf-8")).decode("ascii").rstrip("=").lower()
    return f"{_PREFIX}{code}_{secrets.token_hex(8)}"


def response_session(ident: str) -> str | None:
    """The session id a response id names; None for a string no response id can be."""
    if len(ident) > _MAX_ID_CHARS or not ident.startswith(_PREFIX):
        return None
    code, underscore, nonce = ident[len(_PREFIX) :].rpartition("_")
    if not underscore or not _CODE.fullmatch(code) or not _NONCE.fullmatch(nonce):
        return None
    try:
        raw = base64.b32decode(code.upper() + "=" * (-len(code) % 8))
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):  # a length base32 cannot have, or not UTF-8
        return None


class _ConversationRef(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # instructions, tools, temperature, store: ignored
    model: str
    input: str | list[dict[str, Any]] | None = None
    stream: bool = False
    previous_response_id: str | None = None
    conversation: str | _ConversationRef | None = None
    metadata: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    store: bool | None = None


def new_input(given: str | list[dict[str, Any]] | None) -> str:
    """The text of the request's new turn: its user messages after its last assistant item.

    System and developer messages are ignored; anything else in the new turn (an image, a
    tool's output: the harness runs its own tools) is refused.
    """
    if isinstance(given, str):
        return given
    items = given or []
    last_model = max((i for i, item in enumerate(items) if _from_model(item)), default=-1)
    parts: list[str] = []
    for item in items[last_model + 1 :]:
        role = item.get("role")
        if item.get("type", "message") != "message" or role not in ("user", "system", "developer"):
            kind = item.get("type") or role
            raise RequestRefused(
                400,
                "unsupported_content",
                f"only user messages are supported in the new turn, not {str(kind)[:40]!r}",
            )
        if role == "user":
            parts.extend(_texts(item.get("content")))
    text = "\n\n".join(part for part in parts if part.strip())
    if not text:
        raise RequestRefused(
            400, "no_new_turn", "the input has no new user message after its last assistant item"
        )
    return text


def resent_items(given: str | list[dict[str, Any]] | None) -> list[Said]:
    """The history an input resends: its user and assistant messages to its last model item.

    Only their text counts (an assistant message's ``output_text`` parts, a user's
    ``input_text``); tool calls and other items are the harness's own business.
    """
    if not isinstance(given, list):
        return []
    last_model = max((i for i, item in enumerate(given) if _from_model(item)), default=-1)
    said: list[Said] = []
    for item in given[: last_model + 1]:
        role = item.get("role")
        if item.get("type", "message") != "message" or role not in ("user", "assistant"):
            continue
        content = item.get("content")
        parts = (
            [content]
            if isinstance(content, str)
            else [str(p.get("text", "")) for p in content or [] if isinstance(p, dict)]
        )
        said.append(("user" if role == "user" else "assistant", "".join(parts)))
    return said


def _from_model(item: Mapping[str, Any]) -> bool:
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return isinstance(kind, str) and (kind in _MODEL_ITEMS or kind.endswith("_call"))


def _texts(content: object) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        if len(texts) == len(content) and all(
            p.get("type") == "input_text" and isinstance(p.get("text"), str) for p in content
        ):
            return [t for t in texts if isinstance(t, str)]
    raise RequestRefused(400, "unsupported_content", "only input_text content parts are supported")


class ResponseStore:
    """The responses this server made, per user, for ``GET``/``DELETE /v1/responses/{id}``.

    Each finished response (completed or failed, unless the request said ``store: false``)
    is kept with the new input items it answered, in the workspace's ``responses`` ledger
    (beside the workspace, or in the store the workers share), under its user: another
    user's id is not found, as an unknown one is. A deleted response is gone from both routes
    (its session stays: it is the conversation, deleted with ``DELETE /v1/sessions/{id}``).
    """

    def __init__(self, workspace: WorkspaceManager) -> None:
        self.ledger = ledger_for(workspace, "responses")

    async def put(self, user: str | None, response: Mapping[str, Any], items: list[Any]) -> None:
        record = {"kind": "response", "response": dict(response), "input": items}
        await self.ledger.change(user_key(user), lambda _: [record])

    async def get(self, user: str | None, ident: str) -> Mapping[str, Any] | None:
        """The record of response ``ident`` of ``user``; None if none, or deleted."""
        found: Mapping[str, Any] | None = None
        for record in await self.ledger.records(user_key(user)):
            if record.get("kind") == "deleted" and record.get("id") == ident:
                found = None
            elif record.get("kind") == "response" and record["response"].get("id") == ident:
                found = record
        return found

    async def found(self, user: str | None, ident: str) -> Mapping[str, Any]:
        """The record of response ``ident`` of ``user``, or 404 ``response_not_found``."""
        record = await self.get(user, ident)
        if record is None:
            raise _not_found(ident)
        return record

    async def delete(self, user: str | None, ident: str) -> bool:
        """Forget response ``ident``; False when the user has none of that id."""
        if await self.get(user, ident) is None:
            return False
        await self.ledger.change(user_key(user), lambda _: [{"kind": "deleted", "id": ident}])
        return True


def _input_items(given: str | list[dict[str, Any]] | None, response: str) -> list[Any]:
    """The new turn's input as items with ids, as ``input_items.list`` gives them."""
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    items = []
    for n, item in enumerate(given or []):
        content = item.get("content")
        if isinstance(content, str):
            content = [{"type": "input_text", "text": content}]
        ident = f"msg_{response.rsplit('_', 1)[-1]}{n:04d}"  # the response's random part
        items.append({"type": "message", "id": ident, **item, "content": content})
    return items


def responses_router(state: ServeState) -> APIRouter:
    router = APIRouter()
    name = state.turns.agent.name
    kept = ResponseStore(state.turns.agent.workspace)

    @router.get("/v1/responses/{response_id}")
    async def retrieve(response_id: str, request: Request) -> dict[str, Any]:
        """A response this server made for the caller (``client.responses.retrieve``)."""
        record = await kept.found(state.authenticate(request), response_id)
        return dict(record["response"])

    @router.delete("/v1/responses/{response_id}")
    async def delete(response_id: str, request: Request) -> dict[str, Any]:
        """Forget a response (``client.responses.delete``); its session stays."""
        user = state.authenticate(request)
        if not await kept.delete(user, response_id):
            raise _not_found(response_id)
        return {"id": response_id, "object": "response.deleted", "deleted": True}

    @router.get("/v1/responses/{response_id}/input_items")
    async def input_items(response_id: str, request: Request) -> dict[str, Any]:
        """The input items a response answered (``client.responses.input_items.list``)."""
        record = await kept.found(state.authenticate(request), response_id)
        items = list(reversed(record["input"]))  # newest first, as the API lists them
        first, last = (items[0]["id"], items[-1]["id"]) if items else (None, None)
        page = {"first_id": first, "last_id": last, "has_more": False}
        return {"object": "list", "data": items, **page}

    @router.post("/v1/responses", response_model=None)
    async def responses(request: Request) -> Response:
        user = state.authenticate(request)
        body = await read_body(request, ResponsesRequest, state.config)
        served_model(body.model, name)
        text = new_input(body.input)
        output = requested_output((body.text or {}).get("format"), "text.format")
        named = _session(request, body)
        history = resent_items(body.input)
        async with state.conversation(user, named, history, text, "resp") as (ctx, ending):
            if body.previous_response_id is not None and not await _has_messages(state, ctx):
                raise _not_found(body.previous_response_id)
            turn = await state.streams.start(ctx, text, output=output, ending=ending)
        session = ctx.session_id or ""
        keep = None if body.store is False else functools.partial(kept.put, user)
        reply = _Reply(name, session, body, keep)
        headers = {SESSION_HEADER: session}
        if body.stream:
            return StreamingResponse(
                reply.sse(turn),
                media_type="text/event-stream",
                headers=headers,
                background=turn.closing(),
            )
        return await reply.whole(turn, request, headers)

    return router


def _session(request: Request, body: ResponsesRequest) -> str | None:
    """The session the request names (None: it names none); 400 when its names disagree."""
    named: dict[str, str] = {}
    header = request.headers.get(SESSION_HEADER)
    if header:
        named[SESSION_HEADER] = header
    if body.conversation is not None:
        conversation = body.conversation
        named["conversation"] = conversation if isinstance(conversation, str) else conversation.id
    if body.previous_response_id is not None:
        previous = response_session(body.previous_response_id)
        if previous is None:
            raise _not_found(body.previous_response_id)
        try:
            named["previous_response_id"] = check_session_id(previous)
        except ValueError:  # no response of this server names such a session
            raise _not_found(body.previous_response_id) from None
    if len(set(named.values())) > 1:
        raise RequestRefused(
            400,
            "conflicting_session",
            f"{', '.join(named)} name different sessions; name one session",
        )
    return next(iter(named.values()), None) or None


def _not_found(ident: str) -> RequestRefused:
    return RequestRefused(404, "response_not_found", f"no response {ident[:80]!r} here")


async def _has_messages(state: ServeState, ctx: RuntimeContext) -> bool:
    """Whether the caller's session holds messages: a response's session always does."""
    agent = state.turns.agent
    files = await agent.workspace.list_own(agent.sessions.directory(ctx))
    return any(f.path.endswith(f"/{MESSAGES_FILE}") and f.size > 0 for f in files)


class _Reply:
    """One turn as a Response: its output items, and the events that tell of them as they come.

    Each step's text is one assistant message item, opened by its first text and closed by a
    tool call or the step's end. The whole reply and the stream are the same events: the
    whole one keeps only the last, the response.
    """

    def __init__(
        self,
        model: str,
        session: str,
        body: ResponsesRequest,
        keep: Callable[[Mapping[str, Any], list[Any]], Awaitable[None]] | None = None,
    ) -> None:
        self.model = model
        self.id = response_id(session)
        self.keep = keep
        """Keeps the finished response (:class:`ResponseStore`), before its end is sent."""
        self.input = _input_items(body.input, self.id)
        self.created = int(time.time())
        self.completed: int | None = None
        self.conversation = {"id": session} if body.conversation is not None else None
        self.previous = body.previous_response_id
        self.metadata = body.metadata or {}
        self.format = (body.text or {}).get("format") or {"type": "text"}
        self.structured = self.format.get("type") != "text"
        """Only the final answer is output: the steps before it may be prose the model was
        asked to correct (:mod:`harness.structured`)."""
        self.status = "in_progress"
        self.error: dict[str, str] | None = None
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None  # the message item being written
        self.sequence = 0
        self.usage: dict[str, Any] = {
            "input_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 0,
        }

    def response(self) -> dict[str, Any]:
        done = self.status != "in_progress"
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "completed_at": self.completed,
            "status": self.status,
            "model": self.model,
            "output": list(self.output),
            "error": self.error,
            "incomplete_details": None,
            "instructions": None,  # the operator's, not the caller's: none were used
            "metadata": self.metadata,
            "parallel_tool_calls": False,
            "tool_choice": "none",  # tools run inside the harness: none are the client's
            "tools": [],
            "temperature": None,
            "top_p": None,
            "max_output_tokens": None,
            "previous_response_id": self.previous,
            "conversation": self.conversation,
            "reasoning": None,
            "store": self.keep is not None,  # the session keeps the turn either way
            "background": False,
            "text": {"format": self.format},  # the SDK's parse() reads the schema's name here
            "truncation": "disabled",
            "user": None,
            "usage": self.usage if done else None,
        }

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        # A copy: the items go on changing after the event that showed them.
        event = {"type": kind, "sequence_number": self.sequence, **copy.deepcopy(fields)}
        self.sequence += 1
        return event

    def _text(self, delta: str) -> list[dict[str, Any]]:
        events = []
        item = self.open
        if item is None:
            part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
            item = {
                "type": "message",
                "id": f"msg_{secrets.token_hex(12)}",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            self.open = item
            self.output.append(item)
            events.append(
                self._event("response.output_item.added", output_index=self._index, item=item)
            )
            item["content"] = [part]
            events.append(self._part_event("response.content_part.added", item, part))
        item["content"][0]["text"] += delta
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=self._index,
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        )
        return events

    @property
    def _index(self) -> int:
        return len(self.output) - 1

    def _part_event(self, kind: str, item: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
        return self._event(
            kind, item_id=item["id"], output_index=self._index, content_index=0, part=part
        )

    def _close(self, status: str = "completed") -> list[dict[str, Any]]:
        item, self.open = self.open, None
        if item is None:
            return []
        part = item["content"][0]
        events = [
            self._event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=self._index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            ),
            self._part_event("response.content_part.done", item, part),
        ]
        item["status"] = status
        events.append(self._event("response.output_item.done", output_index=self._index, item=item))
        return events

    def _whole(self, text: str) -> list[dict[str, Any]]:
        """An item of text that came at once (a reply not streamed, a turn that waits)."""
        return [*self._close(), *self._text(text), *self._close()] if text else []

    def _count(self, data: Mapping[str, Any]) -> None:
        given, made = data.get("input_tokens") or 0, data.get("output_tokens") or 0
        self.usage["input_tokens"] += given
        self.usage["output_tokens"] += made
        self.usage["total_tokens"] += given + made

    def _ended(self, kind: str) -> dict[str, Any]:
        return self._event(kind, response=self.response())

    async def _kept(self) -> None:
        """Keep the finished response, so a client that retrieves it at once finds it."""
        if self.keep is not None:
            await self.keep(self.response(), self.input)

    async def events(self, turn: TurnStream) -> AsyncIterator[dict[str, Any]]:
        """The Responses events of the turn, ``response.completed`` or ``response.failed`` last."""
        yield self._ended("response.created")
        yield self._ended("response.in_progress")
        async for event in turn.events():
            assert event is not None  # no pings asked for
            name, data = event
            if name == "text.delta" and data["text"] and not self.structured:
                for out in self._text(data["text"]):
                    yield out
            elif name in ("tool.started", "step.completed"):
                if name == "step.completed":
                    self._count(data)
                for out in self._close():
                    yield out
            elif name in ("turn.completed", "turn.paused"):
                text = (
                    str(data["message"]["text"] or "")
                    if name == "turn.completed"
                    else waiting_text(data)
                )
                # A reply the model did not stream, or a turn that waits: its text at once.
                shown = self.output[-1]["content"][0]["text"] if self.output else None
                for out in [*self._close(), *([] if shown == text else self._whole(text))]:
                    yield out
                self.status, self.completed = "completed", int(time.time())
                await self._kept()
                yield self._ended("response.completed")
                return  # the memory flush that follows is not the client's to wait for
            elif name == "error":
                for out in self._close("incomplete"):
                    yield out
                yield await self._failed(str(data["code"]), str(data["message"]))
                return
        for out in self._close("incomplete"):
            yield out
        yield await self._failed("no_reply", "the turn ended without a reply")

    async def _failed(self, code: str, message: str) -> dict[str, Any]:
        self.status = "failed"
        self.error = {"code": code, "message": message}
        await self._kept()
        return self._ended("response.failed")

    async def sse(self, turn: TurnStream) -> AsyncIterator[bytes]:
        async for event in self.events(turn):
            yield encode_sse(event["type"], event)

    async def whole(
        self, turn: TurnStream, request: Request, headers: dict[str, str]
    ) -> JSONResponse:
        async def consume() -> None:
            async for _ in self.events(turn):
                pass

        try:
            await until_disconnected(request, consume)
        finally:
            await turn.aclose()
        if self.error is not None:
            code = self.error["code"]
            raise RequestRefused(failure_status(code), code, self.error["message"])
        return JSONResponse(self.response(), headers=headers)
