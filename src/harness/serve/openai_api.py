"""``POST /v1/chat/completions`` and ``GET /v1/models``: a harness agent behind the OpenAI API.

Any OpenAI client can talk to the agent. What differs from a plain model, and why:

- ``model`` names the agent (``GET /v1/models`` lists it): the agent chooses its model.
- The conversation is the harness's session, named by the ``X-Harness-Session`` header or
  ``metadata.session_id``. Most clients resend the whole history with every request and name
  no session: then the history names it (:mod:`harness.serve.conversations`: the session a
  turn left with that history, else a new one that keeps it), and the response's
  ``X-Harness-Session`` says which. The session already has the history, so only the *new
  turn* is taken: the user messages after the last assistant message of the request. Earlier
  messages are never added again, and a client cannot rewrite what the session holds by
  sending another history.
- System and developer messages of the request are ignored: the agent's instructions are the
  operator's (its prompt, AGENTS.md), not the caller's.
- ``response_format`` (``json_schema`` or ``json_object``) asks for structured output
  (:mod:`harness.structured`): the reply is JSON that fits, or the request fails.
- Tools run inside the harness; the client sees the answer. Streamed, it sees the text as it
  comes (the text of every step, the final answer last), and each tool's start and end as a
  chunk with an empty delta and a :data:`TOOL_ACTIVITY` field, which standard clients skip.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from harness.errors import ConfigError, RequestRefused
from harness.serve.conversations import Said
from harness.serve.events import encode_sse
from harness.serve.http import read_body
from harness.serve.state import ServeState, until_disconnected
from harness.serve.streams import TurnStream
from harness.serve.turns import failure_status
from harness.structured import OutputSpec

__all__ = ["SESSION_HEADER", "TOOL_ACTIVITY", "openai_router", "served_model"]

SESSION_HEADER = "X-Harness-Session"

TOOL_ACTIVITY: Final = "harness_tool"
"""The field of a streamed chunk that carries a tool's start or end.

Such a chunk is otherwise an ordinary chunk with an empty delta, so a standard client (the
``openai`` SDK, LangChain) reads no text from it and goes on; one that wants the activity
reads the field (``chunk.model_extra["harness_tool"]`` in the SDK).
"""

_TOOL_EVENTS: Final = frozenset({"tool.started", "tool.finished"})


class _ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # clients send temperature, n, ...: ignored
    model: str
    messages: list[_ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    metadata: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


def requested_output(given: Mapping[str, Any] | None, field: str) -> OutputSpec | None:
    """The output type an OpenAI-shaped format asks for (None: text).

    ``{"type": "json_schema", ...}`` (chat completions nest ``name`` and ``schema`` in
    ``json_schema``; the Responses API has them beside ``type``) or ``{"type": "json_object"}``.

    Raises:
        RequestRefused: 400 ``invalid_response_format`` naming ``field``.
    """
    if given is None or given.get("type") == "text":
        return None
    kind = given.get("type")
    if kind == "json_object":
        return OutputSpec.of({"type": "object"})
    if kind == "json_schema":
        inner = given.get("json_schema", given)
        schema = inner.get("schema") if isinstance(inner, Mapping) else None
        if isinstance(schema, Mapping):
            try:
                spec = OutputSpec.of(schema)
            except ConfigError as exc:
                raise RequestRefused(400, "invalid_response_format", f"{field}: {exc}") from None
            return dataclasses.replace(spec, name=str(inner.get("name") or spec.name))
    msg = f'{field} must be {{"type": "text"}}, "json_object" or "json_schema" with a schema'
    raise RequestRefused(400, "invalid_response_format", msg)


def new_turn(messages: list[_ChatMessage]) -> str:
    """The text of the request's new turn: its user messages after the last assistant one."""
    last_assistant = max(
        (i for i, message in enumerate(messages) if message.role == "assistant"), default=-1
    )
    parts: list[str] = []
    for message in messages[last_assistant + 1 :]:
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, str):
            parts.append(content)
            continue
        for part in content or []:
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise RequestRefused(
                    400, "unsupported_content", "only text content parts are supported"
                )
            parts.append(part["text"])
    text = "\n\n".join(part for part in parts if part.strip())
    if not text:
        raise RequestRefused(
            400,
            "no_new_turn",
            "the request has no new user message after its last assistant message",
        )
    return text


def resent(messages: list[_ChatMessage]) -> list[Said]:
    """The history a request resends: its user and assistant texts to its last assistant one.

    System and developer messages are the operator's business, not history.
    """
    last_assistant = max(
        (i for i, message in enumerate(messages) if message.role == "assistant"), default=-1
    )
    said: list[Said] = []
    for message in messages[: last_assistant + 1]:
        if message.role in ("user", "assistant"):
            content = message.content
            parts = (
                [content]
                if isinstance(content, str)
                else [
                    str(part.get("text", ""))
                    for part in content or []
                    if part.get("type") == "text"
                ]
            )
            said.append(("user" if message.role == "user" else "assistant", "".join(parts)))
    return said


def served_model(asked: str, name: str) -> None:
    """404 ``model_not_found`` unless ``asked`` names the served agent: the one model here."""
    if asked != name:
        raise RequestRefused(
            404, "model_not_found", f"no agent {asked!r} here; this server serves {name!r}"
        )


def openai_router(state: ServeState) -> APIRouter:
    router = APIRouter()
    name = state.turns.agent.name

    # The one model object: the agent, "created" when this server started serving it.
    entry = {"id": name, "object": "model", "created": int(time.time()), "owned_by": "harness"}

    @router.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        state.authenticate(request)
        return {"object": "list", "data": [entry]}

    @router.get("/v1/models/{model_id:path}")
    async def model(model_id: str, request: Request) -> dict[str, Any]:
        """The agent's model object (``client.models.retrieve``); 404 for any other id."""
        state.authenticate(request)
        served_model(model_id, name)
        return entry

    @router.post("/v1/chat/completions", response_model=None)
    async def completions(request: Request) -> Response:
        user = state.authenticate(request)
        body = await read_body(request, ChatRequest, state.config)
        served_model(body.model, name)
        text = new_turn(body.messages)
        output = requested_output(body.response_format, "response_format")
        given = request.headers.get(SESSION_HEADER) or (body.metadata or {}).get("session_id")
        named = str(given) if given else None
        history = resent(body.messages)
        async with state.conversation(user, named, history, text, "chat") as (ctx, ending):
            turn = await state.streams.start(ctx, text, output=output, ending=ending)
        session = ctx.session_id or ""
        usage = body.stream_options is not None and body.stream_options.include_usage
        completion = _Completion(name, include_usage=usage, whole_text=output is not None)
        headers = {SESSION_HEADER: session}
        if body.stream:
            return StreamingResponse(
                completion.chunks(turn),
                media_type="text/event-stream",
                headers=headers,
                background=turn.closing(),
            )
        return await completion.whole(turn, request, headers)

    return router


def waiting_text(paused: Mapping[str, Any]) -> str:
    """What a chat-completions client reads when the turn paused: what waits, and where."""
    approvals = paused.get("approvals") or []
    tools = ", ".join(str(a.get("tool")) for a in approvals)
    session = paused.get("session_id")
    return (
        f"[This turn is waiting for approval of {len(approvals)} tool call(s): {tools}. "
        f"List them at GET /v1/sessions/{session}/approvals and decide at POST "
        f"/v1/sessions/{session}/approvals (or `harness approvals list -s {session}`); "
        "the turn continues once they are decided.]"
    )


class _Completion:
    """The OpenAI shape of one turn, whole or as chunks."""

    def __init__(self, model: str, *, include_usage: bool, whole_text: bool = False) -> None:
        self.model = model
        self.include_usage = include_usage
        self.whole_text = whole_text
        """Stream the final answer alone, at the end: structured output, whose earlier steps
        may be prose the model was asked to correct."""
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    def _count(self, data: dict[str, Any]) -> None:
        prompt, completion = data.get("input_tokens") or 0, data.get("output_tokens") or 0
        self.usage["prompt_tokens"] += prompt
        self.usage["completion_tokens"] += completion
        self.usage["total_tokens"] += prompt + completion

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    async def chunks(self, turn: TurnStream) -> AsyncIterator[bytes]:
        yield encode_sse(None, self._chunk({"role": "assistant", "content": ""}))
        async for event in turn.events():
            assert event is not None  # no pings asked for
            name, data = event
            if name == "text.delta" and not self.whole_text:
                yield encode_sse(None, self._chunk({"content": data["text"]}))
            elif name in _TOOL_EVENTS:
                yield encode_sse(None, {**self._chunk({}), TOOL_ACTIVITY: {"type": name, **data}})
            elif name == "step.completed":
                self._count(dict(data))
            elif name == "error":
                yield encode_sse(None, {"error": {**data, "type": "server_error"}})
                return
            elif name == "turn.paused":
                yield encode_sse(None, self._chunk({"content": waiting_text(data)}))
                yield encode_sse(None, self._chunk({}, "stop"))
                break
            elif name == "turn.completed":
                if self.whole_text:
                    yield encode_sse(None, self._chunk({"content": data["message"]["text"]}))
                yield encode_sse(None, self._chunk({}, "stop"))
                break  # the memory flush that follows is not the client's to wait for
        if self.include_usage:
            yield encode_sse(None, {**self._chunk({}), "choices": [], "usage": self.usage})
        yield encode_sse(None, "[DONE]")

    async def whole(
        self, turn: TurnStream, request: Request, headers: dict[str, str]
    ) -> JSONResponse:
        reply: dict[str, Any] | None = None
        error: dict[str, Any] | None = None

        async def consume() -> None:
            nonlocal reply, error
            async for event in turn.events():
                assert event is not None
                name, data = event
                if name == "step.completed":
                    self._count(dict(data))
                elif name == "turn.completed":
                    reply = data["message"]
                    break
                elif name == "turn.paused":
                    reply = {"text": waiting_text(data)}
                    break
                elif name == "error":
                    error = dict(data)

        try:
            await until_disconnected(request, consume)
        finally:
            await turn.aclose()
        if error is not None or reply is None:
            failure = error or {"code": "no_reply", "message": "the turn ended without a reply"}
            code = str(failure["code"])
            raise RequestRefused(failure_status(code), code, str(failure["message"]))
        body = {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply["text"]},
                    "finish_reason": "stop",
                }
            ],
            "usage": self.usage,
        }
        return JSONResponse(body, headers=headers)
