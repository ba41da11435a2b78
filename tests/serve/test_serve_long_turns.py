"""Long turns streamed through ``harness serve`` to a real model with a small window.

llama.cpp's server with SmolLM2 and a 2,048-token window (tests/_long_turns.py says why the
turns overflow it), driven with the real ``openai`` SDK, streamed as a chat client streams.
Issue 28: the server streams its turns, and streamed turns had no overflow recovery, so a
session of long turns ended in an error event. tests/e2e has the same for ``run`` and ``chat``.
"""

from __future__ import annotations

from pathlib import Path

import openai
from _served import serve_process

from _long_turns import (
    TURNS,
    assert_kept_through_a_forced_compaction,
    model_args,
    question,
    server_env,
)
from conftest import LlamaServer


async def test_serve_streams_long_turns_through_the_overflow(
    tmp_path: Path, llama_server: LlamaServer
) -> None:
    workspace = tmp_path / "served" / "ws"
    args = ["-w", str(workspace), *model_args(llama_server)]
    with serve_process(args, tmp_path / "serve.log", env=server_env(llama_server)) as (url, _):
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
            for turn in range(TURNS):
                stream = await client.chat.completions.create(
                    model="harness",
                    messages=[{"role": "user", "content": question(turn)}],
                    stream=True,
                    extra_headers={"X-Harness-Session": "long"},
                    timeout=300,
                )
                finished = [
                    choice.finish_reason
                    async for chunk in stream
                    for choice in chunk.choices
                    if choice.finish_reason
                ]
                assert finished == ["stop"], (turn, finished)
    assert_kept_through_a_forced_compaction(workspace, "long")
