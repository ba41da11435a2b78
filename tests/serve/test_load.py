"""Fifty clients at once on one served agent: every turn completes, every session keeps its own.

Fifty concurrent streaming clients, each on its own session, each send five turns one after
another to ONE server: half through the SSE events API, half through the streaming OpenAI
endpoint. Every input is unique (``client 17 turn 3``), and each client's third turn makes the
agent call ``list_files``, so tool events run under load too. The scripted model waits a little
before each answer, as a provider would, so the turns of different sessions really overlap in
the server (the test checks that they did).

Afterwards every session must hold exactly its client's five turns, once each and in order,
with the tool call where it was made: as ``GET /v1/sessions/{id}`` shows it and as the session
file on disk holds it. Every request the model saw must carry one client's turns only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from _served import served, sse_events

from harness import HarnessAgent, RuntimeContext
from harness.kernel import ChatChunk, ChatResponse, Msg, ToolSchema
from harness.models import ScriptedChatModel
from harness.serve import SESSION_HEADER

CLIENTS = 50
TURNS = 5
TOOL_TURN = 2
DELAY = 0.05  # seconds the model takes to answer: long enough for the turns to overlap

REPLY = "Noted, thank you."
LISTED = "The workspace has an agents folder."

SCRIPT: list[dict[str, Any]] = [
    {
        "match": rf"^client \d+ turn {TOOL_TURN}$",
        "tool_calls": [{"name": "list_files", "input": {"path": "."}}],
        "repeat": True,
        "delay": DELAY,
    },
    # list_files's result is one line per entry: "[DIR]  agents", "[FILE] notes.md"
    {"match": r"^\[(DIR|FILE)\] ", "text": LISTED, "repeat": True, "delay": DELAY},
    {"match": r"^client \d+ turn \d+$", "text": REPLY, "repeat": True, "delay": DELAY},
]

_INPUT = re.compile(r"client (\d+) turn (\d+)")


class CountingModel(ScriptedChatModel):
    """The scripted model, counting how many requests it is answering at once."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.in_flight = 0
        self.peak = 0

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            async for item in super().stream(messages, tools, **options):
                yield item
        finally:
            self.in_flight -= 1


@dataclass
class TurnSeen:
    """What one client saw of one of its turns."""

    text: str  # the reply's text, as streamed
    message_id: str | None = None  # the reply's id (the SSE API says it)
    tools: list[str] = field(default_factory=list)  # tool.finished names (SSE API)


def session_of(client: int) -> str:
    return f"load-{client:02d}"


def input_of(client: int, turn: int) -> str:
    return f"client {client} turn {turn}"


def expected_history(client: int) -> list[tuple[str, str, list[str]]]:
    """(role, text, tool names) of every message the client's session must hold, in order."""
    messages: list[tuple[str, str, list[str]]] = []
    for turn in range(TURNS):
        messages.append(("user", input_of(client, turn), []))
        if turn == TOOL_TURN:
            messages.append(("assistant", "", ["list_files"]))
            messages.append(("tool", "", ["list_files"]))
            messages.append(("assistant", LISTED, []))
        else:
            messages.append(("assistant", REPLY, []))
    return messages


def expected_reply(turn: int) -> str:
    return LISTED if turn == TOOL_TURN else REPLY


async def sse_turn(http: httpx2.AsyncClient, url: str, client: int, turn: int) -> TurnSeen:
    session = session_of(client)
    async with http.stream(
        "POST", f"{url}/v1/sessions/{session}/turns", json={"input": input_of(client, turn)}
    ) as response:
        assert response.status_code == 200, await response.aread()
        lines = [line async for line in response.aiter_lines()]
    events = list(sse_events(iter(lines)))
    names = [name for name, _ in events]
    where = f"{session} turn {turn}: {names}"
    assert "error" not in names, f"{where}: {events}"
    assert names[0] == "turn.started", where
    assert events[0][1] == {"session_id": session}, where
    assert names[-1] == "turn.completed", where
    assert names.count("turn.completed") == 1, where
    message = events[-1][1]["message"]
    assert message["role"] == "assistant", where
    streamed = "".join(data["text"] for name, data in events if name == "text.delta")
    assert streamed == message["text"], where
    started = [data["name"] for name, data in events if name == "tool.started"]
    finished = [data for name, data in events if name == "tool.finished"]
    assert started == [data["name"] for data in finished], where
    for data in finished:
        assert not data["is_error"], f"{where}: {data}"
        assert data["output"].startswith("[DIR]"), f"{where}: {data}"
    return TurnSeen(message["text"], message["id"], [data["name"] for data in finished])


async def chat_turn(http: httpx2.AsyncClient, url: str, client: int, turn: int) -> TurnSeen:
    session = session_of(client)
    body = {
        "model": "harness",
        "stream": True,
        "messages": [{"role": "user", "content": input_of(client, turn)}],
    }
    async with http.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers={SESSION_HEADER: session}
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers[SESSION_HEADER] == session
        data = [
            line[len("data:") :].strip()
            async for line in response.aiter_lines()
            if line.startswith("data:")
        ]
    where = f"{session} turn {turn}: {data}"
    assert data[-1] == "[DONE]", where
    chunks = [json.loads(item) for item in data[:-1]]
    assert not [chunk for chunk in chunks if "error" in chunk], where
    finishes = [chunk["choices"][0]["finish_reason"] for chunk in chunks]
    assert finishes[-1] == "stop", where
    assert finishes.count("stop") == 1, where
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant", where
    text = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks)
    return TurnSeen(text)


async def run_client(http: httpx2.AsyncClient, url: str, client: int) -> list[TurnSeen]:
    """The client's five turns, one after another, through its endpoint."""
    one_turn = sse_turn if client % 2 == 0 else chat_turn
    return [await one_turn(http, url, client, turn) for turn in range(TURNS)]


def summary(message: dict[str, Any]) -> tuple[str, str, list[str]]:
    """(role, text, tool names) of a message as the API shows it."""
    calls = message.get("tool_calls") or message.get("tool_results") or []
    return message["role"], message["text"], [call["name"] for call in calls]


def check_model_requests(model: CountingModel) -> None:
    """Each request the model got holds one client's turns, from its first to its newest."""
    assert len(model.requests) == CLIENTS * (TURNS + 1)
    for request in model.requests:
        found = [_INPUT.fullmatch(m.text) for m in request if m.role == "user"]
        assert all(found), [m.text for m in request if m.role == "user"]
        turns = [(int(f[1]), int(f[2])) for f in found if f is not None]
        client = turns[0][0]
        assert turns == [(client, turn) for turn in range(len(turns))], turns


async def test_fifty_concurrent_clients_keep_their_sessions_apart(workspace: Path) -> None:
    model = CountingModel(SCRIPT)

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:
            yield agent

    limits = httpx2.Limits(max_connections=2 * CLIENTS, max_keepalive_connections=2 * CLIENTS)
    timeout = httpx2.Timeout(60.0)
    with served(opened) as server:
        async with httpx2.AsyncClient(limits=limits, timeout=timeout) as http:
            started = time.monotonic()
            seen = await asyncio.gather(
                *(run_client(http, server.url, client) for client in range(CLIENTS))
            )
            elapsed = time.monotonic() - started

            # Every turn completed with its reply; the SSE clients saw the tool run.
            for client, turns in enumerate(seen):
                assert [t.text for t in turns] == [expected_reply(t) for t in range(TURNS)]
                if client % 2 == 0:
                    assert [t.tools for t in turns] == [
                        ["list_files"] if t == TOOL_TURN else [] for t in range(TURNS)
                    ]

            listed = (await http.get(f"{server.url}/v1/sessions")).json()["data"]
            assert sorted(s["id"] for s in listed) == [session_of(c) for c in range(CLIENTS)]

            shown: dict[int, list[dict[str, Any]]] = {}
            for client in range(CLIENTS):
                response = await http.get(f"{server.url}/v1/sessions/{session_of(client)}")
                assert response.status_code == 200, response.text
                history = response.json()
                shown[client] = history["messages"]
                assert history["total"] == len(history["messages"])
                assert [summary(m) for m in history["messages"]] == expected_history(client)

    # The server has stopped; what it served is what the session files hold.
    message_ids: set[str] = set()
    async with HarnessAgent(model=ScriptedChatModel([]), workspace=workspace, memory=None) as agent:
        for client in range(CLIENTS):
            saved = await agent.sessions.load(RuntimeContext(session_id=session_of(client)))
            assert [(m.id, m.role, m.text) for m in saved] == [
                (m["id"], m["role"], m["text"]) for m in shown[client]
            ]
            message_ids.update(m.id for m in saved)
            if client % 2 == 0:  # the replies streamed are the ones saved, in order
                replies = [m.id for m in saved if m.role == "assistant" and m.text]
                assert replies == [t.message_id for t in seen[client]]
    assert len(message_ids) == CLIENTS * len(expected_history(0))  # no message in two sessions

    check_model_requests(model)
    # The turns of different sessions ran at the same time, not one after another.
    assert model.peak >= 20, f"at most {model.peak} model requests ran at once"
    assert model.in_flight == 0
    assert elapsed < 60, f"{CLIENTS * TURNS} turns took {elapsed:.1f} s"
