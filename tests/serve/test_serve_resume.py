"""Turns that outlive their client: event ids, re-attaching with ``Last-Event-ID``, stopping a
turn by its route, from the worker that runs it and from another one sharing the workspace.

The client here is ``httpx-sse``, as a Python client that reconnects would use it; the servers
are real uvicorn servers on loopback.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _served import Served, scripted_agent, served
from httpx_sse import aconnect_sse
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.serve import ServeConfig
from harness.serve.turn_log import parse_event_id

SLOW_REPLY = "The book is read."
TURNS: list[dict[str, Any]] = [
    # A turn of two steps, the second a second slow: long enough to leave and come back.
    {"match": "read the book", "tool_calls": [{"name": "list_files", "input": {"path": "."}}]},
    {"match": r"\[DIR\]", "text": SLOW_REPLY, "delay": 1.0, "repeat": True},
    {"match": "forever", "text": "This never arrives.", "delay": 30, "repeat": True},
    {"text": "Fine.", "repeat": True},
]


def opener(workspace: Path) -> Any:
    return scripted_agent(workspace, TURNS)


@pytest.fixture
def server(workspace: Path) -> Iterator[Served]:
    with served(opener(workspace), ServeConfig(ping_seconds=0.5)) as running:
        yield running


def client(server: Served) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=20)


async def read_some(
    api: httpx.AsyncClient, session: str, text: str, count: int, *, detach: bool = True
) -> list[tuple[str, str]]:
    """Start a turn and leave after ``count`` events: (id, name) of those read."""
    seen: list[tuple[str, str]] = []
    body = {"input": text, "detach": detach}
    async with aconnect_sse(api, "POST", f"/v1/sessions/{session}/turns", json=body) as source:
        async for event in source.aiter_sse():
            if not event.data:
                continue  # a ping (an SSE comment), which httpx-sse reports as an empty event
            seen.append((event.id, event.event))
            if len(seen) == count:
                break
    return seen


async def read_rest(
    api: httpx.AsyncClient, session: str, last_id: str | None
) -> list[tuple[str, str, str]]:
    """Re-attach to the session's turn after ``last_id``: (id, name, data) to the end."""
    headers = {"Last-Event-ID": last_id} if last_id else {}
    seen: list[tuple[str, str, str]] = []
    async with aconnect_sse(
        api, "GET", f"/v1/sessions/{session}/events", headers=headers
    ) as source:
        assert source.response.status_code == 200, await source.response.aread()
        async for event in source.aiter_sse():
            if event.data:  # not a ping
                seen.append((event.id, event.event, event.data))
    return seen


async def saved(api: httpx.AsyncClient, session: str) -> None:
    """Wait until the turn's question is saved: the model is being asked, for 30 s."""
    for _ in range(200):
        if (await api.get(f"/v1/sessions/{session}")).status_code == 200:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {session} was never saved")


async def test_every_event_has_an_id_of_its_turn_in_order(server: Served) -> None:
    async with client(server) as api:
        seen = await read_some(api, "ids", "hello", 1_000, detach=False)
    parsed = [parse_event_id(ident) for ident, _ in seen]
    assert all(p is not None for p in parsed)
    assert len({p[0] for p in parsed if p}) == 1  # one turn
    assert [p[1] for p in parsed if p] == list(range(len(seen)))
    assert seen[-1][1] == "turn.completed"


async def test_a_detached_turn_goes_on_without_its_client_and_a_reconnect_gets_the_rest(
    server: Served,
) -> None:
    async with client(server) as api:
        first = await read_some(api, "book", "Please read the book", 3)
        assert next(name for _, name in first) == "turn.started"
        rest = await read_rest(api, "book", first[-1][0])
        names = [name for _, name, _ in rest]
        assert "turn.completed" in names
        # Nothing twice, nothing missing: the ids go on from where the client left.
        numbers = [parse_event_id(i)[1] for i, _ in first] + [  # type: ignore[index]
            parse_event_id(i)[1]  # type: ignore[index]
            for i, _, _ in rest
        ]
        assert numbers == list(range(len(numbers)))
        history = (await api.get("/v1/sessions/book")).json()
        assert history["running"] is False
        assert history["messages"][-1]["text"] == SLOW_REPLY


async def test_a_turn_not_detached_stops_when_its_client_leaves(server: Served) -> None:
    async with client(server) as api:
        await read_some(api, "leave", "Please read the book", 2, detach=False)
        await asyncio.sleep(0.3)
        assert (await api.get("/v1/sessions/leave")).json()["running"] is False
        rest = await read_rest(api, "leave", None)  # the log of the stopped turn, whole
        assert "turn.completed" not in [name for _, name, _ in rest]
        # It says how it ended (it once replayed turn.started, then nothing).
        (_, last, data) = rest[-1]
        assert (last, json.loads(data)["reason"]) == ("turn.cancelled", "client_left")
        history = (await api.get("/v1/sessions/leave")).json()["messages"]
        assert SLOW_REPLY not in [m["text"] for m in history]


async def test_a_stale_or_foreign_last_event_id_replays_the_latest_turn_whole(
    server: Served,
) -> None:
    async with client(server) as api:
        await read_some(api, "stale", "hello", 1_000)
        rest = await read_rest(api, "stale", "0123abcd.7")
        assert next(name for _, name, _ in rest) == "turn.started"
        assert [name for _, name, _ in rest][-1] == "turn.completed"


async def test_the_cancel_route_stops_a_running_turn_and_says_it_stopped(server: Served) -> None:
    async with client(server) as api:
        first = await read_some(api, "stop", "wait forever", 1)
        await saved(api, "stop")
        answer = await api.post("/v1/sessions/stop/cancel")
        assert answer.status_code == 200
        assert answer.json()["cancelled"] is True
        rest = await read_rest(api, "stop", first[-1][0])
        assert [(name, json.loads(data).get("reason")) for _, name, data in rest][-1] == (
            "turn.cancelled",
            "stopped",
        )
        again = await api.post("/v1/sessions/stop/cancel")
        assert again.json()["cancelled"] is False  # nothing runs any more
        history = (await api.get("/v1/sessions/stop")).json()["messages"]
        assert [m["text"] for m in history if m["role"] == "user"] == ["wait forever"]


async def test_a_session_without_a_turn_has_nothing_to_reattach_to(server: Served) -> None:
    async with client(server) as api:
        answer = await api.get("/v1/sessions/never/events")
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "no_turn"
        cancelled = await api.post("/v1/sessions/never/cancel")
        assert cancelled.json()["cancelled"] is False


async def test_another_worker_replays_the_turn_and_its_cancel_reaches_the_runner(
    workspace: Path,
) -> None:
    """Two servers on one workspace, as two workers: B reads A's turn and stops it."""
    with (
        served(opener(workspace), ServeConfig(ping_seconds=0.5)) as a,
        served(opener(workspace), ServeConfig(ping_seconds=0.5)) as b,
    ):
        async with client(a) as on_a, client(b) as on_b:
            first = await read_some(on_a, "shared", "wait forever", 1)
            await saved(on_b, "shared")
            assert (await on_b.get("/v1/sessions/shared")).json()["running"] is True
            answer = await on_b.post("/v1/sessions/shared/cancel")
            assert answer.json()["cancelled"] is True
            started = time.monotonic()
            rest = await read_rest(on_b, "shared", first[0][0])
            assert time.monotonic() - started < 15
            assert [name for _, name, _ in rest][-1] == "turn.cancelled"
            # from right after the id it was given
            assert parse_event_id(rest[0][0]) == (parse_event_id(first[0][0])[0], 1)  # type: ignore[index]
            assert (await on_a.get("/v1/sessions/shared")).json()["running"] is False


def test_any_last_event_id_is_an_id_or_ignored_never_an_error(server: Served) -> None:
    """Whatever a client sends back as the last id, the stream is the turn's, or its tail."""
    with httpx.Client(base_url=server.url, timeout=10) as api:
        with api.stream("POST", "/v1/sessions/any/turns", json={"input": "hello"}) as reply:
            assert reply.status_code == 200
            reply.read()
        whole = api.get("/v1/sessions/any/events").text

        @settings(deadline=None)
        @given(st.text(max_size=60))
        def any_id(text: str) -> None:
            parsed = parse_event_id(text)
            assert parsed is None or (parsed[0] and parsed[1] >= 0)
            answer = api.get("/v1/sessions/any/events", params={"after": text})
            assert answer.status_code == 200
            assert whole.endswith(answer.text)

        any_id()
