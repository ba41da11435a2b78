"""``harness serve --engine``: a turn outlives the server that took it.

Two real ``harness serve`` processes on one Redis and one Temporal dev server. The client's
server is killed with SIGKILL while its worker is in the turn's (slow) model call; the client
re-attaches to the other server with ``Last-Event-ID`` and reads the turn to its end, which the
other server's worker finished.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import httpx
from _served import serve_process
from httpx_sse import aconnect_sse

SCRIPT = {
    "log": "requests.jsonl",
    "turns": [
        {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
        {"match": "take your time", "text": "Done, slowly.", "delay": 2.0, "repeat": True},
        {"match": "^Answer with only", "text": "Two, I think."},
        {"match": "no JSON value", "text": '{"count": 2}'},
        {"text": "Fine.", "repeat": True},
    ],
}


def serve_args(tmp_path: Path, name: str, temporal: str, redis_url: str, queue: str) -> list[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    engine = (
        f"temporal://{temporal}?task_queue={queue}&heartbeat_seconds=1.5"
        "&sticky_seconds=0.5&first_retry_seconds=0.2"
    )
    return [
        "--engine", engine, "--store", redis_url, "--model", f"scripted:{script}",
        "--workspace", str(tmp_path / name),
    ]  # fmt: skip


async def test_a_client_whose_server_died_resumes_on_another_and_sees_the_turn_complete(
    temporal_address: str, redis_url: str, tmp_path: Path
) -> None:
    queue, session = f"q-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    seen: list[tuple[str, str]] = []
    with serve_process(
        serve_args(tmp_path, "a", temporal_address, redis_url, queue), tmp_path / "a.log"
    ) as (url, process):
        async with (
            httpx.AsyncClient(base_url=url, timeout=30) as api,
            aconnect_sse(
                api,
                "POST",
                f"/v1/sessions/{session}/turns",
                json={"input": "Please take your time"},
            ) as source,
        ):
            async for event in source.aiter_sse():
                if event.data:
                    seen.append((event.id, event.event))
                if event.event == "turn.started":
                    # Its worker is in the model's two-second answer: the server goes away
                    # with the client still connected, so nothing of it cancels the turn.
                    os.kill(process.pid, signal.SIGKILL)
                    break
    assert [name for _, name in seen] == ["turn.started"]

    rest: list[tuple[str, str, dict[str, object]]] = []
    with serve_process(
        serve_args(tmp_path, "b", temporal_address, redis_url, queue), tmp_path / "b.log"
    ) as (url, _):
        async with (
            httpx.AsyncClient(base_url=url, timeout=60) as api,
            aconnect_sse(
                api,
                "GET",
                f"/v1/sessions/{session}/events",
                headers={"Last-Event-ID": seen[-1][0]},
            ) as source,
        ):
            assert source.response.status_code == 200
            async for event in source.aiter_sse():
                if event.data:
                    rest.append((event.id, event.event, json.loads(event.data)))
            history = (await api.get(f"/v1/sessions/{session}")).json()
            # structured output runs on the engine too (it was once refused there)
            schema = {"type": "object", "properties": {"count": {"type": "integer"}}}
            structured = await api.post(
                "/v1/chat/completions",
                json={
                    "model": "harness",
                    "messages": [{"role": "user", "content": "How many turns?"}],
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"name": "counted", "schema": schema},
                    },
                },
            )

    names = [name for _, name, _ in rest]
    assert names[-1] == "turn.completed", names
    assert rest[-1][2]["message"]["text"] == "Done, slowly."  # type: ignore[index]
    turn = seen[0][0].rpartition(".")[0]
    assert [ident for ident, _, _ in rest] == [f"{turn}.{n}" for n in range(1, len(rest) + 1)]
    messages = [(m["role"], m["text"]) for m in history["messages"]]
    assert messages == [("user", "Please take your time"), ("assistant", "Done, slowly.")]
    assert structured.status_code == 200, structured.text
    assert json.loads(structured.json()["choices"][0]["message"]["content"]) == {"count": 2}
