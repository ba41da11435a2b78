"""Worker processes share one workspace in a real Redis and take turns in one session."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import datetime
from pathlib import Path

from harness.filesystem.remote import RemoteFilesystem
from harness.stores.redis import RedisStore

WORKER = Path(__file__).with_name("_worker.py")


async def worker(*args: str | Path) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        *map(str, args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


def requests(local: Path) -> list[list[dict[str, object]]]:
    lines = (local / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def agent_requests(local: Path) -> list[str]:
    """The text of each request the worker's agent made (memory flushes left out)."""
    texts = [json.dumps(request) for request in requests(local)]
    return [t for t in texts if "Extract NEW memories" not in t]


async def test_two_workers_alternate_turns_and_share_memory(redis_url: str, tmp_path: Path) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    a, b = tmp_path / "worker-a", tmp_path / "worker-b"

    assert (await worker("turn", redis_url, prefix, a, "Tell me about apple")).strip() == "noted"
    assert (await worker("turn", redis_url, prefix, b, "Tell me about banana")).strip() == "noted"
    assert (await worker("turn", redis_url, prefix, a, "Tell me about cherry")).strip() == "noted"

    # The second worker continued the first one's session, and the first saw the second's turn.
    (b_turn,) = agent_requests(b)
    assert "Tell me about apple" in b_turn
    assert "Tell me about cherry" in agent_requests(a)[-1]
    assert "Tell me about banana" in agent_requests(a)[-1]
    assert not (a / "ws" / "users").exists()  # nothing was written to a worker's disk

    # Both workers' memory flushes are in the one daily log, in the store.
    store = RedisStore(redis_url, prefix=prefix)
    try:
        fs = RemoteFilesystem(store)
        day = datetime.now().astimezone().date().isoformat()
        found = await fs.get(f"users/alice/memory/{day}.md")
        assert found is not None
        log = found[0].decode()
        for word in ("apple", "banana", "cherry"):
            assert f"- {word} was mentioned" in log
        session = await fs.get("users/alice/agents/harness/context/shared/messages.jsonl")
        assert session is not None
        assert len(session[0].decode().splitlines()) == 6  # three turns, none lost
    finally:
        await store.aclose()

    # Each worker's own index syncs from the store: either one finds every worker's facts.
    for local in (a, b):
        for word in ("apple", "banana", "cherry"):
            found_text = await worker("search", redis_url, prefix, local, word)
            assert f"{word} was mentioned" in found_text, found_text


async def test_one_worker_at_a_time_runs_maintenance(redis_url: str, tmp_path: Path) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    outcomes = await asyncio.gather(
        *(worker("maintain", redis_url, prefix, tmp_path / f"w{i}") for i in range(4))
    )
    assert sorted(o.strip() for o in outcomes) == ["ran", "skipped", "skipped", "skipped"]
    # Within the interval nobody runs it again.
    assert (await worker("maintain", redis_url, prefix, tmp_path / "w0")).strip() == "skipped"


async def test_a_session_continues_its_subagent_work_on_another_worker(
    redis_url: str, tmp_path: Path
) -> None:
    """A delegates in the background; B is told the result and continues A's child."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    a, b = tmp_path / "worker-a", tmp_path / "worker-b"

    assert (await worker("delegate", redis_url, prefix, a, "Delegate apple")).strip() == "started"
    assert (await worker("delegate", redis_url, prefix, b, "Any news?")).strip() == "done"

    notice, child, answer = agent_requests(b)
    # B's first step was told of the task A's process ran...
    assert "<system-reminder>" in notice
    assert "apple summary" in notice
    # ...and B rebuilt A's child, whose conversation came back from the store.
    for earlier in ("Summarize apple", "apple summary", "And banana?"):
        assert earlier in child
    assert "banana summary" in answer
    assert not (a / "ws" / "users").exists()
    assert not (b / "ws" / "users").exists()
