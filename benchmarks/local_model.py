"""The local model, in-process and behind llama.cpp's server, and what the harness adds per turn.

1. **Tokens per second.** The bundled SmolLM2-135M answers the same prompt (greedy, a fixed
   number of tokens) through :class:`LocalChatModel` in this process, and through
   ``llama_cpp.server`` (started here on a free loopback port, same weights, context and
   threads) with the ``openai`` SDK streaming. Generation speed is the answer's tokens over the
   time from the request to the last token; prompt processing is timed apart, on a prompt of
   about 900 tokens with a one-token answer (the server's prompt cache is off, so each request
   is processed whole, as in-process).
2. **Harness overhead per turn.** One ``HarnessAgent.call`` against the server, against a
   direct ``openai`` SDK call that sends the very request the harness sent (system prompt,
   tools, conversation; same options), so the model's work is the same and the difference is
   the harness: hooks, workspace context, session restore and save, trace. Memory is off (its
   flush is a second model request after the turn), and the session is removed between turns,
   so the conversation does not grow between repetitions.

The machine is shared and noisy: medians of ``--reps`` repetitions, interleaved.

    .venv/bin/python benchmarks/local_model.py [--reps 9] [--tokens 64] [--turn-tokens 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai

from harness import HarnessAgent, RuntimeContext
from harness.kernel import ChatChunk, ChatResponse, Msg, TextBlock, ToolSchema
from harness.models.local import LocalChatModel, bundled_weights
from harness.models.openai import OpenAIChatModel

N_CTX = 4096
THREADS = os.cpu_count() or 1
QUESTION = "Write a short story about a lighthouse keeper."
LONG_PROMPT = "Summarize: " + "The quick brown fox jumps over the lazy dog. " * 80


@contextmanager
def llama_server() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(bundled_weights()),
        "--model_alias",
        "smollm2",
        "--n_ctx",
        str(N_CTX),
        "--n_threads",
        str(THREADS),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("llama_cpp.server did not start") from None
                time.sleep(0.2)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)


def user(text: str) -> Msg:
    return Msg(role="user", content=[TextBlock(text=text)])


# -- 1. tokens per second ---------------------------------------------------------------------


async def in_process_generation(model: LocalChatModel, tokens: int) -> float:
    start = time.perf_counter()
    final = None
    async for item in model.stream([user(QUESTION)], [], max_tokens=tokens, temperature=0.0):
        final = item
    elapsed = time.perf_counter() - start
    assert isinstance(final, ChatResponse)
    assert final.usage is not None
    return final.usage.output_tokens / elapsed


async def in_process_prompt(model: LocalChatModel) -> float:
    start = time.perf_counter()
    final = None
    async for item in model.stream([user(LONG_PROMPT)], [], max_tokens=1):
        final = item
    elapsed = time.perf_counter() - start
    assert isinstance(final, ChatResponse)
    assert final.usage is not None
    return final.usage.input_tokens / elapsed


async def server_generation(client: openai.AsyncOpenAI, tokens: int) -> float:
    start = time.perf_counter()
    stream = await client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": QUESTION}],
        max_tokens=tokens,
        temperature=0.0,
        stream=True,
    )
    produced = 0
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            produced += 1  # llama.cpp's server sends one chunk per token
    return produced / (time.perf_counter() - start)


async def server_prompt(client: openai.AsyncOpenAI) -> float:
    start = time.perf_counter()
    completion = await client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": LONG_PROMPT}], max_tokens=1
    )
    elapsed = time.perf_counter() - start
    assert completion.usage is not None
    return completion.usage.prompt_tokens / elapsed


# -- 2. the harness's overhead per turn -----------------------------------------------------------


class Recorder:
    """Wraps a model and keeps the last request sent through it."""

    def __init__(self, inner: OpenAIChatModel) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.last: tuple[list[Msg], list[ToolSchema]] | None = None

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.last = (list(messages), list(tools))
        async for item in self.inner.stream(messages, tools, **options):
            yield item


async def overhead(base_url: str, reps: int, tokens: int) -> tuple[list[float], list[float]]:
    """Per turn: the harness's call, then the same request sent directly.

    The server keeps the last prompt's state and reuses its longest common prefix, so before each
    timed harness call the previous turn's request is sent (untimed): both timed calls then
    find their whole prompt ready, and the model's work is the answer alone, the same for both.
    """
    from harness.models.openai import _to_openai_messages, _to_openai_tools

    options = {"max_tokens": tokens, "temperature": 0.0}
    inner = OpenAIChatModel("smollm2", api_key="none", base_url=base_url, options=options)
    recorder = Recorder(inner)
    client = openai.AsyncOpenAI(api_key="none", base_url=base_url)

    async def direct() -> float:
        assert recorder.last is not None
        messages, tools = recorder.last
        start = time.perf_counter()
        stream = await client.chat.completions.create(
            model="smollm2",
            messages=_to_openai_messages(messages),
            tools=_to_openai_tools(tools),
            stream=True,
            stream_options={"include_usage": True},
            max_tokens=tokens,
            temperature=0.0,
        )
        async for _ in stream:
            pass
        return time.perf_counter() - start

    def wire(recorder: Recorder) -> object:
        assert recorder.last is not None
        return _to_openai_messages(recorder.last[0])

    harness_times: list[float] = []
    direct_times: list[float] = []
    changed = 0
    with tempfile.TemporaryDirectory() as tmp:
        async with HarnessAgent(model=recorder, workspace=f"{tmp}/ws", memory=None) as agent:
            ctx = RuntimeContext(session_id="bench")
            saved = Path(tmp) / "ws" / "agents" / agent.name / "context" / "bench"
            await agent.call(QUESTION, ctx=ctx)
            for _ in range(reps):
                # Each turn starts the session anew (the session id is in the system prompt, so
                # a new id per turn would change the prompt).
                shutil.rmtree(saved)
                previous = wire(recorder)
                await direct()  # the server's state: the previous turn's prompt
                start = time.perf_counter()
                await agent.call(QUESTION, ctx=ctx)
                harness_times.append(time.perf_counter() - start)
                changed += wire(recorder) != previous
                direct_times.append(await direct())
    await inner.aclose()
    await client.close()
    if changed:
        print(f"   (the harness's request changed in {changed} of {reps} turns)")
    return harness_times, direct_times


async def main(reps: int, tokens: int, turn_tokens: int) -> None:
    local = LocalChatModel(n_ctx=N_CTX, n_threads=THREADS)
    print(f"SmolLM2-135M Q4_1, n_ctx {N_CTX}, {THREADS} threads, {reps} repetitions, medians\n")
    await in_process_generation(local, 8)  # loads the model
    with llama_server() as base_url:
        client = openai.AsyncOpenAI(api_key="none", base_url=base_url)
        await server_generation(client, 8)
        gen_local, gen_server, prompt_local, prompt_server = [], [], [], []
        for _ in range(reps):
            gen_local.append(await in_process_generation(local, tokens))
            gen_server.append(await server_generation(client, tokens))
            prompt_local.append(await in_process_prompt(local))
            prompt_server.append(await server_prompt(client))
        await client.close()
        g_local, g_server = statistics.median(gen_local), statistics.median(gen_server)
        p_local, p_server = statistics.median(prompt_local), statistics.median(prompt_server)
        print("1. tokens per second (baseline: in-process)")
        print(
            f"   generation ({tokens} tokens): in-process {g_local:6.1f}   server {g_server:6.1f}"
        )
        print(f"      server / in-process: {g_server / g_local:.2f}x")
        print(f"   prompt processing:       in-process {p_local:6.1f}  server {p_server:6.1f}")
        print(f"      server / in-process: {p_server / p_local:.2f}x\n")

        with_harness, direct = await overhead(base_url, reps, turn_tokens)
    h, d = statistics.median(with_harness), statistics.median(direct)
    print(f"2. one turn, {turn_tokens}-token answer, against the server")
    print("   (baseline: a direct openai SDK call sending the same request)")
    print(f"   direct SDK call {d * 1000:8.1f} ms")
    print(f"   HarnessAgent    {h * 1000:8.1f} ms")
    print(f"   overhead        {(h - d) * 1000:8.1f} ms per turn ({h / d:.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--tokens", type=int, default=64, help="answer length, part 1")
    parser.add_argument(
        "--turn-tokens", type=int, default=8, help="answer length, part 2 (short: less noise)"
    )
    arguments = parser.parse_args()
    asyncio.run(main(arguments.reps, arguments.tokens, arguments.turn_tokens))
