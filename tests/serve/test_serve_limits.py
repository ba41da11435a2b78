"""Size and time limits: each refusal is a clear 4xx (or a stream's ``error`` event), and a
refused or stopped request loses nothing the session had accepted."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from _served import Served, served, sse_events

from harness import HarnessAgent
from harness.models import ScriptedChatModel
from harness.serve import ServeConfig

TURNS: list[dict[str, Any]] = [
    {"match": "stuck", "text": "Too late.", "delay": 4, "repeat": True},
    {"match": "slow", "text": "Late.", "delay": 1, "repeat": True},
    {"text": "Fine.", "repeat": True},
]

LIMITS = ServeConfig(
    max_body_bytes=2_000,
    max_header_bytes=4_000,
    max_input_chars=500,
    body_timeout=0.5,
    session_wait=0.2,
    turn_timeout=2.0,
)


@pytest.fixture
def server(workspace: Path) -> Iterator[Served]:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with HarnessAgent(
            model=ScriptedChatModel(TURNS), workspace=workspace, memory=None
        ) as agent:
            yield agent

    with served(opened, LIMITS) as running:
        yield running


JSON = {"Content-Type": "application/json"}


def http(server: Served) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url=server.url, timeout=20)


async def history(api: httpx2.AsyncClient, session: str) -> list[str]:
    reply = await api.get(f"/v1/sessions/{session}")
    return [m["text"] for m in reply.json()["messages"]] if reply.status_code == 200 else []


def refused(reply: httpx2.Response, status: int, code: str) -> str:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code
    return str(error["message"])


async def test_bodies_headers_and_inputs_over_their_limits_are_refused(server: Served) -> None:
    async with http(server) as api:
        turn = "/v1/sessions/s1/turns"
        message = refused(await api.post(turn, json={"input": "x" * 3_000}), 413, "body_too_large")
        assert "2,000 bytes" in message

        async def chunked() -> AsyncIterator[bytes]:  # no Content-Length to trust
            for _ in range(10):
                yield b" " * 500

        refused(await api.post(turn, content=chunked(), headers=JSON), 413, "body_too_large")
        message = refused(await api.post(turn, json={"input": "y" * 600}), 413, "input_too_long")
        assert "at most 500" in message
        refused(await api.post(turn, content=b"{not json", headers=JSON), 400, "invalid_json")
        lone = b'{"input": "hi \\ud800 there"}'  # a lone surrogate, as JSON may spell it
        refused(await api.post(turn, content=lone, headers=JSON), 400, "invalid_text")
        chat = b'{"model": "m", "messages": [{"role": "user", "content": "\\udcff"}]}'
        refused(
            await api.post("/v1/chat/completions", content=chat, headers=JSON), 400, "invalid_text"
        )
        message = refused(await api.post(turn, json={"text": "hi"}), 400, "invalid_request")
        assert "input" in message
        refused(await api.post(turn, json={"input": "   "}), 400, "empty_input")
        refused(
            await api.post(turn, json={"input": "hi"}, headers={"X-Big": "z" * 5_000}),
            431,
            "headers_too_large",
        )
        refused(
            await api.post("/v1/sessions/a%20b/turns", json={"input": "hi"}),
            400,
            "invalid_session_id",
        )
        assert await history(api, "s1") == []  # nothing refused was half-accepted


def test_a_body_that_arrives_too_slowly_is_refused(server: Served) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/sessions/s2/turns HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"input": '
        )
        answer = ""  # the rest of the body never comes; the answer may come in pieces
        while "body_timeout" not in answer and (piece := sock.recv(4096)):
            answer += piece.decode()
    assert answer.startswith("HTTP/1.1 408")
    assert "body_timeout" in answer


async def test_a_second_turn_on_a_busy_session_gets_409_and_others_are_not_held_up(
    server: Served,
) -> None:
    async with http(server) as api:
        async with api.stream("POST", "/v1/sessions/busy/turns", json={"input": "slow"}) as first:
            lines = first.aiter_lines()
            assert (await anext(lines)).startswith("id: ")  # the event's id comes first
            assert await anext(lines) == "event: turn.started"
            second = await api.post("/v1/sessions/busy/turns", json={"input": "again"})
            message = refused(second, 409, "session_busy")
            assert "running another turn" in message
            assert second.headers["retry-after"] == "1"
            async with openai.AsyncOpenAI(
                base_url=f"{server.url}/v1", api_key="x", max_retries=0
            ) as client:
                with pytest.raises(openai.ConflictError):
                    await client.chat.completions.create(
                        model="harness",
                        messages=[{"role": "user", "content": "also"}],
                        extra_headers={"X-Harness-Session": "busy"},
                    )
            other = [e async for e in _events(api, "elsewhere", "hi")]
            assert other[-1][0] == "turn.completed"
            rest = list(sse_events(iter([line + "\n" async for line in lines])))
        assert rest[-1][0] == "turn.completed"
        assert await history(api, "busy") == ["slow", "Late."]


async def test_a_turn_past_its_time_limit_is_stopped_and_keeps_its_question(
    server: Served,
) -> None:
    async with http(server) as api:
        received = [e async for e in _events(api, "timed", "stuck please")]
        assert received[-1] == (
            "error",
            {
                "code": "turn_timeout",
                "message": "the turn ran longer than 2 s and was stopped; the session keeps "
                "its completed steps",
            },
        )
        async with openai.AsyncOpenAI(
            base_url=f"{server.url}/v1", api_key="x", max_retries=0
        ) as client:
            with pytest.raises(openai.APIStatusError) as stopped:
                await client.chat.completions.create(
                    model="harness",
                    messages=[{"role": "user", "content": "stuck again"}],
                    extra_headers={"X-Harness-Session": "timed"},
                )
        assert stopped.value.status_code == 504
        await asyncio.sleep(2.5)  # past the moment the stopped answers would have come
        assert await history(api, "timed") == ["stuck please", "stuck again"]


async def _events(
    api: httpx2.AsyncClient, session: str, text: str
) -> AsyncIterator[tuple[str, Any]]:
    async with api.stream("POST", f"/v1/sessions/{session}/turns", json={"input": text}) as reply:
        assert reply.status_code == 200
        for event in sse_events(iter([line + "\n" async for line in reply.aiter_lines()])):
            yield event
