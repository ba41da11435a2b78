"""API keys: every request acts for its key's user, and no request reaches another user's data."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from _served import Served, served, sse_events
from starlette.requests import Request

from harness import HarnessAgent, MemoryConfig
from harness.errors import ConfigError, RequestRefused
from harness.models import ScriptedChatModel
from harness.serve import ApiKeys, ServeConfig, add_key, digest
from harness.serve.http import caller

TURNS: list[dict[str, Any]] = [
    {
        "match": "delegate",
        "tool_calls": [
            {
                "name": "agent_spawn",
                "input": {
                    "agent_id": "general-purpose",
                    "task": "count the stars",
                    "timeout_seconds": 0,
                },
            }
        ],
        "repeat": True,
    },
    {"match": "^count the stars$", "text": "Seven stars.", "repeat": True},
    {"match": "task_", "text": "Started it in the background.", "repeat": True},
    {"text": "Noted.", "repeat": True},
]


@pytest.fixture
def keys(tmp_path: Path) -> tuple[str, str, Path]:
    file = tmp_path / "keys.txt"
    return add_key(file, "alice"), add_key(file, "bob"), file


@pytest.fixture
def server(workspace: Path, keys: tuple[str, str, Path]) -> Iterator[Served]:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        agent = HarnessAgent(
            model=ScriptedChatModel(TURNS),
            workspace=workspace,
            memory=MemoryConfig(flush=False, auto_consolidate=False),
        )
        async with agent:
            yield agent

    with served(opened, ServeConfig(keys=ApiKeys.load([keys[2]]))) as running:
        yield running


def http(server: Served, key: str | None) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx2.AsyncClient(base_url=server.url, headers=headers, timeout=20)


async def turn(api: httpx2.AsyncClient, session: str, text: str) -> list[tuple[str, Any]]:
    async with api.stream("POST", f"/v1/sessions/{session}/turns", json={"input": text}) as reply:
        assert reply.status_code == 200, await reply.aread()
        return list(sse_events(iter([line + "\n" async for line in reply.aiter_lines()])))


async def test_no_key_or_a_wrong_key_is_refused_everywhere(
    server: Served, keys: tuple[str, str, Path]
) -> None:
    routes = [
        ("GET", "/v1/models"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/s1"),
        ("GET", "/v1/sessions/s1/trace"),
        ("POST", "/v1/sessions/s1/turns"),
        ("GET", "/v1/tasks"),
        ("GET", "/v1/tasks/task_x"),
        ("POST", "/v1/tasks/task_x/cancel"),
        ("GET", "/v1/memory/search?q=x"),
        ("GET", "/v1/memory/review"),
        ("POST", "/v1/memory/review/mem_x"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/responses"),
        ("GET", "/v1/responses/resp_x_0"),
        ("DELETE", "/v1/responses/resp_x_0"),
        ("GET", "/v1/responses/resp_x_0/input_items"),
    ]
    for key, code in ((None, "missing_api_key"), ("hk_wrong", "invalid_api_key")):
        async with http(server, key) as api:
            for method, path in routes:
                reply = await api.request(method, path, json={"input": "hi"})
                assert reply.status_code == 401, (key, path)
                assert reply.json()["error"]["code"] == code
    with pytest.raises(openai.AuthenticationError):
        async with openai.AsyncOpenAI(
            base_url=f"{server.url}/v1", api_key="hk_wrong", max_retries=0
        ) as api_client:
            await api_client.chat.completions.create(
                model="harness", messages=[{"role": "user", "content": "hi"}]
            )
    async with http(server, None) as api:
        assert (await api.get("/healthz")).status_code == 200  # for load balancers


async def test_a_user_reaches_only_their_own_sessions(
    server: Served, keys: tuple[str, str, Path], workspace: Path
) -> None:
    alice, bob, _ = keys
    async with http(server, alice) as api:
        await turn(api, "diary", "alice's secret plan")
    async with http(server, bob) as api:
        assert (await api.get("/v1/sessions")).json()["data"] == []
        for path in ("/v1/sessions/diary", "/v1/sessions/diary/trace"):
            reply = await api.get(path)
            assert reply.status_code == 404
            assert "secret" not in reply.text
        # Naming the same session id gives bob a session of his own.
        await turn(api, "diary", "bob's note")
        history = (await api.get("/v1/sessions/diary")).json()["messages"]
        assert [m["text"] for m in history if m["role"] == "user"] == ["bob's note"]
        async with openai.AsyncOpenAI(
            base_url=f"{server.url}/v1", api_key=bob, max_retries=0
        ) as api_client:
            await api_client.chat.completions.create(
                model="harness",
                messages=[{"role": "user", "content": "bob again"}],
                extra_headers={"X-Harness-Session": "diary"},
            )
    async with http(server, alice) as api:
        history = (await api.get("/v1/sessions/diary")).json()["messages"]
        assert [m["text"] for m in history if m["role"] == "user"] == ["alice's secret plan"]
        assert [s["id"] for s in (await api.get("/v1/sessions")).json()["data"]] == ["diary"]
    assert (workspace / "users" / "alice").is_dir()
    assert (workspace / "users" / "bob").is_dir()


async def test_a_user_reaches_only_their_own_tasks(
    server: Served, keys: tuple[str, str, Path]
) -> None:
    alice, bob, _ = keys
    async with http(server, alice) as api:
        events = await turn(api, "work", "please delegate")
        assert events[-1][0] == "turn.completed"
        tasks = (await api.get("/v1/tasks")).json()["data"]
        assert len(tasks) == 1
        task_id = tasks[0]["task_id"]
        assert "user_id" not in tasks[0]
        assert (await api.get(f"/v1/tasks/{task_id}")).status_code == 200
    async with http(server, bob) as api:
        assert (await api.get("/v1/tasks")).json()["data"] == []
        assert (await api.get(f"/v1/tasks/{task_id}")).status_code == 404
        assert (await api.post(f"/v1/tasks/{task_id}/cancel")).status_code == 404
    async with http(server, alice) as api:
        shown = (await api.get(f"/v1/tasks/{task_id}")).json()
        assert shown["cancel_requested"] is False


async def test_a_user_searches_only_their_own_memory(
    server: Served, keys: tuple[str, str, Path], workspace: Path
) -> None:
    alice, bob, _ = keys
    notes = workspace / "users" / "alice" / "MEMORY.md"
    notes.parent.mkdir(parents=True)
    notes.write_text("# Memory\n\n- Alice keeps her spare key under the blue flowerpot.\n")
    async with http(server, alice) as api:
        hits = (await api.get("/v1/memory/search", params={"q": "flowerpot"})).json()["data"]
        assert hits
        assert "blue flowerpot" in hits[0]["content"]
        assert hits[0]["path"] == "MEMORY.md"
    async with http(server, bob) as api:
        reply = await api.get("/v1/memory/search", params={"q": "flowerpot"})
        assert reply.status_code == 200
        assert reply.json()["data"] == []


def request_from(host: str) -> Request:
    return Request({"type": "http", "headers": [], "client": (host, 5000), "method": "GET"})


def test_a_keyless_server_answers_only_loopback_addresses() -> None:
    config = ServeConfig()
    assert caller(request_from("127.0.0.1"), config) is None
    assert caller(request_from("::1"), config) is None
    for host in ("10.0.0.7", "192.168.1.2", "2001:db8::1"):
        with pytest.raises(RequestRefused) as refused:
            caller(request_from(host), config)
        assert refused.value.status == 403


def test_harness_serve_refuses_to_listen_beyond_loopback_without_keys(tmp_path: Path) -> None:
    harness = str(Path(sys.executable).with_name("harness"))
    done = subprocess.run(
        [harness, "serve", "-w", str(tmp_path / "ws"), "-m", "scripted:x", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without API keys" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_key_files_hold_digests_and_bad_entries_are_refused(tmp_path: Path) -> None:
    file = tmp_path / "keys.txt"
    key = add_key(file, "carol")
    text = file.read_text()
    assert key not in text
    assert digest(key) in text
    assert file.stat().st_mode & 0o077 == 0
    assert ApiKeys.load([file]).user_for(key) == "carol"
    assert ApiKeys.load([file]).user_for(key + "x") is None
    environ = {"HARNESS_API_KEYS": f"dave {digest('k1')}, erin {digest('k2')}"}
    from_env = ApiKeys.load(environ=environ)
    assert (from_env.user_for("k1"), from_env.user_for("k2")) == ("dave", "erin")
    for bad, message in (
        ("alice plaintext-key", "expected 'USER sha256"),
        (f"../x {digest('k')}", "not a user id"),
        (f"a {digest('k')}\nb {digest('k')}", "already given to user 'a'"),
        ("", "no API keys"),
    ):
        with pytest.raises(ConfigError, match=message):
            ApiKeys.parse(bad, source="keys.txt")
    with pytest.raises(ConfigError, match="cannot read the API key file"):
        ApiKeys.load([tmp_path / "missing.txt"])


async def test_a_users_flush_is_reported_to_that_user_in_their_namespace(
    workspace: Path, keys: tuple[str, str, Path]
) -> None:
    memory_model = ScriptedChatModel([{"text": "- The user keeps bees.", "repeat": True}])

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with HarnessAgent(
            model=ScriptedChatModel(TURNS),
            workspace=workspace,
            memory=MemoryConfig(auto_consolidate=False),
            memory_model=memory_model,
            trace=False,
        ) as agent:
            yield agent

    alice, bob, file = keys
    with served(opened, ServeConfig(keys=ApiKeys.load([file]))) as running:
        async with http(running, alice) as api:
            received = await turn(api, "hives", "I keep bees on the roof.")
        async with http(running, bob) as api:
            others = await turn(api, "hives", "hello")
    flushed = [data for name, data in received if name == "memory.flushed"]
    assert len(flushed) == 1
    assert flushed[0]["path"].startswith("memory/")  # as alice names it: no users/alice/
    assert "bees" in (workspace / "users" / "alice" / flushed[0]["path"]).read_text()
    assert all("bees" not in str(data) for name, data in others if name == "memory.flushed")
