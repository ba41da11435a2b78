"""``harness serve`` as an operator runs it: processes on one Redis, several workers, SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path
from typing import Any

import httpx2
import openai
from _served import serve_process, sse_events

SCRIPT = {
    "turns": [
        {"match": "slow", "text": "Slow but done.", "delay": 1.5, "repeat": True},
        {"text": "Noted.", "repeat": True},
    ]
}


def script(tmp_path: Path) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    return f"scripted:{path}"


async def say(url: str, session: str, text: str) -> str:
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
        completion = await client.chat.completions.create(
            model="harness",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Harness-Session": session},
        )
    return completion.choices[0].message.content or ""


async def texts(url: str, session: str) -> list[str]:
    async with httpx2.AsyncClient(base_url=url, timeout=20) as api:
        reply = await api.get(f"/v1/sessions/{session}")
    return [m["text"] for m in reply.json()["messages"]]


async def test_two_server_processes_on_one_redis_share_sessions_one_turn_at_a_time(
    redis_url: str, tmp_path: Path
) -> None:
    args = ["-w", str(tmp_path / "ws"), "-m", script(tmp_path), "--store", redis_url]
    args += ["--session-wait", "0.2"]
    with (
        serve_process(args, tmp_path / "a.log") as (a, _),
        serve_process(args, tmp_path / "b.log") as (b, _),
    ):
        assert await say(a, "shared", "first, on A") == "Noted."
        assert await say(b, "shared", "second, on B") == "Noted."
        assert await say(a, "shared", "third, on A") == "Noted."
        assert await texts(b, "shared") == [
            "first, on A",
            "Noted.",
            "second, on B",
            "Noted.",
            "third, on A",
            "Noted.",
        ]
        # A turn running on A holds the session for B too.
        async with (
            httpx2.AsyncClient(base_url=a, timeout=20) as on_a,
            on_a.stream(
                "POST", "/v1/sessions/shared/turns", json={"input": "slow on A"}
            ) as running,
        ):
            lines = running.aiter_lines()
            assert (await anext(lines)).startswith("id: ")  # the event's id comes first
            assert await anext(lines) == "event: turn.started"
            async with httpx2.AsyncClient(base_url=b, timeout=20) as on_b:
                busy = await on_b.post(
                    "/v1/sessions/shared/turns", json={"input": "meanwhile on B"}
                )
            assert busy.status_code == 409
            rest = list(sse_events(iter([line + "\n" async for line in lines])))
        # harness serve keeps memory: the turn's flush is reported after its reply.
        assert [name for name, _ in rest][-2:] == ["turn.completed", "memory.flushed"]
        assert dict(rest)["turn.completed"]["message"]["text"] == "Slow but done."
        assert (await texts(b, "shared"))[-2:] == ["slow on A", "Slow but done."]


async def test_sigterm_lets_the_turn_in_flight_finish_and_save(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    args = ["-w", str(workspace), "-m", script(tmp_path), "--grace", "20"]
    log = tmp_path / "serve.log"
    with serve_process(args, log) as (url, process):
        async with (
            httpx2.AsyncClient(base_url=url, timeout=20) as api,
            api.stream("POST", "/v1/sessions/s1/turns", json={"input": "slow work"}) as running,
        ):
            lines = running.aiter_lines()
            assert (await anext(lines)).startswith("id: ")  # the event's id comes first
            assert await anext(lines) == "event: turn.started"
            process.send_signal(signal.SIGTERM)
            rest = list(sse_events(iter([line + "\n" async for line in lines])))
        assert dict(rest)["turn.completed"]["message"]["text"] == "Slow but done."
        code = await asyncio.to_thread(process.wait, 30)
    # uvicorn ends a stopped server by its signal, after the shutdown: status 143 for a shell.
    assert code == -signal.SIGTERM, log.read_text()
    assert "Application shutdown complete" in log.read_text()
    saved = (workspace / "agents" / "harness" / "context" / "s1" / "messages.jsonl").read_text()
    assert [json.loads(line)["role"] for line in saved.splitlines()] == ["user", "assistant"]
    assert '"POST /v1/sessions/s1/turns" 200' in log.read_text()


async def test_several_workers_serve_one_workspace(tmp_path: Path) -> None:
    args = ["-w", str(tmp_path / "ws"), "-m", script(tmp_path), "--workers", "2"]
    with serve_process(args, tmp_path / "workers.log") as (url, _):
        answers = await asyncio.gather(*(say(url, f"s{i}", f"hello {i}") for i in range(6)))
        assert answers == ["Noted."] * 6
        for i in range(6):
            await say(url, "s0", f"more {i}")
        history = await texts(url, "s0")
    assert [t for t in history if t != "Noted."] == ["hello 0", *(f"more {i}" for i in range(6))]


async def test_sigterm_past_the_grace_stops_the_turn_and_keeps_its_question(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    args = ["-w", str(workspace), "-m", script(tmp_path), "--grace", "0.3"]
    log = tmp_path / "serve.log"
    with serve_process(args, log) as (url, process):
        async with (
            httpx2.AsyncClient(base_url=url, timeout=20) as api,
            api.stream("POST", "/v1/sessions/s1/turns", json={"input": "slow work"}) as running,
        ):
            lines = running.aiter_lines()
            assert (await anext(lines)).startswith("id: ")  # the event's id comes first
            assert await anext(lines) == "event: turn.started"
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(httpx2.HTTPError):
                async for _ in lines:
                    pass
        await asyncio.to_thread(process.wait, 30)
    assert "Application shutdown complete" in log.read_text()
    saved = (workspace / "agents" / "harness" / "context" / "s1" / "messages.jsonl").read_text()
    assert [json.loads(line)["content"] for line in saved.splitlines()] == [
        [{"type": "text", "text": "slow work"}]
    ]


async def test_two_workers_approving_at_once_run_the_call_once(tmp_path: Path) -> None:
    """`harness serve --workers 2 --approval memory_save`: a turn pauses on one worker; the
    same approval posted at once to both workers (whichever gets each request) runs it once."""
    gated = {
        "turns": [
            {
                "match": "^ship",
                "tool_calls": [{"name": "memory_save", "input": {"fact": "ran-once-token"}}],
            },
            {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
            {"text": "Saved.", "repeat": True},
        ]
    }
    path = tmp_path / "gated.json"
    path.write_text(json.dumps(gated))
    workspace = tmp_path / "ws"
    args = ["-w", str(workspace), "-m", f"scripted:{path}", "--workers", "2"]
    args += ["--approval", "memory_save"]
    with serve_process(args, tmp_path / "workers.log") as (url, _):
        paused = await _stream(url, "/v1/sessions/s1/turns", {"input": "ship it"})
        assert paused[-1][0] == "turn.paused"
        ident = dict(paused)["approval.requested"]["id"]
        approve = {"decisions": {ident: {"kind": "approve"}}}
        both = await asyncio.gather(
            _stream(url, "/v1/sessions/s1/approvals", approve),
            _stream(url, "/v1/sessions/s1/approvals", approve),
        )
    replies = [dict(stream)["turn.completed"]["message"]["text"] for stream in both]
    assert replies == ["Saved.", "Saved."]
    logs = list((workspace / "memory").glob("*.md"))
    assert sum(log.read_text().count("ran-once-token") for log in logs) == 1


async def _stream(url: str, path: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """A POST's event stream, from a client of its own (a connection, a worker, of its own)."""
    async with (
        httpx2.AsyncClient(base_url=url, timeout=30) as api,
        api.stream("POST", path, json=body) as reply,
    ):
        assert reply.status_code == 200, await reply.aread()
        return list(sse_events(iter([line + "\n" async for line in reply.aiter_lines()])))
