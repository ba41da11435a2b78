"""The native API over real HTTP: a turn's SSE stream as a client parses it, history, trace,
background-task notices, compaction, and what a disconnect does to a turn."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _served import Served, served, sse_events

from harness import CompactionConfig, HarnessAgent, MemoryConfig
from harness.models import ScriptedChatModel
from harness.serve import ServeConfig

TURNS: list[dict[str, Any]] = [
    {"match": "weather", "tool_calls": [{"name": "list_files", "input": {"path": "."}}]},
    {"match": r"\[DIR\]", "text": "It is sunny in Paris.", "repeat": True},
    {
        "match": "delegate",
        "tool_calls": [
            {
                "name": "agent_spawn",
                "input": {
                    "agent_id": "general-purpose",
                    "task": "count stars",
                    "timeout_seconds": 0,
                },
            }
        ],
    },
    {"match": "^count stars$", "text": "Seven stars.", "repeat": True},
    {"match": "task_id", "text": "Started.", "repeat": True},
    {"match": "slow", "text": "This answer came too late.", "delay": 3, "repeat": True},
    {"text": "Fine.", "repeat": True},
]


def opener(workspace: Path, **options: Any) -> Any:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        options.setdefault("memory", None)
        async with HarnessAgent(
            model=ScriptedChatModel(TURNS), workspace=workspace, **options
        ) as agent:
            yield agent

    return opened


@pytest.fixture
def server(workspace: Path) -> Iterator[Served]:
    with served(opener(workspace), ServeConfig(ping_seconds=0.2)) as running:
        yield running


def http(server: Served) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url=server.url, timeout=20)


async def events(api: httpx2.AsyncClient, session: str, text: str) -> list[tuple[str, Any]]:
    async with api.stream("POST", f"/v1/sessions/{session}/turns", json={"input": text}) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        return list(sse_events(iter([line + "\n" async for line in reply.aiter_lines()])))


async def test_a_turn_streams_its_steps_tools_and_text_in_order(server: Served) -> None:
    async with http(server) as api:
        received = await events(api, "s1", "What is the weather?")
    names = [name for name, _ in received]
    text_at = names.index("text.delta")
    assert names[:5] == [
        "turn.started",
        "step.completed",
        "tool.started",
        "tool.finished",
        "text.delta",
    ]
    assert names[-2:] == ["step.completed", "turn.completed"]
    assert set(names[text_at:-2]) == {"text.delta"}
    data = dict(received)  # the last of each name
    assert received[0][1] == {"session_id": "s1"}
    assert received[1][1]["tool_calls"] == ["list_files"]
    assert received[2][1]["name"] == "list_files"
    assert received[2][1]["input"] == {"path": "."}
    assert "[DIR]" in received[3][1]["output"]
    assert received[3][1]["is_error"] is False
    assert "".join(d["text"] for n, d in received if n == "text.delta") == "It is sunny in Paris."
    assert data["turn.completed"]["message"]["text"] == "It is sunny in Paris."
    assert data["turn.completed"]["message"]["role"] == "assistant"


async def test_history_and_trace_show_the_saved_session(server: Served) -> None:
    async with http(server) as api:
        await events(api, "s2", "What is the weather?")
        history = (await api.get("/v1/sessions/s2")).json()
        trace = (await api.get("/v1/sessions/s2/trace")).json()
        assert (await api.get("/v1/sessions/none")).status_code == 404
    assert history["total"] == 4
    roles = [m["role"] for m in history["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert history["messages"][1]["tool_calls"][0]["name"] == "list_files"
    assert history["messages"][2]["tool_results"][0]["name"] == "list_files"
    assert [call["steps"] for call in trace["calls"]] == [2]
    assert {"PreCall", "PostReasoning", "PostActing", "PostCall"} <= {
        r["event"] for r in trace["records"]
    }


async def test_a_finished_background_task_is_noticed_in_the_next_turn(server: Served) -> None:
    async with http(server) as api:
        await events(api, "s3", "please delegate")
        for _ in range(200):
            tasks = (await api.get("/v1/tasks", params={"session": "s3"})).json()["data"]
            if tasks and tasks[0]["status"] == "completed":
                break
            await asyncio.sleep(0.05)
        assert tasks[0]["status"] == "completed"
        shown = (await api.get(f"/v1/tasks/{tasks[0]['task_id']}")).json()
        assert shown["result"] == "Seven stars."
        received = await events(api, "s3", "anything new?")
    notices = [data for name, data in received if name == "task.notice"]
    assert notices == [
        {
            "tasks": [
                {
                    "task_id": tasks[0]["task_id"],
                    "subagent": "general-purpose",
                    "status": "completed",
                }
            ],
            "more": 0,
        }
    ]


async def test_a_compaction_shows_as_two_events(workspace: Path) -> None:
    config = CompactionConfig(
        trigger_messages=4, keep_messages=2, flush_before=False, offload_before=False
    )
    summarizer = ScriptedChatModel([{"text": "They talked about the weather.", "repeat": True}])
    with served(opener(workspace, compaction=config, compaction_model=summarizer)) as server:
        async with http(server) as api:
            for text in ("one", "two"):
                await events(api, "long", text)
            received = await events(api, "long", "three")
    names = [name for name, _ in received]
    assert names.index("compaction.started") < names.index("compaction.completed")
    completed = dict(received)["compaction.completed"]
    assert completed["removed"] > 0
    assert completed["tokens_after"] > 0


async def test_a_quiet_turn_sends_pings_and_a_client_that_leaves_stops_it(
    server: Served, workspace: Path
) -> None:
    async with http(server) as api:
        async with api.stream("POST", "/v1/sessions/s4/turns", json={"input": "slow one"}) as reply:
            lines = reply.aiter_lines()
            assert (await anext(lines)).startswith("id: ")  # the event's id comes first
            assert await anext(lines) == "event: turn.started"
            seen = [await anext(lines) for _ in range(4)]
            assert ": ping" in seen  # the model is silent for 3 s; the stream is not
        # The client is gone. Its turn stops, keeps the question, and frees the session.
        for _ in range(100):
            reply_ = await api.get("/v1/sessions/s4")
            if reply_.status_code == 200:
                break
            await asyncio.sleep(0.05)
        received = await events(api, "s4", "quick one")
        assert received[-1][0] == "turn.completed"
        await asyncio.sleep(3.5)  # past the moment the slow answer would have come
        history = (await api.get("/v1/sessions/s4")).json()["messages"]
    texts = [m["text"] for m in history]
    assert texts == ["slow one", "quick one", "Fine."]


@pytest.mark.parametrize("trace", [True, False])
async def test_the_turns_memory_flush_is_its_last_event(workspace: Path, trace: bool) -> None:
    # The server hears of the flush from the agent itself, so it is reported with no trace.
    memory_model = ScriptedChatModel([{"text": "- The user drinks green tea.", "repeat": True}])
    options = {
        "memory": MemoryConfig(auto_consolidate=False),
        "memory_model": memory_model,
        "trace": trace,
    }
    with served(opener(workspace, **options)) as server:
        async with http(server) as api:
            received = await events(api, "flushed", "I drink green tea every morning.")
            again = await events(api, "flushed", "I drink green tea every morning.")
    names = [name for name, _ in received]
    assert names[-2:] == ["turn.completed", "memory.flushed"]
    flushed = received[-1][1]
    assert flushed["path"].startswith("memory/")
    assert flushed["messages"] == 2
    log = (workspace / flushed["path"]).read_text()
    assert "green tea" in log
    # Each turn reports its own flush, not the earlier ones.
    assert [name for name, _ in again].count("memory.flushed") == 1
    assert (workspace / "agents" / "harness" / "traces").exists() is trace


async def test_reading_a_history_while_a_line_is_being_appended_changes_nothing(
    server: Served, workspace: Path
) -> None:
    async with http(server) as api:
        await events(api, "s5", "hello")
        session = workspace / "agents" / "harness" / "context" / "s5"
        saved = session / "messages.jsonl"
        with saved.open("a") as file:
            file.write('{"type": "message", "role": "assistant", "con')  # a write under way
        before = saved.read_bytes()
        history = (await api.get("/v1/sessions/s5")).json()
    assert [m["text"] for m in history["messages"]] == ["hello", "Fine."]
    assert saved.read_bytes() == before
    assert not (session / "quarantine.jsonl").exists()
