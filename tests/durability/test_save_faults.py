"""A turn whose save fails is a failed turn, and nothing saved before it is lost.

A disk that filled during a turn, or Redis stopping in the middle of one, used to end with the
reply printed, exit 0 and nothing saved. Both are real here: the workspace lies on a 1 MiB
tmpfs that the test fills (root is needed to mount one: without it the test skips with the
reason, and fails in CI), and a redis-server that persists every write (``appendfsync
always``) is killed with SIGKILL from inside a tool call, then started again on its files.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _disks import fill, small_disk
from _outcomes import answer
from _processes import answers_ping, free_port, running_server
from _required import unavailable
from harness import HarnessAgent, MemoryConfig, RuntimeContext, TurnNotSaved
from harness.models import ScriptedChatModel
from harness.session import SessionStore, StoreLeases
from harness.stores import RedisStore
from harness.workspace import WorkspaceManager

QUIET = MemoryConfig(flush=False, auto_consolidate=False, index=False)
CTX = RuntimeContext(session_id="s", user_id="alice")
TURNS: list[dict[str, Any]] = [
    {"match": "first", "text": "one"},
    {"match": "second", "text": "two"},
    {"match": "third", "text": "three"},
]


BIG = "second " + "x" * 20_000
"""An input too big for what room a full disk has left in the session file's last page."""


def _texts(messages: list[Any]) -> list[str]:
    return [m.text for m in messages if m.role in ("user", "assistant") and m.text]


# -- a full disk --------------------------------------------------------------------------------


async def test_a_full_disk_fails_the_turn_and_keeps_what_was_saved(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        workspace = disk / "ws"
        model = ScriptedChatModel(TURNS)
        async with HarnessAgent(model=model, workspace=workspace, memory=QUIET) as agent:
            assert (answer(await agent.call("first", ctx=CTX))).text == "one"
            session_file = next(workspace.rglob("messages.jsonl"))
            before = session_file.read_bytes()
            filler = fill(disk)
            with pytest.raises(TurnNotSaved, match="could not be saved"):
                answer(await agent.call(BIG, ctx=CTX))
            assert len(model.requests) == 1  # the model was not asked before the save
            assert session_file.read_bytes() == before  # nothing of the turn that failed
            filler.unlink()
            assert (answer(await agent.call("third", ctx=CTX))).text == "three"
        saved = await SessionStore(WorkspaceManager(workspace), "harness").load(CTX)
        assert _texts(saved) == ["first", "one", "third", "three"]


# -- Redis stopped in the middle of a turn ------------------------------------------------------


@contextlib.contextmanager
def persistent_redis(data: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """A redis-server that writes every command to its append-only file before answering."""
    server = shutil.which("redis-server")
    if server is None:
        unavailable("redis-server is not installed (apt-get install redis-server)")
    data.mkdir(exist_ok=True)
    log = data / "redis.log"
    with log.open("ab") as output:
        process = subprocess.Popen(
            [
                *(server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data)),
                *("--save", "", "--appendonly", "yes", "--appendfsync", "always"),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    with running_server(
        process, lambda: answers_ping(port), f"redis-server on {port}", timeout=10, log=log
    ):
        yield process


async def test_redis_stopped_mid_turn_fails_the_turn_and_loses_nothing_saved(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    prefix = f"t{uuid.uuid4().hex[:12]}"
    servers: list[subprocess.Popen[bytes]] = []

    def stop_redis() -> str:
        """Kill the store in the middle of the turn (a tool the model calls).

        Returns:
            What happened.
        """
        servers[-1].send_signal(signal.SIGKILL)
        servers[-1].wait()
        return "the store is gone"

    script: list[dict[str, Any]] = [
        {"match": "first", "text": "one"},
        {"match": "second", "tool_calls": [{"name": "stop_redis", "input": {}}]},
        {"match": "the store is gone", "text": "two"},
        {"match": "third", "text": "three"},
    ]
    store = RedisStore(url, prefix=prefix, timeout=0.3, attempts=3)
    leases = StoreLeases(store, ttl=1.0)
    try:
        with persistent_redis(tmp_path / "redis", port) as first_server:
            servers.append(first_server)
            agent = HarnessAgent(
                model=ScriptedChatModel(script),
                workspace=tmp_path / "anchor",
                store=store,
                session_leases=leases,
                memory=QUIET,
                tools=[stop_redis],
            )
            assert (answer(await agent.call("first", ctx=CTX))).text == "one"
            with pytest.raises(TurnNotSaved):
                answer(await agent.call("second", ctx=CTX))
        with persistent_redis(tmp_path / "redis", port):
            await asyncio.sleep(leases.ttl)  # the lease the failed call could not give back
            assert (answer(await agent.call("third", ctx=CTX))).text == "three"
            saved = await agent.sessions.load(CTX)
            texts = _texts(saved)
            assert texts[:3] == ["first", "one", "second"]  # accepted before the stop: kept
            assert texts[-2:] == ["third", "three"]
            assert "two" not in texts  # the reply of the turn that failed was never saved
            await agent.aclose()
    finally:
        await store.aclose()
