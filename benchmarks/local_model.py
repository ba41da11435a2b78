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

3. **Builds of llama.cpp.** The same generation and prompt, each in a process of its own, with
   each build named by ``--builds``: ``portable`` (what ``scripts/install-local`` installs, the
   baseline), ``native`` (``-march=native``: every instruction of this CPU) and ``avx512``
   (portable plus AVX-512 and AVX-VNNI: native without AMX), each
   fetched or built by ``scripts/install-local --print-wheel`` (a build takes minutes, once)
   and installed into a directory of its own. A build that dies on this CPU is reported as
   such and left out of "the fastest build that runs here". Also the cost of the check that
   the build runs on this CPU (:mod:`harness.models._native_check`) on a load already checked.

The machine is shared and noisy: medians of ``--reps`` repetitions, interleaved.

    .venv/bin/python benchmarks/local_model.py [--reps 9] [--tokens 64] [--turn-tokens 8]
        [--parts 1,2,3] [--builds portable,native,avx512]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from harness.models._native_check import check_runs_here, signal_name
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


# -- 3. builds of llama.cpp ---------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent

MEASURE = """
import json, sys, time
import llama_cpp
from llama_cpp import Llama
path, n_ctx, threads, tokens, question, long_prompt = sys.argv[1:]
# ChatML, as the harness sends it: a bare question gets an empty answer from SmolLM2.
question = f"<|im_start|>user\\n{question}<|im_end|>\\n<|im_start|>assistant\\n"
start = time.perf_counter()
llama = Llama(model_path=path, n_ctx=int(n_ctx), n_threads=int(threads), verbose=False)
load = time.perf_counter() - start
llama.create_completion(question, max_tokens=8, temperature=0.0)  # warm
llama.reset()
start = time.perf_counter()
out = llama.create_completion(question, max_tokens=int(tokens), temperature=0.0)
assert out["usage"]["completion_tokens"] > 0, out["usage"]
generation = out["usage"]["completion_tokens"] / (time.perf_counter() - start)
llama.reset()
start = time.perf_counter()
out = llama.create_completion(long_prompt, max_tokens=1)
prompt = out["usage"]["prompt_tokens"] / (time.perf_counter() - start)
llama.close()
result = {"generation": generation, "prompt": prompt, "load": load, "module": llama_cpp.__file__}
print(json.dumps(result))
"""


BUILDS = {
    "portable": ((), ""),
    "native": (("--native",), ""),
    # The native build without AMX (whose code dies on some CPUs that advertise it).
    "avx512": (
        (),
        "-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON "
        "-DGGML_AVX_VNNI=ON",
    ),
}
"""The builds part 3 knows: scripts/install-local's options and extra CMake options of each."""


def installed_build(name: str, target: Path) -> Path:
    """Build ``name``'s wheel (on first use) and install it into ``target``, for PYTHONPATH."""
    options, cmake_args = BUILDS[name]
    wheel = subprocess.run(
        [str(ROOT / "scripts" / "install-local"), "--print-wheel", *options],
        env={**os.environ, "HARNESS_LLAMA_CMAKE_ARGS": cmake_args},
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout.strip()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
         wheel],
        check=True,
    )  # fmt: skip
    return target


def measure_build(site: Path, tokens: int) -> dict[str, Any] | str:
    """Tokens per second of the build in ``site``, or how its process died."""
    child = subprocess.run(
        [sys.executable, "-c", MEASURE, str(bundled_weights()), str(N_CTX), str(THREADS),
         str(tokens), QUESTION, LONG_PROMPT],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if child.returncode < 0:
        return f"dies of {signal_name(-child.returncode)} on this CPU"
    if child.returncode:
        return f"failed: {child.stderr.strip().splitlines()[-1:]}"
    result: dict[str, Any] = json.loads(child.stdout)
    assert str(result["module"]).startswith(str(site)), result  # that very build ran
    return result


def builds(profiles: list[str], reps: int, tokens: int) -> None:
    print("3. builds of llama.cpp, each in a process of its own (baseline: portable)")
    with tempfile.TemporaryDirectory() as tmp:
        sites = {name: installed_build(name, Path(tmp) / name) for name in profiles}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in profiles}
        died: dict[str, str] = {}
        for _ in range(reps):
            for name, site in sites.items():
                if name in died:
                    continue
                outcome = measure_build(site, tokens)
                if isinstance(outcome, str):
                    died[name] = outcome
                else:
                    runs[name].append(outcome)
    medians = {
        name: (
            statistics.median(run["generation"] for run in results),
            statistics.median(run["prompt"] for run in results),
        )
        for name, results in runs.items()
        if name not in died
    }
    base = medians.get("portable")
    for name in profiles:
        if name in died:
            print(f"   {name:9} {died[name]}")
            continue
        gen, prompt = medians[name]
        ratio = f"  ({gen / base[0]:.2f}x, {prompt / base[1]:.2f}x)" if base else ""
        print(f"   {name:9} generation {gen:6.1f} tok/s   prompt {prompt:6.1f} tok/s{ratio}")
    if base and medians:
        fastest = max(medians, key=lambda name: medians[name][0])
        gen, prompt = medians[fastest]
        print(
            f"   fastest build that runs here: {fastest}; portable / {fastest}: generation "
            f"{base[0] / gen:.2f}x, prompt {base[1] / prompt:.2f}x"
        )
    weights = bundled_weights()
    check_runs_here(weights)  # the first check, if this build was never checked
    times = []
    for _ in range(1000):
        start = time.perf_counter()
        check_runs_here(weights)
        times.append(time.perf_counter() - start)
    check = statistics.median(times)
    load = statistics.median(run["load"] for run in runs["portable"]) if base else float("nan")
    print(
        f"   the CPU check of a load already checked: {check * 1e6:.0f} µs "
        f"(loading the model: {load * 1000:.0f} ms; the check adds {check / load:.2%})"
    )


async def tokens_per_second(base_url: str, reps: int, tokens: int) -> None:
    local = LocalChatModel(n_ctx=N_CTX, n_threads=THREADS)
    await in_process_generation(local, 8)  # loads the model
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
    print(f"   generation ({tokens} tokens): in-process {g_local:6.1f}   server {g_server:6.1f}")
    print(f"      server / in-process: {g_server / g_local:.2f}x")
    print(f"   prompt processing:       in-process {p_local:6.1f}  server {p_server:6.1f}")
    print(f"      server / in-process: {p_server / p_local:.2f}x\n")


async def main(
    reps: int, tokens: int, turn_tokens: int, parts: set[str], profiles: list[str]
) -> None:
    print(f"SmolLM2-135M Q4_1, n_ctx {N_CTX}, {THREADS} threads, {reps} repetitions, medians\n")
    if "3" in parts and profiles:
        builds(profiles, reps, tokens)
        print()
    if not parts & {"1", "2"}:
        return
    with llama_server() as base_url:
        if "1" in parts:
            await tokens_per_second(base_url, reps, tokens)
        if "2" not in parts:
            return
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
    parser.add_argument("--parts", default="1,2,3", help="which parts to run, e.g. 3")
    parser.add_argument(
        "--builds",
        default=",".join(BUILDS),
        help=f"part 3: the builds, of {', '.join(BUILDS)}; portable is the baseline",
    )
    arguments = parser.parse_args()
    asyncio.run(
        main(
            arguments.reps,
            arguments.tokens,
            arguments.turn_tokens,
            set(arguments.parts.split(",")),
            [name for name in arguments.builds.split(",") if name],
        )
    )
