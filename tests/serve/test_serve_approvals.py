"""Approvals over HTTP: the stream announces each request and ends the turn as paused; the
pending approvals can be listed after a reconnect; posted decisions continue the turn as a
stream; the same decision again is harmless, another is 409, another user's is 404, a new turn
is 409 while one waits; the OpenAI-compatible endpoint says plainly that the turn waits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from _served import Served, served, sse_events

from harness import HarnessAgent
from harness.models import ScriptedChatModel
from harness.serve import ApiKeys, ServeConfig, add_key

TURNS: list[dict[str, Any]] = [
    {
        "match": "^ship",
        "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}],
        "repeat": True,
    },
    {"text": "done", "repeat": True},
]


@pytest.fixture
def keys(tmp_path: Path) -> tuple[str, str, Path]:
    file = tmp_path / "keys.txt"
    return add_key(file, "alice"), add_key(file, "bob"), file


@pytest.fixture
def runs() -> list[str]:
    return []


@contextlib.contextmanager
def serving(
    workspace: Path, keys: tuple[str, str, Path], runs: list[str], turns: list[dict[str, Any]]
) -> Iterator[Served]:
    """A server whose agent gates ``deploy``, which notes each run in ``runs``."""

    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: Where.
        """
        runs.append(target)
        return f"deployed {target}"

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with HarnessAgent(
            model=ScriptedChatModel(turns),
            workspace=workspace,
            tools=[deploy],
            approvals={"deploy": True},
            memory=None,
        ) as agent:
            yield agent

    with served(opened, ServeConfig(keys=ApiKeys.load([keys[2]]))) as running:
        yield running


@pytest.fixture
def server(workspace: Path, keys: tuple[str, str, Path], runs: list[str]) -> Iterator[Served]:
    with serving(workspace, keys, runs, TURNS) as running:
        yield running


def http(server: Served, key: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=20
    )


async def events(api: httpx2.AsyncClient, path: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    async with api.stream("POST", path, json=body) as reply:
        assert reply.status_code == 200, await reply.aread()
        return list(sse_events(iter([line + "\n" async for line in reply.aiter_lines()])))


def names(stream: list[tuple[str, Any]]) -> list[str]:
    return [name for name, _ in stream]


async def test_a_turn_pauses_and_posted_decisions_continue_it(
    server: Served, keys: tuple[str, str, Path], runs: list[str]
) -> None:
    alice, bob, _ = keys
    async with http(server, alice) as api, http(server, bob) as other:
        paused = await events(api, "/v1/sessions/s1/turns", {"input": "ship it"})
        assert names(paused)[-2:] == ["approval.requested", "turn.paused"]
        assert "turn.completed" not in names(paused)
        request = paused[-2][1]
        assert (request["tool"], request["arguments"]) == ("deploy", {"target": "prod"})
        assert runs == []

        # After a reload: the pending approval is listed; a new turn waits for it.
        listed = (await api.get("/v1/sessions/s1/approvals")).json()["data"]
        assert [a["id"] for a in listed] == [request["id"]]
        busy = await api.post("/v1/sessions/s1/turns", json={"input": "something else"})
        assert (busy.status_code, busy.json()["error"]["code"]) == (409, "approvals_pending")

        # Another user cannot see or decide it: not found.
        assert (await other.get("/v1/sessions/s1/approvals")).json()["data"] == []
        theirs = await other.post(
            "/v1/sessions/s1/approvals", json={"decisions": {request["id"]: {"kind": "approve"}}}
        )
        assert theirs.status_code == 404

        approve = {"decisions": {request["id"]: {"kind": "approve"}}}
        continued = await events(api, "/v1/sessions/s1/approvals", approve)
        assert "tool.finished" in names(continued)
        assert continued[-1][0] == "turn.completed"
        assert continued[-1][1]["message"]["text"] == "done"
        assert runs == ["prod"]

        again = await events(api, "/v1/sessions/s1/approvals", approve)  # a replay
        assert again[-1][0] == "turn.completed"
        assert runs == ["prod"]
        conflict = await api.post(
            "/v1/sessions/s1/approvals", json={"decisions": {request["id"]: {"kind": "reject"}}}
        )
        assert (conflict.status_code, conflict.json()["error"]["code"]) == (
            409,
            "approval_conflict",
        )


async def test_two_approvals_at_once_run_the_call_once(
    server: Served, keys: tuple[str, str, Path], runs: list[str]
) -> None:
    alice, _, _ = keys
    async with http(server, alice) as api:
        paused = await events(api, "/v1/sessions/s2/turns", {"input": "ship it"})
        approve = {"decisions": {paused[-2][1]["id"]: {"kind": "approve"}}}
        both = await asyncio.gather(
            events(api, "/v1/sessions/s2/approvals", approve),
            events(api, "/v1/sessions/s2/approvals", approve),
        )
    assert [stream[-1][0] for stream in both] == ["turn.completed", "turn.completed"]
    assert runs == ["prod"]


async def test_a_bad_decision_is_refused_before_anything_runs(
    server: Served, keys: tuple[str, str, Path], runs: list[str]
) -> None:
    alice, _, _ = keys
    async with http(server, alice) as api:
        paused = await events(api, "/v1/sessions/s3/turns", {"input": "ship it"})
        ident = paused[-2][1]["id"]
        bad = await api.post(
            "/v1/sessions/s3/approvals", json={"decisions": {ident: {"kind": "respond"}}}
        )
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_decision")
        unknown = await api.post(
            "/v1/sessions/s3/approvals", json={"decisions": {"x": {"kind": "maybe"}}}
        )
        assert unknown.status_code == 400
    assert runs == []


async def test_chat_completions_say_plainly_that_the_turn_waits(
    server: Served, keys: tuple[str, str, Path], runs: list[str]
) -> None:
    alice, _, _ = keys
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=alice)
    try:
        reply = await client.chat.completions.create(
            model="harness",
            messages=[{"role": "user", "content": "ship it"}],
            extra_headers={"X-Harness-Session": "s4"},
        )
        text = reply.choices[0].message.content or ""
        assert "waiting for approval of 1 tool call(s): deploy" in text
        assert "/v1/sessions/s4/approvals" in text
        chunks = await client.chat.completions.create(
            model="harness",
            messages=[{"role": "user", "content": "ship it"}],
            extra_headers={"X-Harness-Session": "s5"},
            stream=True,
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
        assert "waiting for approval" in streamed
    finally:
        await client.close()
    assert runs == []


TASK_TURNS: list[dict[str, Any]] = [
    {
        "match": "^delegate",
        "tool_calls": [
            {
                "name": "agent_spawn",
                "input": {"agent_id": "general-purpose", "task": "ship it", "timeout_seconds": 0},
            }
        ],
    },
    *TURNS[:1],
    {"match": "status: accepted", "text": "started", "repeat": True},
    {"text": "done", "repeat": True},
]


@pytest.fixture
def task_server(workspace: Path, keys: tuple[str, str, Path], runs: list[str]) -> Iterator[Served]:
    with serving(workspace, keys, runs, TASK_TURNS) as running:
        yield running


async def until(check: Any, what: str) -> Any:
    for _ in range(200):
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.05)
    pytest.fail(f"{what} never happened")


async def test_a_background_tasks_call_is_listed_and_a_decision_continues_the_task(
    task_server: Served, keys: tuple[str, str, Path], runs: list[str]
) -> None:
    """The turn that spawned the task completed; the task's request is listed with its task
    id, blocks no new turn, and a decision answers 202 and continues the task, once."""
    alice, bob, _ = keys
    async with http(task_server, alice) as api, http(task_server, bob) as other:
        started = await events(api, "/v1/sessions/s1/turns", {"input": "delegate it"})
        assert started[-1][0] == "turn.completed"

        async def listed() -> list[dict[str, Any]]:
            data: list[dict[str, Any]] = (await api.get("/v1/sessions/s1/approvals")).json()["data"]
            return data

        [request] = await until(listed, "the task's approval request")
        assert request["tool"] == "deploy"
        assert request["task_id"].startswith("task_")
        assert request["tool_call_id"] is None
        assert (await other.get("/v1/sessions/s1/approvals")).json()["data"] == []
        free = await events(api, "/v1/sessions/s1/turns", {"input": "hello"})  # not 409
        assert free[-1][0] == "turn.completed"
        assert runs == []

        approve = {"decisions": {request["id"]: {"kind": "approve"}}}
        decided = await api.post("/v1/sessions/s1/approvals", json=approve)
        assert decided.status_code == 202, decided.text
        assert decided.json() == {"tasks": {request["id"]: request["task_id"]}}

        async def completed() -> bool:
            task = (await api.get(f"/v1/tasks/{request['task_id']}")).json()
            return bool(task["status"] == "completed")

        await until(completed, "the task's completion")
        again = await api.post("/v1/sessions/s1/approvals", json=approve)  # a replay
        assert again.status_code == 202
        assert await listed() == []
    assert runs == ["prod"]
