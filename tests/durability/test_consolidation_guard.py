"""Loss 1: consolidation overwrote MEMORY.md with whatever the model returned.

An OpenAI-compatible server answering with ``finish_reason: "length"`` left MEMORY.md holding
the cut-off answer; ``NO_REPLY`` replaced it with that word; the user's ``max_tokens`` for
chatting also limited the consolidation. Now such answers are refused and the file stays as it
was; a rewrite that passes keeps the replaced text in the history, from which it can be
restored. The model is the real ``openai`` SDK talking to a local server over HTTP.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from _servers import OpenAIServer
from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.errors import StorageError
from harness.memory import STATE_PATH, MemoryConsolidator, MemoryHistory
from harness.memory.consolidation import refusal
from harness.models import ScriptedChatModel
from harness.models.openai import OpenAIChatModel
from harness.tools.memory import MemoryTools
from harness.workspace import WorkspaceManager

MEMORY = (
    "# Memory\n\n## Health\n- Allergic to penicillin\n\n"
    "## Work\n- Works night shifts as a nurse at St. Mary's\n- Manager is called Ortega\n"
)
"""What the user's MEMORY.md holds before the consolidation (the Work facts exist only here)."""

CUT = "# Memory\n## Health\n- Allergic to pen"
GOOD = (
    "# Memory\n\n## Health\n- Allergic to penicillin\n\n## Work\n"
    "- Nurse at St. Mary's, night shifts; manager Ortega\n\n"
    "## Family\n- Sister Ana lives in Porto\n"
)


def text_stream(text: str, finish: str) -> list[dict[str, Any]]:
    return [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]


@pytest.fixture
def server(openai_server: OpenAIServer) -> OpenAIServer:
    return openai_server


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    # The README's example: a small answer limit for chatting.
    chat = OpenAIChatModel(
        "gpt-test", api_key="sk-test", base_url=f"{server.url}/v1", options={"max_tokens": 256}
    )
    yield chat
    await chat.aclose()


@pytest.fixture
def manager(workspace: Path) -> WorkspaceManager:
    (workspace / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (workspace / "memory").mkdir()
    (workspace / "memory" / "2026-11-30.md").write_text("- Sister Ana lives in Porto\n")
    return WorkspaceManager(workspace)


@pytest.mark.parametrize(
    ("answer", "finish", "why"),
    [
        (CUT, "length", "cut by its token limit"),
        ("NO_REPLY", "stop", "'NO_REPLY', not a memory file"),
        ("   ", "stop", "blank"),
        ("# Memory\n\n## Health\n- Allergic to penicillin\n", "stop", "leaves out 2 fact(s)"),
    ],
    ids=["length", "no-reply", "blank", "drops-a-section"],
)
async def test_a_bad_answer_leaves_memory_as_it_was(
    server: OpenAIServer,
    model: OpenAIChatModel,
    manager: WorkspaceManager,
    workspace: Path,
    answer: str,
    finish: str,
    why: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.queue_stream(text_stream(answer, finish))

    result = await MemoryConsolidator(manager, model).consolidate()

    assert not result.updated
    assert result.refused
    assert why in result.reason
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
    assert not (workspace / STATE_PATH).exists()  # the same logs are merged at the next run
    assert await MemoryHistory(manager).versions() == []
    assert any("consolidation refused" in r.getMessage() and why in r.getMessage()
               for r in caplog.records)  # fmt: skip


async def test_the_consolidation_has_its_own_output_budget(
    server: OpenAIServer, model: OpenAIChatModel, manager: WorkspaceManager
) -> None:
    server.queue_stream(text_stream(GOOD, "stop"))
    server.queue_stream(text_stream(GOOD, "stop"))

    await MemoryConsolidator(manager, model).consolidate()
    (manager.root / STATE_PATH).unlink()  # the same logs are new again
    await MemoryConsolidator(manager, model, max_output_tokens=3000).consolidate()

    default, chosen = (body["max_tokens"] for body in server.bodies)
    # Not the 256 the model was given for chatting: room for all it was given, and no more.
    assert 512 + len(MEMORY) // 3 <= default <= 512 + len(MEMORY)
    assert chosen == 3000


async def test_a_good_rewrite_keeps_the_old_text_and_it_can_be_restored(
    server: OpenAIServer, model: OpenAIChatModel, manager: WorkspaceManager, workspace: Path
) -> None:
    server.queue_stream(text_stream(GOOD, "stop"))

    result = await MemoryConsolidator(manager, model).consolidate()

    assert result.updated, result.reason
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == GOOD.strip() + "\n"
    history = MemoryHistory(manager)
    (version,) = await history.versions()
    assert await history.read(version.id) == MEMORY

    saved = await history.restore(version.id)

    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
    assert saved is not None
    assert await history.read(saved) == GOOD.strip() + "\n"  # the restore kept what it replaced


async def test_a_fact_saved_into_a_section_survives_a_consolidation_that_forgets_it(
    server: OpenAIServer, model: OpenAIChatModel, manager: WorkspaceManager, workspace: Path
) -> None:
    tools = MemoryTools(manager, None)
    answer = await tools.memory_save(
        "Blood type O negative", RuntimeContext(session_id="s"), target="MEMORY.md#Health"
    )
    assert "Error" not in answer, answer
    saved = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    assert "Blood type O negative" in saved
    server.queue_stream(text_stream(GOOD, "stop"))  # written from the file before the save

    result = await MemoryConsolidator(manager, model).consolidate()

    assert result.refused
    assert "Blood type O negative" in result.reason
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == saved


async def test_the_history_keeps_the_newest_versions_only(manager: WorkspaceManager) -> None:
    times = iter(datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=i) for i in range(20))
    history = MemoryHistory(manager, keep=3, clock=lambda: next(times))

    for i in range(5):
        await history.save(f"- version {i}\n")
    await history.save("- version 4\n")  # the same text again is not a new version

    kept = [await history.read(version.id) for version in await history.versions()]
    assert kept == ["- version 4\n", "- version 3\n", "- version 2\n"]


async def test_an_unknown_or_hostile_version_is_a_clear_error(manager: WorkspaceManager) -> None:
    history = MemoryHistory(manager)
    for version in ("20990101T000000.000000Z", "../../etc/passwd", ""):
        with pytest.raises(StorageError, match=r"no saved MEMORY\.md version"):
            await history.read(version)


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        (GOOD, True),  # merged and reworded
        (MEMORY.replace("## Work", "## Job"), True),  # a section renamed
        (MEMORY + "\n- Lives in Berlin\n", True),
        (MEMORY.replace("- Manager is called Ortega\n", ""), False),
        ("# Memory\n- penicillin\n- nurse\n", False),  # a word of a fact is not the fact
    ],
)
def test_which_rewrites_keep_every_fact(answer: str, kept: bool) -> None:
    assert (refusal(MEMORY, answer) is None) is kept


def test_a_stale_fact_may_be_updated() -> None:
    assert refusal("- Lives in Paris\n", "- Lives in Berlin (moved from Paris)\n") is None
    assert refusal("- Lives in Paris\n", "- Lives in Berlin\n") is None


async def test_a_refused_consolidation_says_why_in_the_trace(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    model = ScriptedChatModel(
        [
            {
                "match": "Extract NEW memories",
                "text": "- Sister Ana lives in Porto",
                "repeat": True,
            },
            {"match": "New daily log entries to merge", "text": "NO_REPLY", "repeat": True},
            {"text": "hi", "repeat": True},
        ]
    )
    memory = MemoryConfig(consolidation_min_gap=timedelta(0), index=False)
    ctx = RuntimeContext(session_id="traced")
    async with HarnessAgent(model=model, workspace=workspace, memory=memory) as agent:
        await agent.call("hello", ctx=ctx)
        trace = workspace / "agents" / "harness" / "traces" / "traced.jsonl"
        for _ in range(100):  # the consolidation runs on the memory worker, after the call
            records = [json.loads(line) for line in trace.read_text().splitlines()]
            found = [r for r in records if r["event"] == "memory_consolidation"]
            if found:
                break
            await asyncio.sleep(0.05)

    (record,) = found
    assert record["refused"] is True
    assert record["updated"] is False
    assert "'NO_REPLY', not a memory file" in record["reason"]
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
