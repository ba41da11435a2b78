"""What serving an agent over HTTP costs, against calling the same agent in-process, in one run.

In parts 1 and 2 the served agent runs under uvicorn in a process of its own (this script
started again with ``--worker``), built as the in-process one is: a HarnessAgent on a fresh
workspace, memory off, answering from a scripted model that replies at once with the same short
text and no tool call. So the figures are the server's and the client's own cost: HTTP, JSON,
SSE framing, the session gate, the response, the client's parsing.

1. **Throughput.** N clients at once (1, 10, 50), each on a session of its own, each sending
   its turns one after another; turns per second over a round, median of the rounds. Through
   ``POST /v1/sessions/{id}/turns`` (SSE, read to its end) and through non-streamed
   ``POST /v1/chat/completions``. Baseline: N concurrent ``HarnessAgent.call`` on distinct
   sessions in this process. The served figures use two processes (client and server), so two
   cores; the baseline one.
2. **Per-turn overhead.** One client, one turn at a time: a served turn's latency as the
   client sees it (request sent to the body read) against an in-process ``HarnessAgent.call``
   of the same scripted turn on a session of the same length. The three kinds alternate turn by
   turn, so a noisy machine slows them alike; medians, served minus in-process = overhead.
3. **What the SDK clients get from a default server.** ``harness serve`` started as an operator
   would, in a process of its own, with its defaults: memory on (so after each turn the agent
   flushes it, asking the model, and may consolidate), no keys on loopback, one request log
   line per request. The script answers the user's turns with the same short text and the
   flush (and consolidation) with ``NO_REPLY``, nothing to keep. One client, one turn at a
   time, each kind on sessions of its own, the kinds alternating turn by turn, each request
   holding only the new user message: the ``openai`` SDK's ``AsyncOpenAI``
   ``chat.completions.create`` whole and streamed (to the last chunk, and to the first text
   chunk), its ``responses.create``, and LangChain's ``ChatOpenAI.ainvoke``. Baseline:
   ``HarnessAgent.call`` in this process, built as ``harness serve`` builds its agent
   (``opened_agent``, memory on) on a workspace of its own. After every turn an untimed pause
   lets the turn's background memory work finish before the next turn starts, as a person's
   reading time would: the in-process agent is waited for (``MemoryMaintenance.settled``), the
   server is given ``--pause`` seconds.

    .venv/bin/python benchmarks/serve.py [--quick] [--part 3] [--rounds 3] [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
from langchain_openai import ChatOpenAI

from harness import HarnessAgent, RuntimeContext
from harness.cli._agent import AgentArgs, opened_agent
from harness.kernel import Finished
from harness.models import ScriptedChatModel

REPLY = "Noted, thank you."
SCRIPT: dict[str, Any] = {"turns": [{"text": REPLY, "repeat": True}]}
MEMORY_SCRIPT: dict[str, Any] = {
    "turns": [  # the harness's own requests first (docs/model-scripts.md), then the user's turns
        {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
        # Not asked here (a flush that keeps nothing leaves no daily-log entry to merge); if
        # it were, NO_REPLY leaves MEMORY.md as it was.
        {"match": "New daily log entries to merge", "text": "NO_REPLY", "repeat": True},
        {"text": REPLY, "repeat": True},
    ]
}
CLIENTS = (1, 10, 50)
LABELS = {"SSE": "served, SSE turns endpoint", "chat": "served, chat/completions"}
MIN_TURNS_PER_CLIENT = 5  # every client of a round sends at least this many turns

Turn = Callable[[str, str], Awaitable[None]]
"""Runs one turn: (session id, input text)."""

SessionTurn = Callable[[str], Awaitable[None]]
"""Runs one turn of a session opened before: (input text)."""

Opener = Callable[[str], SessionTurn]
"""A client on the session of this id (part 3): what runs its turns."""

CLIENT_LABELS = {
    "chat": "openai chat.completions.create",
    "stream": "  the same streamed, to the last chunk",
    "first": "  the same streamed, to the 1st text chunk",
    "responses": "openai responses.create",
    "langchain": "LangChain ChatOpenAI.ainvoke (chat)",
}


# -- the server: this script again, in a process of its own ---------------------------------------


def agent_of(workspace: Path, script: Path) -> HarnessAgent:
    """The agent both sides run: scripted, memory off, on its own workspace."""
    return HarnessAgent(model=ScriptedChatModel.from_file(script), workspace=workspace, memory=None)


def run_worker(port: int, workspace: Path, script: Path) -> None:
    """Serve the agent on ``port`` until SIGTERM (``--worker``)."""
    import uvicorn

    from harness.serve import ServeConfig, create_app

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with agent_of(workspace, script) as agent:
            yield agent

    app = create_app(opened, ServeConfig(session_wait=30.0))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def server(workspace: Path, script: Path, log: Path) -> Iterator[str]:
    """The served agent's root URL, for the block; the server process is stopped after it."""
    port = free_port()
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        str(port),
        "--workspace",
        str(workspace),
        "--script",
        str(script),
    ]
    with running(command, port, log) as url:
        yield url


@contextlib.contextmanager
def harness_serve(workspace: Path, script: Path, log: Path) -> Iterator[str]:
    """``harness serve`` with its defaults on ``workspace``, as an operator starts it (part 3)."""
    port = free_port()
    command = [
        str(Path(sys.executable).with_name("harness")),
        "serve",
        "--model",
        f"scripted:{script}",
        "--workspace",
        str(workspace),
        "--port",
        str(port),
    ]
    with running(command, port, log) as url:
        yield url


@contextlib.contextmanager
def running(command: list[str], port: int, log: Path) -> Iterator[str]:
    """The root URL of the server ``command`` starts on ``port``; stopped (SIGTERM) after."""
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- one turn, three ways -------------------------------------------------------------------------


def sse_turn(http: httpx2.AsyncClient, url: str) -> Turn:
    async def turn(session: str, text: str) -> None:
        async with http.stream(
            "POST", f"{url}/v1/sessions/{session}/turns", json={"input": text}
        ) as response:
            if response.status_code != 200:
                raise RuntimeError(f"{session}: {response.status_code} {await response.aread()!r}")
            events = [line async for line in response.aiter_lines() if line.startswith("event:")]
        if events[-1] != "event: turn.completed":
            raise RuntimeError(f"{session}: the turn did not complete: {events}")

    return turn


def chat_turn(http: httpx2.AsyncClient, url: str) -> Turn:
    async def turn(session: str, text: str) -> None:
        body = {"model": "harness", "messages": [{"role": "user", "content": text}]}
        response = await http.post(
            f"{url}/v1/chat/completions", json=body, headers={"X-Harness-Session": session}
        )
        if response.status_code != 200:
            raise RuntimeError(f"{session}: {response.status_code} {response.text}")
        if response.json()["choices"][0]["message"]["content"] != REPLY:
            raise RuntimeError(f"{session}: unexpected reply {response.text}")

    return turn


def local_turn(agent: HarnessAgent) -> Turn:
    async def turn(session: str, text: str) -> None:
        outcome = await agent.call(text, ctx=RuntimeContext(session_id=session))
        if not isinstance(outcome, Finished) or outcome.reply.text != REPLY:
            raise RuntimeError(f"{session}: unexpected outcome {outcome!r}")

    return turn


# -- part 3: one turn through each SDK client ----------------------------------------------------


def _check(session: str, text: str | None) -> None:
    if text != REPLY:
        raise RuntimeError(f"{session}: unexpected reply {text!r}")


def local_session(agent: HarnessAgent) -> Opener:
    def opened(session: str) -> SessionTurn:
        async def turn(text: str) -> None:
            outcome = await agent.call(text, ctx=RuntimeContext(session_id=session))
            _check(session, outcome.reply.text if isinstance(outcome, Finished) else None)

        return turn

    return opened


def chat_session(client: openai.AsyncOpenAI) -> Opener:
    def opened(session: str) -> SessionTurn:
        async def turn(text: str) -> None:
            reply = await client.chat.completions.create(
                model="harness",
                messages=[{"role": "user", "content": text}],
                extra_headers={"X-Harness-Session": session},
            )
            _check(session, reply.choices[0].message.content)

        return turn

    return opened


def stream_session(client: openai.AsyncOpenAI, first: list[float]) -> Opener:
    """Streamed chat completions; each turn's time to its first text chunk goes to ``first``."""

    def opened(session: str) -> SessionTurn:
        async def turn(text: str) -> None:
            start = time.perf_counter()
            stream = await client.chat.completions.create(
                model="harness",
                messages=[{"role": "user", "content": text}],
                extra_headers={"X-Harness-Session": session},
                stream=True,
            )
            parts: list[str] = []
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    if not parts:
                        first.append((time.perf_counter() - start) * 1000)
                    parts.append(chunk.choices[0].delta.content)
            _check(session, "".join(parts))

        return turn

    return opened


def responses_session(client: openai.AsyncOpenAI) -> Opener:
    def opened(session: str) -> SessionTurn:
        async def turn(text: str) -> None:
            reply = await client.responses.create(model="harness", input=text, conversation=session)
            _check(session, reply.output_text)

        return turn

    return opened


def langchain_session(url: str) -> Opener:
    """A ``ChatOpenAI`` per session, which its ``default_headers`` name, as a LangChain app has."""

    def opened(session: str) -> SessionTurn:
        chat = ChatOpenAI(
            base_url=f"{url}/v1",
            api_key="unused",  # type: ignore[arg-type]
            model="harness",
            default_headers={"X-Harness-Session": session},
            max_retries=0,
        )

        async def turn(text: str) -> None:
            _check(session, (await chat.ainvoke(text)).text)

        return turn

    return opened


# -- the measurements -----------------------------------------------------------------------------


async def round_rate(turn: Turn, tag: str, clients: int, turns: int) -> tuple[float, list[float]]:
    """(turns/s, per-turn latencies in ms) of ``clients`` concurrent clients, ``turns`` in all."""
    each = max(MIN_TURNS_PER_CLIENT, turns // clients)
    latencies: list[float] = []

    async def client(number: int) -> None:
        for i in range(each):
            start = time.perf_counter()
            await turn(f"{tag}-c{number}", f"client {number} turn {i}")
            latencies.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    return clients * each / (time.perf_counter() - start), latencies


Rates = dict[str, dict[int, tuple[list[float], list[float]]]]
"""kind -> clients -> (turns/s of each round, latencies in ms of every turn)."""


async def throughput(kinds: dict[str, Turn], rounds: int, turns: int) -> Rates:
    rates: Rates = {kind: {n: ([], []) for n in CLIENTS} for kind in kinds}
    for r in range(rounds):
        for n in CLIENTS:
            for kind, turn in kinds.items():  # the kinds take turns, round after round
                rate, latencies = await round_rate(turn, f"{kind}-r{r}-n{n}", n, turns)
                rates[kind][n][0].append(rate)
                rates[kind][n][1].extend(latencies)
    return rates


async def overhead(kinds: dict[str, Turn], sessions: int, turns: int) -> dict[str, list[float]]:
    """Per-turn latencies (ms), one turn at a time; the kinds alternate turn by turn."""
    timings: dict[str, list[float]] = {kind: [] for kind in kinds}
    for s in range(sessions):
        for i in range(turns):
            for kind, turn in kinds.items():
                start = time.perf_counter()
                await turn(f"{kind}-latency-{s}", f"session {s} turn {i}")
                timings[kind].append((time.perf_counter() - start) * 1000)
    return timings


async def client_latency(
    openers: dict[str, Opener],
    settle: dict[str, Callable[[], Awaitable[None]]],
    sessions: int,
    turns: int,
    tag: str,
) -> dict[str, list[float]]:
    """Per-turn latencies (ms) of part 3: one turn at a time, the kinds alternating turn by turn.

    Each kind's session is opened (its client built) before its first timed turn; after each
    turn, untimed, ``settle[kind]`` lets the turn's background memory work finish.
    """
    timings: dict[str, list[float]] = {kind: [] for kind in openers}
    for s in range(sessions):
        opened = {kind: open_(f"{tag}{kind}-{s}") for kind, open_ in openers.items()}
        for i in range(turns):
            for kind, turn in opened.items():
                start = time.perf_counter()
                await turn(f"session {s} turn {i}")
                timings[kind].append((time.perf_counter() - start) * 1000)
                await settle[kind]()
    return timings


ClientTimings = tuple[dict[str, list[float]], list[float]]
"""Part 3: (kind -> per-turn ms, the in-process agent's background memory work after each turn)."""


async def measure_clients(args: argparse.Namespace) -> ClientTimings:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = root / "script.json"
        script.write_text(json.dumps(MEMORY_SCRIPT))
        for name in ("served", "local"):  # a workspace keeps its index and leases beside it
            (root / name).mkdir()
        local = AgentArgs(workspace=root / "local" / "workspace", model=f"scripted:{script}")
        log = root / "serve.log"
        with harness_serve(root / "served" / "workspace", script, log) as url:
            async with (
                openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as sdk,
                opened_agent(local) as agent,
            ):
                maintenance = agent.maintenance
                if maintenance is None:
                    raise RuntimeError("the in-process agent has no memory: not the served one")
                flushes: list[float] = []

                async def settled() -> None:
                    start = time.perf_counter()
                    await maintenance.settled()
                    flushes.append((time.perf_counter() - start) * 1000)

                async def pause() -> None:
                    await asyncio.sleep(args.pause)

                first: list[float] = []
                openers: dict[str, Opener] = {
                    "in-process": local_session(agent),
                    "chat": chat_session(sdk),
                    "stream": stream_session(sdk, first),
                    "responses": responses_session(sdk),
                    "langchain": langchain_session(url),
                }
                settle: dict[str, Callable[[], Awaitable[None]]] = {k: pause for k in openers}
                settle["in-process"] = settled
                await client_latency(openers, settle, 1, 10, "warm-")  # imports, connections
                flushes.clear()
                first.clear()
                sessions, turns = args.client_sessions, args.client_turns
                timings = await client_latency(openers, settle, sessions, turns, "")
                timings["first"] = first
        logged = log.read_text()  # a flush the script failed to answer is a warning there
        if any(word in logged for word in ("Traceback", "WARNING", "ERROR", "failed")):
            raise RuntimeError(f"the server logged a failure:\n{logged}")
    return timings, flushes


async def measure(args: argparse.Namespace) -> tuple[Rates, dict[str, list[float]]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = root / "script.json"
        script.write_text(json.dumps(SCRIPT))
        for name in ("served", "local"):
            (root / name).mkdir()
        limits = httpx2.Limits(max_connections=100, max_keepalive_connections=100)
        with server(root / "served", script, root / "server.log") as url:
            async with (
                httpx2.AsyncClient(limits=limits, timeout=httpx2.Timeout(120.0)) as http,
                agent_of(root / "local", script) as agent,
            ):
                kinds = {
                    "in-process": local_turn(agent),
                    "SSE": sse_turn(http, url),
                    "chat": chat_turn(http, url),
                }
                await overhead(kinds, 1, 20)  # warm up: imports, caches, connections
                timings: dict[str, list[float]] = {}
                if 2 in args.part:
                    timings = await overhead(kinds, args.sessions, args.session_turns)
                rates: Rates = {}
                if 1 in args.part:
                    rates = await throughput(kinds, args.rounds, args.turns)
    return rates, timings


def report(args: argparse.Namespace, rates: Rates, timings: dict[str, list[float]]) -> None:
    cores = os.cpu_count()
    print(
        "served turns vs in-process HarnessAgent.call: scripted model (answers at once, no tool "
        f"call), memory off, server in its own process, {cores} cores"
    )
    if rates:
        print()
        report_throughput(args, rates)
    if timings:
        print()
        report_overhead(args, timings)


def report_throughput(args: argparse.Namespace, rates: Rates) -> None:
    print(
        f"1. throughput in turns/s, median of {args.rounds} round(s) of >= {args.turns} turns, "
        "every client on its own session; and each turn's latency (p50, ms) as its client saw it"
    )
    print(
        f"{'clients':>7s}  {'in-process (baseline)':>21s}  {'SSE turns':>9s} {'x base':>6s}"
        f"  {'chat/completions':>16s} {'x base':>6s}  {'p50 ms in/SSE/chat':>20s}"
    )
    for n in CLIENTS:
        base = statistics.median(rates["in-process"][n][0])
        sse = statistics.median(rates["SSE"][n][0])
        chat = statistics.median(rates["chat"][n][0])
        p50 = "/".join(f"{statistics.median(rates[k][n][1]):.1f}" for k in rates)
        print(
            f"{n:7d}  {base:21.0f}  {sse:9.0f} {sse / base:5.2f}x  {chat:16.0f} "
            f"{chat / base:5.2f}x  {p50:>20s}"
        )


def report_overhead(args: argparse.Namespace, timings: dict[str, list[float]]) -> None:
    count = len(timings["in-process"])
    print(
        f"2. per-turn latency, one client, one turn at a time ({count} turns of each kind on "
        f"{args.sessions} sessions of {args.session_turns} turns; medians)"
    )
    base = statistics.median(timings["in-process"])
    print(f"{'':34s} {'ms/turn':>8s} {'overhead ms':>12s} {'ratio':>7s}")
    print(f"{'in-process HarnessAgent.call':34s} {base:8.3f} {'(baseline)':>12s}")
    for kind, label in LABELS.items():
        served = statistics.median(timings[kind])
        print(f"{label:34s} {served:8.3f} {served - base:12.3f} {served / base:6.2f}x")


def report_clients(
    args: argparse.Namespace, timings: dict[str, list[float]], flushes: list[float]
) -> None:
    count = len(timings["in-process"])
    print(
        "3. what the SDK clients get from a default `harness serve` (memory on, no keys, "
        f"loopback) in its own process, scripted model, {os.cpu_count()} cores"
    )
    print(
        f"   one client, one turn at a time ({count} turns of each kind on {args.client_sessions} "
        f"sessions of {args.client_turns} turns, kinds alternating; medians); after each turn, "
        f"untimed, the server gets {args.pause * 1000:.0f} ms for its memory flush, the "
        f"in-process agent is waited for (its flush took {statistics.median(flushes):.1f} ms)"
    )
    base = statistics.median(timings["in-process"])
    print(f"{'':44s} {'ms/turn':>8s} {'overhead ms':>12s} {'ratio':>7s}")
    print(f"{'in-process HarnessAgent.call, memory on':44s} {base:8.3f} {'(baseline)':>12s}")
    for kind, label in CLIENT_LABELS.items():
        served = statistics.median(timings[kind])
        print(f"{label:44s} {served:8.3f} {served - base:12.3f} {served / base:6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a short run: fewer turns and rounds")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds per figure")
    parser.add_argument("--turns", type=int, default=200, help="turns per throughput round")
    parser.add_argument("--sessions", type=int, default=10, help="sessions of the latency part")
    parser.add_argument("--session-turns", type=int, default=20, help="turns per such session")
    parser.add_argument(
        "--part",
        type=int,
        choices=(1, 2, 3),
        action="append",
        help="run only this part (repeatable); all three by default",
    )
    parser.add_argument("--client-sessions", type=int, default=10, help="sessions of part 3")
    parser.add_argument("--client-turns", type=int, default=10, help="turns per such session")
    parser.add_argument(
        "--pause", type=float, default=0.05, help="seconds the server gets after each part-3 turn"
    )
    parser.add_argument("--worker", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--workspace", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--script", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        run_worker(args.worker, args.workspace, args.script)
        return
    args.part = set(args.part or (1, 2, 3))
    if args.quick:
        args.rounds, args.turns, args.sessions, args.session_turns = 1, 50, 3, 10
        args.client_sessions, args.client_turns = 3, 5
    if args.part & {1, 2}:
        rates, timings = asyncio.run(measure(args))
        report(args, rates, timings)
    if 3 in args.part:
        if args.part & {1, 2}:
            print()
        client_timings, flushes = asyncio.run(measure_clients(args))
        report_clients(args, client_timings, flushes)


if __name__ == "__main__":
    main()
