"""Twelve long turns against a real model with a small window: recovery that always fits.

Issue 41: against llama.cpp's server (SmolLM2, a 2,048-token window) with the default tools
offered, a session of long turns ended in ``ContextOverflowError`` in three runs of five: the
forced compaction left the request over the window, the tightened summary (its header and up
to 1,200 characters of body) still 15 tokens over, and recovery gave up, because the system
prompt never shrinks and recovery guessed instead of using the sizes the server states. What
the prompt held depended on when background memory work landed in MEMORY.md, which the system
prompt shows.

Here MEMORY.md holds what earlier sessions left (about 290 tokens), so the system prompt takes
some 1,570 of the 2,048 tokens, and each turn carries some 400: from the second turn on, every
step overflows and only the summary can give way. The old recovery kept the summary's header
and the model's words (``max_tokens`` 64) and left the retry over the window: it failed at the
second turn in both runs tried (2,070 and 2,114 tokens of 2,048). Sized from the server's
numbers, the summary is one line (the summarizer is not even asked: there is no room for what
it would write) and every turn is answered. Flush and consolidation are off, and so is the
compaction's flush of what it summarizes: they would only add model calls to the test's cost
(the compaction's flush was one at every turn, some 500 tokens to read and up to 64 to write,
as much as the turn's own retry) and change MEMORY.md or the daily log under it.

The agent is otherwise the one ``harness run`` builds without ``--context-window`` (compaction
on with its triggers out of reach, the default tools, workspace context); what the model says
is anybody's guess, so the test checks that every turn was answered and kept.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from _outcomes import answer
from conftest import LlamaServer
from harness import CompactionConfig, HarnessAgent, MemoryConfig
from harness.context import RuntimeContext
from harness.memory.transcript import sessions_dir
from harness.models.openai import OpenAIChatModel

TURNS = 12
FILLER = " ".join(f"fact{n} is about harbour cranes and tides." for n in range(40))
MEMORY = "# Memory\n\n" + "".join(
    f"- The harbour crane {n} lifts containers at high tide.\n" for n in range(17)
)


def question(turn: int) -> str:
    return f"Note {turn}: {FILLER} Reply with OK."


@pytest.fixture
async def model(llama_server: LlamaServer) -> AsyncIterator[OpenAIChatModel]:
    built = OpenAIChatModel(
        llama_server.model,
        api_key="none",
        base_url=llama_server.base_url,
        options={"max_tokens": 64, "seed": 3},
    )
    yield built
    await built.aclose()


async def test_twelve_long_turns_with_the_default_tools_end_without_an_overflow(
    tmp_path: Path, model: OpenAIChatModel
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    ctx = RuntimeContext(session_id="long")
    async with HarnessAgent(
        model=model,
        workspace=workspace,
        compaction=CompactionConfig(flush_before=False),
        memory=MemoryConfig(flush=False, auto_consolidate=False),
        approvals=(),
    ) as agent:
        assert len(agent.delegate.toolkit.names) >= 15  # the default tools are offered
        for turn in range(TURNS):
            answer(await agent.call(question(turn), ctx=ctx))  # an overflow is raised here

    sessions = workspace / sessions_dir("harness")
    transcript = [
        record
        for line in (sessions / "long.jsonl").read_text(encoding="utf-8").splitlines()
        if (record := json.loads(line))["type"] == "message"
    ]
    asked = [m["content"] for m in transcript if m["role"] == "user"]
    assert asked == [question(turn) for turn in range(TURNS)]
    assert sum(m["role"] == "assistant" for m in transcript) >= TURNS
    compactions = [
        json.loads(line)
        for line in (sessions / "long.compactions.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert sum(record["forced"] for record in compactions) >= TURNS // 2, compactions
