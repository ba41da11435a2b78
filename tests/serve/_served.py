"""A served harness for the tests: uvicorn on a free loopback port, in-process or as a process.

:func:`served` runs :func:`harness.serve.create_app` under a real uvicorn server in a thread of
its own (its own event loop), so a test talks to it over real sockets with any client, blocking
or async. The agent is built in that loop, by the app's startup, from ``make_agent``.

:func:`serve_process` starts ``harness serve`` as a separate process, as an operator would.

:func:`sse_events` parses a ``text/event-stream`` body the way a browser's EventSource does.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from _processes import free_port, running_server
from harness import HarnessAgent
from harness.models import ScriptedChatModel
from harness.serve import ServeConfig, create_app


@dataclass(frozen=True)
class Served:
    """A running server: its root URL."""

    url: str


def scripted_agent(
    workspace: Path, turns: list[dict[str, Any]], **options: Any
) -> Callable[[], contextlib.AbstractAsyncContextManager[HarnessAgent]]:
    """An opener of a HarnessAgent on ``workspace`` answering with ``turns``."""

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        options.setdefault("memory", None)
        agent = HarnessAgent(model=ScriptedChatModel(turns), workspace=workspace, **options)
        async with agent:
            yield agent

    return opened


@contextlib.contextmanager
def served(
    make_agent: Callable[[], contextlib.AbstractAsyncContextManager[HarnessAgent]],
    config: ServeConfig | None = None,
    *,
    grace: int = 5,
) -> Iterator[Served]:
    """Serve the agent on a free port for the block; stop the server (graceful) after it."""
    port = free_port()
    app = create_app(make_agent, config or ServeConfig())
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=grace,
            lifespan="on",
        )
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the served app did not start")
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def serve_process(args: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[Any]:
    """``harness serve ARGS --port P`` in its own process; yields (url, process)."""
    port = free_port()
    command = [str(Path(sys.executable).with_name("harness")), "serve", *args, "--port", str(port)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    url = f"http://127.0.0.1:{port}"
    with running_server(process, lambda: _healthy(url), "harness serve", timeout=30, log=log):
        yield url, process


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) of each event in an SSE body; comments are skipped."""
    name, data = "message", list[str]()
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", list[str]()
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].lstrip())
