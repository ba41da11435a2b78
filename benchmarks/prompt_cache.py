"""How much of the prompt the provider's cache serves, old layout against new, in the same run.

"Before" is the old layout, ``WorkspaceContextConfig(layout="legacy", memory_refresh="step")``
(the session id and the date at the start of the workspace section, MEMORY.md re-injected into
the system prompt whenever it changes), with the adapters' caching off
(``AnthropicChatModel(prompt_caching=False)``, ``OpenAIChatModel(prompt_cache_key=False)``).
"After" is every default: the stable-first layout, one memory snapshot per session (changes
reach the model as a note at the tail), Anthropic ``cache_control`` breakpoints, and OpenAI's
``prompt_cache_key`` as the adapter decides by default (sent to api.openai.com only, so not to
the local server; one more OpenAI run passes ``prompt_cache_key=True`` to show the key).

1. **Fake providers.** One scripted session of 20 turns (39 model requests) with tool calls
   (``list_files``, ``read_file``, ``grep_files``, ``write_file``, ``edit_file``, ``glob_files``,
   ``memory_search``; ``memory_save`` into the daily log at turn 6 and
   ``memory_save(target="MEMORY.md#Preferences")`` at turn 11; two calls in one step at turn
   16), one consolidation of the user's memory after turn 13 (the production path,
   ``MemoryMaintenance.request_consolidation``, which rewrites MEMORY.md), then a second session
   of the same user (3 turns, 4 requests). It runs through :class:`HarnessAgent` and the real
   ``anthropic`` and ``openai`` SDKs (:class:`AnthropicChatModel`, :class:`OpenAIChatModel`)
   against local HTTP servers (:mod:`_cache_servers`) that answer from the script, stream like
   the real APIs and account for caching by each provider's published rules. Anthropic: entries
   are written only at ``cache_control`` breakpoints (at most four a request, else HTTP 400) whose
   prefix has at least 1,024 tokens; a request reads the longest cached prefix ending at one of
   its breakpoints or at one of the 20 block boundaries before one (prefix order: tools, system,
   messages); entries live 5 minutes from their last use. OpenAI: the cached tokens are the
   longest common prefix (tools, then messages) with any earlier request, from 1,024 tokens on,
   in steps of 128. Tokens are the servers' own deterministic count (words and punctuation of a
   canonical serialization of each block, :func:`_cache_servers.tokens`), not a provider's
   tokenizer: the figures are shares and ratios, not bills, and they move by a few tokens from
   run to run (timestamps and timings in the transcripts that grep and memory_search read).
   Each protocol and layout gets a fresh server (an empty cache) and a fresh workspace.

   The figure is the share of the agent's input tokens served from cache: cache reads over
   whole prompts, summed over a session's requests. The consolidation's request goes to the same
   server (through the agent's own model, so it meets the same cache) but is counted apart, in
   neither session. The per-turn memory flush is off in both layouts (``MemoryConfig(flush=False,
   auto_consolidate=False)``): it is one more model request after every turn, with a prompt of its
   own, the same in both layouts; the one consolidation is requested explicitly instead.

   Also printed: for the second session's first request, the tokens it read from cache and the
   tokens that precede the per-user section (the tools and the system blocks before the first
   block holding anything of the user's or the session's: the user id, a line of their
   MEMORY.md, the session id), counted as its server counts them, next to the number of blocks
   the harness marks as shared (``CACHE_PREFIX_BLOCKS``); whether Harness's own ``Usage`` (seen by
   a hook after every step) equals what the server reported; the number of different system
   prompts each session sent; whether the request after the consolidation shows its result.

   Targets (after): the first session's share >= 85% on both protocols; the second session's
   first request reads from cache everything before the per-user section (for OpenAI, whose
   cache counts in steps of 128: that prefix rounded down to a multiple of 128).

2. **llama.cpp.** ``llama_cpp.server`` (started as ``benchmarks/local_model.py`` starts it: the
   bundled SmolLM2-135M weights, ``--n_ctx 4096``, all cores; its prompt cache off, so
   llama-cpp-python reuses the KV state of its longest common prefix with the previous request
   only) serves ``--local-turns`` turns (8) of the same session's user messages and 2 of the
   second session's, answered by the model itself (greedy, ``--turn-tokens`` tokens). SmolLM2
   cannot use tools (the server's default chat format does not even render them), so the
   benchmark makes the memory writes between turns through the agent's own toolkit and
   maintenance: ``memory_save`` into the daily log before turn 2, into MEMORY.md before turn 3,
   the consolidation before turn 6 (answered in-process by the same script). Per turn: the time
   to the first token (from calling ``HarnessAgent.stream`` to its first text delta) and the
   prompt tokens evaluated, from the server's verbose log (``prompt eval time = ... / N
   tokens``; ``N prefix-match hit`` is what was reused). Each layout's first session starts
   after an unrelated request, so neither inherits the other's state; its second session
   follows its first on the same server, as it would. The layouts alternate ``--reps`` times
   (medians per turn over repetitions, then over turns). Tokens evaluated are deterministic;
   times are not, on a shared machine.

    .venv/bin/python benchmarks/prompt_cache.py [--parts 1,2] [--local-turns 8] [--turn-tokens 8]
        [--reps 1]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from _cache_servers import (
    Accounting,
    Answer,
    AnthropicCacheServer,
    CacheServer,
    Call,
    OpenAICacheServer,
    Prompt,
    running,
    tokens,
)

from harness import HarnessAgent, RuntimeContext
from harness.errors import HarnessError
from harness.hooks import WorkspaceContextConfig
from harness.kernel import (
    CACHE_PREFIX_BLOCKS,
    ChatChunk,
    ChatModel,
    ChatResponse,
    Event,
    Finished,
    Hook,
    Msg,
    PostReasoning,
    PreReasoning,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
    Usage,
)
from harness.kernel.streaming import TextDelta, ThinkingDelta, ToolStarted
from harness.memory import MemoryConfig
from harness.memory.consolidation import CONSOLIDATION_SYSTEM_PROMPT, ConsolidationResult
from harness.models.anthropic import AnthropicChatModel
from harness.models.openai import OpenAIChatModel
from harness.workspace import MEMORY_MD

Protocol = Literal["anthropic", "openai"]
PROTOCOLS: tuple[Protocol, ...] = ("anthropic", "openai")
USER = "user-ada-7"
SESSIONS = ("s1-refactor-2026", "s2-followup-2026")
BASE_PROMPT = (
    "You are Harness, a software engineering assistant. You work in the user's workspace with "
    "the tools you are given: read before you edit, keep changes small, and say what you did."
)
CONSOLIDATE_AFTER = 13
"""Part 1: the consolidation runs after this turn of the first session."""
TARGET_SHARE = 0.85


# -- the script ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """A user message and what the model does: steps of tool calls, then a text answer."""

    text: str
    steps: tuple[tuple[tuple[str, dict[str, Any]], ...], ...] = ()
    answer: str = ""


def _calls(*calls: tuple[str, dict[str, Any]]) -> tuple[tuple[str, dict[str, Any]], ...]:
    return calls


APP_PY = """\
import time

import httpx

TIMEOUT = 10.0


def fetch(url: str, retries: int = 3) -> str:
    # TODO: back off between retries instead of hammering the server
    for attempt in range(retries):
        try:
            response = httpx.get(url, timeout=TIMEOUT)
            response.raise_for_status()
            return response.text
        except httpx.HTTPError:
            if attempt == retries - 1:
                raise
    raise AssertionError("unreachable")


def main() -> None:
    # TODO: read the URL list from config.toml
    for url in ["https://example.org/a", "https://example.org/b"]:
        print(len(fetch(url)))
"""

FILES = {
    "project/README.md": (
        "# fetcher\n\nA small tool that downloads a list of pages and reports their sizes.\n\n"
        "## Usage\n\n    python -m fetcher\n\n## Deployment\n\nStaging deploys from main on "
        "every merge; production deploys are manual, on Tuesdays, after the release checklist.\n"
    ),
    "project/app.py": APP_PY,
    "project/config.toml": (
        '[fetch]\ntimeout = 10.0\nretries = 3\nurls = ["https://example.org/a", '
        '"https://example.org/b"]\n\n[log]\nlevel = "info"\n'
    ),
    "project/CHANGELOG.md": "# Changelog\n\n## 0.3.0\n- Retries on HTTP errors.\n",
    "notes/ideas.md": "# Ideas\n\n- Cache the pages on disk.\n- Report timing per URL.\n",
}

AGENTS_MD = "# Persona and rules\n\n" + "\n".join(
    f"- {rule}"
    for rule in [
        "Answer in plain English, briefly; code in fenced blocks.",
        "Before editing a file, read it; after editing, say what changed and why.",
        "Never push, deploy or delete anything without asking first.",
        "Keep the public API of a module stable unless asked to change it.",
        "Prefer the standard library; a new dependency needs a reason.",
        "When tests exist, run or update them with every change.",
        "Write commit messages in the imperative mood, under 72 characters.",
        "Flag anything that looks like a secret in a file and do not repeat it.",
    ]
)

KNOWLEDGE_MD = (
    "# Team knowledge\n\n"
    "Staging: https://staging.example.org, reset from production every Monday at 06:00 UTC.\n"
    "Production: deploys on Tuesdays only, by the on-call engineer, after the checklist.\n"
    "Style: ruff with line length 100; type hints everywhere; docstrings in Google style.\n"
    "Releases: semantic versioning; CHANGELOG.md is updated in the same change.\n"
)

MEMORY = (
    "# Ada's long-term memory\n\n## Preferences\n"
    "- Ada prefers small pull requests with one change each.\n"
    "- Ada reviews code in the morning, Berlin time.\n\n## Projects\n"
    "- fetcher: a page downloader Ada maintains since 2025; Python 3.11.\n"
    "- Ada wants retries with exponential backoff everywhere network calls happen.\n"
)


def session_one() -> list[Turn]:
    return [
        Turn(
            "Give me an overview of the project folder.",
            (_calls(("list_files", {"path": "project"})),),
            "The project has a README, app.py (the fetcher), config.toml and a CHANGELOG.",
        ),
        Turn(
            "Show me what the README says about deployment.",
            (_calls(("read_file", {"path": "project/README.md"})),),
            "Staging deploys from main on every merge; production deploys are manual, on "
            "Tuesdays, after the release checklist.",
        ),
        Turn(
            "Find the TODOs in the code.",
            (_calls(("grep_files", {"pattern": "TODO", "path": "project"})),),
            "Two TODOs in app.py: back off between retries, and read the URL list from "
            "config.toml.",
        ),
        Turn(
            "Read app.py and tell me how fetch works.",
            (_calls(("read_file", {"path": "project/app.py"})),),
            "fetch tries up to `retries` times, raising on the last HTTP error; it does not "
            "wait between attempts, which is the first TODO.",
        ),
        Turn(
            "What did we decide about retries before?",
            (_calls(("memory_search", {"query": "retries backoff"})),),
            "Your memory says you want retries with exponential backoff everywhere network "
            "calls happen.",
        ),
        Turn(
            "Remember that the staging database is reset every Monday morning.",
            (
                _calls(
                    (
                        "memory_save",
                        {"fact": "The staging database is reset every Monday morning."},
                    )
                ),
            ),
            "Saved to today's log.",
        ),
        Turn(
            "Write a short plan for the two TODOs to notes/plan.md.",
            (
                _calls(
                    (
                        "write_file",
                        {
                            "path": "notes/plan.md",
                            "content": "# Plan\n\n1. Exponential backoff in fetch.\n"
                            "2. Read the URLs from config.toml.\n3. Update the CHANGELOG.\n",
                        },
                    )
                ),
            ),
            "Wrote notes/plan.md with three steps: backoff, URLs from config, changelog.",
        ),
        Turn(
            "Fix the backoff TODO in app.py.",
            (
                _calls(("read_file", {"path": "project/app.py"})),
                _calls(
                    (
                        "edit_file",
                        {
                            "path": "project/app.py",
                            "old_string": "                raise\n    raise AssertionError",
                            "new_string": "                raise\n"
                            "            time.sleep(0.5 * 2**attempt)\n"
                            "    raise AssertionError",
                        },
                    )
                ),
            ),
            "fetch now sleeps 0.5 s, 1 s, 2 s between attempts (exponential backoff).",
        ),
        Turn(
            "Which markdown files are in the workspace?",
            (_calls(("glob_files", {"pattern": "**/*.md"})),),
            "README.md, CHANGELOG.md, notes/ideas.md and notes/plan.md.",
        ),
        Turn(
            "Explain the backoff you added in two sentences.",
            (),
            "Each failed attempt waits twice as long as the one before, starting at half a "
            "second. That spreads retries out so a struggling server gets room to recover.",
        ),
        Turn(
            "I prefer tabs of four spaces in YAML and never in Python. Keep that in my "
            "preferences.",
            (
                _calls(
                    (
                        "memory_save",
                        {
                            "fact": "Ada wants four-space indentation in YAML files and "
                            "never tabs in Python.",
                            "target": "MEMORY.md#Preferences",
                        },
                    )
                ),
            ),
            "Saved to your preferences in MEMORY.md.",
        ),
        Turn(
            "Check config.toml: does it have everything fetch needs?",
            (_calls(("read_file", {"path": "project/config.toml"})),),
            "It has timeout, retries and the URL list; app.py does not read it yet.",
        ),
        Turn(
            "Where else is the timeout used?",
            (_calls(("grep_files", {"pattern": "timeout"})),),
            "TIMEOUT in app.py and timeout in config.toml; they agree at 10 seconds.",
        ),
        Turn(
            "Add a changelog entry for the backoff.",
            (
                _calls(("read_file", {"path": "project/CHANGELOG.md"})),
                _calls(
                    (
                        "edit_file",
                        {
                            "path": "project/CHANGELOG.md",
                            "old_string": "## 0.3.0",
                            "new_string": "## Unreleased\n- Exponential backoff between "
                            "retries.\n\n## 0.3.0",
                        },
                    )
                ),
            ),
            "Added an Unreleased section with the backoff entry.",
        ),
        Turn(
            "Summarize what we did so far.",
            (),
            "We reviewed the project, added exponential backoff to fetch, wrote a plan, "
            "recorded two facts in memory and updated the changelog.",
        ),
        Turn(
            "Compare the plan with the ideas file.",
            (
                _calls(
                    ("read_file", {"path": "notes/plan.md"}),
                    ("read_file", {"path": "notes/ideas.md"}),
                ),
            ),
            "The plan covers the TODOs; the ideas (disk cache, timing per URL) are not in it yet.",
        ),
        Turn(
            "List the notes folder.",
            (_calls(("list_files", {"path": "notes"})),),
            "notes/ holds ideas.md and plan.md.",
        ),
        Turn(
            "When is staging reset again?",
            (_calls(("memory_search", {"query": "staging database reset"})),),
            "Every Monday morning, as you asked me to remember.",
        ),
        Turn(
            "Write a first test for fetch to project/test_app.py.",
            (
                _calls(
                    (
                        "write_file",
                        {
                            "path": "project/test_app.py",
                            "content": "from app import fetch\n\n\ndef test_fetch_is_"
                            "callable() -> None:\n    assert callable(fetch)\n",
                        },
                    )
                ),
            ),
            "Wrote project/test_app.py with a first smoke test.",
        ),
        Turn(
            "Thanks, that's all for today.",
            (),
            "You're welcome. Next time: read the URLs from config.toml.",
        ),
    ]


def session_two() -> list[Turn]:
    return [
        Turn(
            "Good morning. What should we do next on fetcher?",
            (),
            "Next is reading the URL list from config.toml, the second TODO.",
        ),
        Turn(
            "Show me the plan again.",
            (_calls(("read_file", {"path": "notes/plan.md"})),),
            "Backoff (done), URLs from config, changelog (done).",
        ),
        Turn("Good, let's start tomorrow.", (), "Fine, see you tomorrow."),
    ]


_MARKER = re.compile(r"\[turn (\d+)\.(\d+)\]")


def tagged(session: int, index: int, turn: Turn) -> str:
    """The user's message, tagged with its session and turn (from 1) for the script."""
    return f"[turn {session}.{index + 1}] {turn.text}"


class Script:
    """Answers a request from the script: which turn (its tag) and how many steps it has had."""

    def __init__(self) -> None:
        self.turns = {1: session_one(), 2: session_two()}

    def __call__(self, prompt: Prompt) -> Answer:
        if prompt.system.startswith(CONSOLIDATION_SYSTEM_PROMPT[:40]):
            return Answer(text=consolidated(prompt.entries[-1][1] if prompt.entries else ""))
        for position in range(len(prompt.entries) - 1, -1, -1):
            role, text = prompt.entries[position]
            found = _MARKER.search(text) if role == "user" else None
            if found is None:
                continue
            session, index = int(found.group(1)), int(found.group(2))
            turn = self.turns[session][index - 1]
            done = sum(1 for role, _ in prompt.entries[position + 1 :] if role == "assistant")
            if done < len(turn.steps):
                calls = tuple(
                    Call(f"{session}x{index:02d}x{done}x{k}", name, arguments)
                    for k, (name, arguments) in enumerate(turn.steps[done])
                )
                return Answer(calls=calls)
            return Answer(text=turn.answer)
        return Answer(text="OK.")


CONSOLIDATED_HEADING = "## From the daily logs"


def consolidated(request: str) -> str:
    """The consolidation's answer: the current MEMORY.md, plus the new daily-log facts."""
    current = request.split("Current MEMORY.md:\n", 1)[-1]
    current, _, entries = current.partition("\n\nNew daily log entries to merge")
    facts = [line for line in entries.splitlines() if line.startswith("- ")]
    merged = current.strip() if current.strip() != "(empty)" else ""
    return f"{merged}\n\n{CONSOLIDATED_HEADING}\n" + "\n".join(facts)


# -- what the agent sent and what it was told ------------------------------------------------------


@dataclass
class Step:
    system: list[str]
    shared: object
    started: float
    usage: Usage | None = None


class Recorder(Hook):
    """Sees every step's request last (priority 1000, after the workspace section) and its usage."""

    priority = 1000
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning, PostReasoning)

    def __init__(self) -> None:
        self.steps: list[Step] = []

    async def on_event(self, event: Event) -> None:
        if isinstance(event, PreReasoning):
            system = next((m for m in event.messages if m.role == "system"), None)
            blocks = [] if system is None else system.content
            self.steps.append(
                Step(
                    system=[b.text for b in blocks if isinstance(b, TextBlock)],
                    shared=None if system is None else system.metadata.get(CACHE_PREFIX_BLOCKS),
                    started=time.perf_counter(),
                )
            )
        elif isinstance(event, PostReasoning) and self.steps:
            self.steps[-1].usage = event.usage


@dataclass(frozen=True)
class Variant:
    name: str
    legacy: bool
    cache_key: bool | None = None
    """OpenAI's ``prompt_cache_key`` argument; None: the adapter's default."""

    def context(self) -> WorkspaceContextConfig:
        if self.legacy:
            return WorkspaceContextConfig(layout="legacy", memory_refresh="step")
        return WorkspaceContextConfig()


VARIANTS = (Variant("before", legacy=True), Variant("after", legacy=False))
WITH_KEY = Variant("after, prompt_cache_key=True", legacy=False, cache_key=True)
"""An extra OpenAI run: the key is sent (by default it goes to api.openai.com only)."""
MEMORY_CONFIG = MemoryConfig(flush=False, auto_consolidate=False)


def build_model(protocol: Protocol, variant: Variant, server: CacheServer) -> ChatModel:
    if protocol == "anthropic":
        if variant.legacy:
            return AnthropicChatModel(
                "claude-sonnet-4-5", base_url=server.url, api_key="bench", prompt_caching=False
            )
        return AnthropicChatModel("claude-sonnet-4-5", base_url=server.url, api_key="bench")
    key = False if variant.legacy else variant.cache_key
    if key is None:
        return OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1", api_key="bench")
    return OpenAIChatModel(
        "gpt-4.1-mini", base_url=server.url + "/v1", api_key="bench", prompt_cache_key=key
    )


async def prepare(agent: HarnessAgent) -> None:
    workspace = agent.workspace
    await workspace.write_text("AGENTS.md", AGENTS_MD)
    await workspace.write_text("knowledge/KNOWLEDGE.md", KNOWLEDGE_MD)
    await workspace.write_text("knowledge/runbooks/staging.md", "Reset: every Monday.\n")
    await workspace.write_text("knowledge/runbooks/release.md", "Checklist: tests, tag.\n")
    await workspace.write_text(MEMORY_MD, MEMORY, USER)
    for path, text in FILES.items():
        await workspace.write_text(path, text, USER)


async def consolidate(agent: HarnessAgent) -> ConsolidationResult:
    """A consolidation of the user's memory through the agent's own maintenance worker."""
    assert agent.maintenance is not None
    done: asyncio.Future[ConsolidationResult] = asyncio.get_running_loop().create_future()

    async def finished(result: ConsolidationResult) -> None:
        done.set_result(result)

    if not await agent.maintenance.request_consolidation(USER, finished):
        return ConsolidationResult(updated=False, reason="not requested (gate)")
    return await asyncio.wait_for(done, 60)


def first_personal_block(system: Sequence[str], session_id: str, memory: str) -> int:
    """The index of the first system block that holds the user's or the session's own text."""
    facts = [line for line in memory.splitlines() if line.startswith("- ")]
    markers = [USER, session_id, *facts]
    for index, text in enumerate(system):
        if any(marker in text for marker in markers):
            return index
    return len(system)


def tokens_before(protocol: Protocol, body: dict[str, Any], shared: Sequence[str]) -> int:
    """How many tokens of a request, as its server counts them, precede the per-user section."""
    texts = [text for text in shared if text]
    if protocol == "anthropic":
        system: str | list[dict[str, str]] = (
            [{"type": "text", "text": t} for t in texts]
            if isinstance(body.get("system"), list)
            else "\n\n".join(texts)
        )
        head = {"model": body.get("model"), "tools": body.get("tools"), "system": system}
        return sum(1 + len(tokens(block)) for _, block in AnthropicCacheServer.blocks(head))
    return len(tokens(body.get("tools") or [])) + len(tokens({"content": "\n\n".join(texts)}))


@dataclass
class Run:
    """One protocol and one layout: the server's records and the agent's steps, per phase."""

    sessions: list[list[Accounting]] = field(default_factory=list)
    steps: list[list[Step]] = field(default_factory=list)
    consolidation: list[Accounting] = field(default_factory=list)
    consolidated: ConsolidationResult | None = None
    errors: list[str] = field(default_factory=list)
    prefix: int = 0
    personal_block: int = 0
    shared_blocks: object = None
    after_consolidation: int = 0
    """Index in the first session of the first request after the consolidation."""

    def shown_consolidation(self) -> bool:
        """Whether the request after the consolidation carries the consolidated MEMORY.md."""
        records = self.sessions[0][self.after_consolidation :]
        return bool(records) and CONSOLIDATED_HEADING in json.dumps(records[0].body)

    def share(self, session: int) -> float:
        records = self.sessions[session]
        total = sum(r.prompt_tokens for r in records)
        return sum(r.cache_read for r in records) / total if total else 0.0


async def run_fake(protocol: Protocol, variant: Variant) -> Run:
    script = Script()
    server: CacheServer = (
        AnthropicCacheServer(script) if protocol == "anthropic" else OpenAICacheServer(script)
    )
    result = Run()
    with running(server), tempfile.TemporaryDirectory() as tmp:
        model = build_model(protocol, variant, server)
        recorder = Recorder()
        agent = HarnessAgent(
            model=model,
            workspace=Path(tmp) / "workspace",
            sys_prompt=BASE_PROMPT,
            memory=MEMORY_CONFIG,
            workspace_context=variant.context(),
            hooks=[recorder],
        )
        await asyncio.to_thread(Path(tmp, "workspace").mkdir)
        await prepare(agent)
        async with agent:
            for number, session_id in enumerate(SESSIONS, start=1):
                ctx = RuntimeContext(session_id=session_id, user_id=USER)
                records, steps = len(server.records), len(recorder.steps)
                for index, turn in enumerate(script.turns[number]):
                    try:
                        await agent.call(tagged(number, index, turn), ctx=ctx)
                    except HarnessError as exc:
                        result.errors.append(f"session {number} turn {index + 1}: {exc}")
                    if number == 1 and index + 1 == CONSOLIDATE_AFTER:
                        result.sessions.append(server.records[records:])
                        result.steps.append(recorder.steps[steps:])
                        before = len(server.records)
                        result.consolidated = await consolidate(agent)
                        result.consolidation = server.records[before:]
                        result.after_consolidation = len(result.sessions[0])
                        records, steps = len(server.records), len(recorder.steps)
                if number == 1:
                    result.sessions[0] += server.records[records:]
                    result.steps[0] += recorder.steps[steps:]
                else:
                    result.sessions.append(server.records[records:])
                    result.steps.append(recorder.steps[steps:])
            memory = await agent.workspace.read_own(MEMORY_MD, USER) or ""
        await aclose(model)
    first = result.steps[1][0] if result.steps[1] else None
    body = result.sessions[1][0].body if result.sessions[1] else None
    if first is not None and isinstance(body, dict):
        result.personal_block = first_personal_block(first.system, SESSIONS[1], memory)
        result.shared_blocks = first.shared
        result.prefix = tokens_before(protocol, body, first.system[: result.personal_block])
    return result


async def aclose(model: ChatModel) -> None:
    close = getattr(model, "aclose", None)
    if close is not None:
        await close()


def usage_mismatches(run: Run) -> list[str]:
    """Steps where Harness's Usage is not what the server reported."""
    found = []
    for number, (records, steps) in enumerate(zip(run.sessions, run.steps, strict=True), 1):
        if len(records) != len(steps):
            found.append(f"session {number}: {len(records)} requests, {len(steps)} steps")
            continue
        for index, (record, step) in enumerate(zip(records, steps, strict=True), 1):
            usage = step.usage
            want = (record.prompt_tokens, record.cache_read, record.cache_write)
            got = (
                None
                if usage is None
                else (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens)
            )
            if record.status == 200 and got != want:
                found.append(f"session {number} request {index}: usage {got}, server {want}")
    return found


def percent(value: float) -> str:
    return f"{value * 100:5.1f}%"


def report_fake(runs: dict[tuple[Protocol, str], Run]) -> None:
    turns = len(session_one())
    print(
        f"1. fake providers: a {turns}-turn session (consolidation after turn "
        f"{CONSOLIDATE_AFTER}, memory_save into MEMORY.md at turn 11), then "
        f"{len(session_two())} turns of a second session"
    )
    print("   share of the agent's input tokens served from cache (baseline: before)")
    for protocol in PROTOCOLS:
        before, after = runs[protocol, "before"], runs[protocol, "after"]
        for session in (0, 1):
            b, a = before.share(session), after.share(session)
            total_b = sum(r.prompt_tokens for r in before.sessions[session])
            total_a = sum(r.prompt_tokens for r in after.sessions[session])
            unc_b = sum(r.prompt_tokens - r.cache_read for r in before.sessions[session])
            unc_a = sum(r.prompt_tokens - r.cache_read for r in after.sessions[session])
            ratio = f"{unc_a / unc_b:.2f}x" if unc_b else "n/a"
            print(
                f"   {protocol:9} session {session + 1}: before {percent(b)} of {total_b:7,}  "
                f"after {percent(a)} of {total_a:7,}   uncached after/before {ratio}"
            )
        if protocol == "anthropic":
            for run, name in ((before, "before"), (after, "after")):
                records = [r for s in run.sessions for r in s]
                billed = sum(
                    r.uncached + 1.25 * r.cache_write + 0.1 * r.cache_read for r in records
                )
                total = sum(r.prompt_tokens for r in records)
                marks = max((r.breakpoints for r in records), default=0)
                short = sum(r.short_breakpoints for r in records)
                print(
                    f"      {name:6}: written {sum(r.cache_write for r in records):,}, billed as "
                    f"{billed / total:.2f} of the uncached price (writes 1.25x, reads 0.1x); "
                    f"at most {marks} breakpoints a request, {short} below the minimum"
                )
        else:
            keyed = runs[protocol, WITH_KEY.name]
            for run, name in ((before, "before"), (after, "after"), (keyed, WITH_KEY.name)):
                records = [r for s in run.sessions for r in s]
                keys = {r.cache_key for r in records if r.cache_key is not None}
                sent = sum(r.cache_key is not None for r in records)
                extra = (
                    f" (session 1 share {percent(run.share(0)).strip()})" if run is keyed else ""
                )
                print(
                    f"      {name:6}: prompt_cache_key on {sent} of {len(records)} requests, "
                    f"{len(keys)} distinct{extra}"
                )
    print("   targets")
    for protocol in PROTOCOLS:
        after = runs[protocol, "after"]
        share = after.share(0)
        verdict = "holds" if share >= TARGET_SHARE else "MISSED"
        print(f"   {protocol:9} session 1 after: {percent(share)} (target >= 85%): {verdict}")
    for protocol in PROTOCOLS:
        for name in ("before", "after"):
            run = runs[protocol, name]
            read = run.sessions[1][0].cache_read if run.sessions[1] else 0
            need = run.prefix - run.prefix % 128 if protocol == "openai" else run.prefix
            if name == "after":
                verdict = "target holds" if read >= need else "target MISSED"
                told = f"; the harness marks {run.shared_blocks} blocks shared"
            else:
                verdict, told = "baseline", ""
            print(
                f"   {protocol:9} session 2, first request, {name:6}: read {read:,} from cache; "
                f"{run.prefix:,} tokens precede the per-user section (system block "
                f"{run.personal_block}{told}): {verdict}"
            )
    print("   checks")
    for protocol in PROTOCOLS:
        for name in ("before", "after"):
            run = runs[protocol, name]
            distinct = [len({"\n\n".join(step.system) for step in steps}) for steps in run.steps]
            consolidated = run.consolidated
            what = "updated" if consolidated and consolidated.updated else "NOT updated"
            if consolidated and consolidated.reason:
                what += f" ({consolidated.reason})"
            wrong = usage_mismatches(run)
            seen = "seen" if run.shown_consolidation() else "NOT seen"
            print(
                f"   {protocol:9} {name:6}: system prompts per session {distinct}; "
                f"consolidation {what}, {len(run.consolidation)} request(s) counted apart, "
                f"its result {seen} in the next request; "
                f"Harness usage = server's on "
                f"{sum(len(s) for s in run.sessions) - len(wrong)} of "
                f"{sum(len(s) for s in run.sessions)} requests"
            )
            for line in wrong[:3] + run.errors[:3]:
                print(f"      {line}")


async def part_fake() -> None:
    runs: dict[tuple[Protocol, str], Run] = {}
    for protocol in PROTOCOLS:
        for variant in VARIANTS:
            runs[protocol, variant.name] = await run_fake(protocol, variant)
    runs["openai", WITH_KEY.name] = await run_fake("openai", WITH_KEY)
    report_fake(runs)


# -- 2. llama.cpp --------------------------------------------------------------------------------

N_CTX = 4096
THREADS = os.cpu_count() or 1
_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
_HIT = re.compile(r"(\d+) prefix-match hit")


class ServerLog:
    """The llama.cpp server's stderr, line by line, kept as it arrives."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)

    def settle(self, quiet: float = 0.3, timeout: float = 10.0) -> None:
        """Wait until no line has arrived for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        count = len(self.lines)
        while time.monotonic() < deadline:
            time.sleep(quiet)
            if len(self.lines) == count:
                return
            count = len(self.lines)


@contextmanager
def llama_server() -> Iterator[tuple[str, ServerLog]]:
    from harness.models.local import bundled_weights

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
        "--verbose",
        "true",
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log = ServerLog(process.stderr)
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
        yield base_url, log
    finally:
        process.terminate()
        process.wait(timeout=10)


class ScriptedConsolidator:
    """Part 2's memory model: answers the consolidation in-process, from the same script."""

    model_name = "scripted-consolidator"

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        system = "\n\n".join(m.text for m in messages if m.role == "system")
        entries = tuple((m.role, m.text) for m in messages if m.role != "system")
        answer = Script()(Prompt(system, entries))
        yield ChatResponse(content=[TextBlock(text=answer.text)], stop_reason="stop")


@dataclass
class LocalTurn:
    ttft: float
    """Seconds from ``HarnessAgent.stream`` to its first text delta."""
    harness: float
    """Of which: seconds until the request left (the last hook of the first step)."""
    evaluated: int
    reused: int


async def local_session(
    base_url: str, log: ServerLog, variant: Variant, turns: int, turn_tokens: int
) -> list[LocalTurn]:
    options = {"max_tokens": turn_tokens, "temperature": 0.0}
    if variant.legacy:
        model = OpenAIChatModel(
            "smollm2", api_key="none", base_url=base_url, options=options, prompt_cache_key=False
        )
    else:
        model = OpenAIChatModel("smollm2", api_key="none", base_url=base_url, options=options)
    plan = {1: [t.text for t in session_one()][:turns], 2: [t.text for t in session_two()][:2]}
    measured: list[LocalTurn] = []
    recorder = Recorder()
    with tempfile.TemporaryDirectory() as tmp:
        await asyncio.to_thread(Path(tmp, "workspace").mkdir)
        agent = HarnessAgent(
            model=model,
            workspace=Path(tmp) / "workspace",
            sys_prompt=BASE_PROMPT,
            memory=MEMORY_CONFIG,
            memory_model=ScriptedConsolidator(),
            workspace_context=variant.context(),
            hooks=[recorder],
        )
        await prepare(agent)
        await unrelated_prompt(model)  # the server's state: nothing of this workspace
        async with agent:
            for number, session_id in enumerate(SESSIONS, start=1):
                ctx = RuntimeContext(session_id=session_id, user_id=USER)
                for index, text in enumerate(plan[number]):
                    if number == 1 and index == 1:
                        await save(agent, ctx, {"fact": "The staging database resets Mondays."})
                    if number == 1 and index == 2:
                        fact = "Ada wants four-space indentation in YAML files."
                        await save(agent, ctx, {"fact": fact, "target": "MEMORY.md#Preferences"})
                    if number == 1 and index == 5:
                        await consolidate(agent)
                    log.settle(quiet=0.1, timeout=2)
                    start_line, steps = len(log.lines), len(recorder.steps)
                    start = time.perf_counter()
                    first: float | None = None
                    async for item in agent.stream(text, ctx=ctx):
                        if first is None and isinstance(
                            item, TextDelta | ThinkingDelta | ToolStarted | Finished
                        ):
                            first = time.perf_counter() - start
                    log.settle()
                    lines = "".join(log.lines[start_line:])
                    evaluated = sum(int(n) for n in _EVAL.findall(lines))
                    reused = sum(int(n) for n in _HIT.findall(lines))
                    sent = recorder.steps[steps].started - start
                    measured.append(LocalTurn(first or 0.0, sent, evaluated, reused))
    await model.aclose()
    return measured


async def save(agent: HarnessAgent, ctx: RuntimeContext, arguments: dict[str, Any]) -> None:
    """memory_save through the agent's own toolkit, as a tool call of the model would run it."""
    call = ToolUseBlock(id="bench-save", name="memory_save", input=arguments)
    result = await agent.delegate.toolkit.call(call, ctx)
    assert isinstance(result, ToolResultBlock), result
    assert not result.is_error, result.text


async def unrelated_prompt(model: OpenAIChatModel) -> None:
    """A request that shares nothing with the session, so its state starts from scratch."""
    message = Msg(role="user", content=[TextBlock(text="Name three colours.")])
    async for _ in model.stream([message], [], max_tokens=1):
        pass


async def part_local(turns: int, turn_tokens: int, reps: int) -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        print("2. llama.cpp: skipped: llama_cpp is not installed (./scripts/install-local)")
        return
    results: dict[str, list[list[LocalTurn]]] = {v.name: [] for v in VARIANTS}
    with llama_server() as (base_url, log):
        for _ in range(reps):
            for variant in VARIANTS:
                results[variant.name].append(
                    await local_session(base_url, log, variant, turns, turn_tokens)
                )
    print(
        f"2. llama.cpp server, SmolLM2-135M, {THREADS} threads: {turns} turns + 2 of a second "
        f"session, {turn_tokens}-token answers, {reps} repetition(s) (baseline: before)"
    )
    labels = [f"1.{i + 1}" for i in range(turns)] + ["2.1", "2.2"]
    events = {"1.2": "memory_save (log)", "1.3": "memory_save MEMORY.md", "2.1": "new session"}
    events["1.6"] = "consolidation"
    print("   turn  before                         after")
    print("         first token  evaluated/prompt  first token  evaluated/prompt")
    for position, label in enumerate(labels):
        cells = []
        for variant in VARIANTS:
            runs = [rep[position] for rep in results[variant.name] if position < len(rep)]
            ttft = statistics.median(t.ttft for t in runs) * 1000
            evaluated = statistics.median(t.evaluated for t in runs)
            prompt = statistics.median(t.evaluated + t.reused for t in runs)
            cells.append(f"{ttft:8.0f} ms  {evaluated:6.0f} / {prompt:5.0f}  ")
        note = f"  after {events[label]}" if label in events else ""
        print(f"   {label:4} {cells[0]}   {cells[1]}{note}")
    medians: dict[str, tuple[float, float, float]] = {}
    for variant in VARIANTS:
        rows = [turn for rep in results[variant.name] for turn in rep]
        medians[variant.name] = (
            statistics.median(t.ttft for t in rows),
            statistics.median(t.evaluated for t in rows),
            statistics.median(t.harness for t in rows),
        )
        total = sum(t.evaluated for t in rows) / reps
        warm = sum(t.evaluated for rep in results[variant.name] for t in rep[1:]) / reps
        ttft, evaluated, harness = medians[variant.name]
        print(
            f"   {variant.name:6}: median per turn: first token {ttft * 1000:6.0f} ms (of which "
            f"{harness * 1000:3.0f} ms before the request left), {evaluated:4.0f} tokens "
            f"evaluated; in all {total:,.0f} evaluated, {warm:,.0f} after the first turn"
        )
    (tb, eb, _), (ta, ea, _) = medians["before"], medians["after"]
    eval_ratio = f"{ea / eb:.2f}x" if eb else "n/a"
    mean_b = statistics.mean(t.ttft for rep in results["before"] for t in rep)
    mean_a = statistics.mean(t.ttft for rep in results["after"] for t in rep)
    print(
        f"   after/before: first token median {ta / tb:.2f}x (mean {mean_a / mean_b:.2f}x), "
        f"tokens evaluated median {eval_ratio}"
    )


async def main(parts: set[str], turns: int, turn_tokens: int, reps: int) -> None:
    if "1" in parts:
        await part_fake()
        print()
    if "2" in parts:
        await part_local(turns, turn_tokens, reps)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", default="1,2", help="which parts to run, e.g. 1")
    parser.add_argument("--local-turns", type=int, default=8, help="part 2: first-session turns")
    parser.add_argument("--turn-tokens", type=int, default=8, help="part 2: answer length")
    parser.add_argument("--reps", type=int, default=1, help="part 2: repetitions of each layout")
    args = parser.parse_args()
    asyncio.run(main(set(args.parts.split(",")), args.local_turns, args.turn_tokens, args.reps))
