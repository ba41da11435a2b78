"""Children: what a subagent inherits from its parent, and that it stays a leaf."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from _outcomes import answer
from harness import (
    AgentOptions,
    CompactionConfig,
    HarnessAgent,
    Hook,
    MemoryConfig,
    Msg,
    RuntimeContext,
)
from harness.compaction import ToolResultEvictionConfig
from harness.kernel import Event, Finished, TextBlock
from harness.memory.index import MemoryIndex
from harness.models import ScriptedChatModel
from harness.subagents import (
    SUBAGENT_CONTEXT,
    Declaration,
    SubagentAgent,
    SubagentFactory,
    SubagentsConfig,
    SubagentSpec,
)
from harness.tools import subagents as subagent_tools
from harness.tools.subagents import build_child
from harness.workspace import WorkspaceManager

FLUSH = "Extract NEW memories"
QUIET = MemoryConfig(flush=False, auto_consolidate=False)
"""Memory that sends no flush requests to the scripted models."""
DELEGATION_TOOLS = {"agent_spawn", "agent_send", "agent_list", "task_output", "task_cancel"}
ALICE = RuntimeContext(session_id="main", user_id="alice", extra={"tenant": "t1"})


async def whoami(ctx: RuntimeContext) -> str:
    """Who the call is for."""
    return f"user={ctx.user_id} tenant={ctx.get('tenant')}"


async def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: The text.
    """
    return text.upper()


async def big() -> str:
    """A long result."""
    return "x" * 400 + "THE-END"


class Recorder(Hook):
    """Records (event type, agent, session) of every event it sees."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []

    async def on_event(self, event: Event) -> None:
        self.seen.append((type(event).__name__, event.agent, event.ctx.session_id))


@dataclass
class Built:
    declaration: Declaration
    options: AgentOptions
    child: SubagentAgent
    new_threads: int
    new_indexes: int


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Built]:
    """Every child agent_spawn builds, with the threads and indexes building it created.

    Threads are counted as they start, not by ``threading.active_count()``: threads of
    earlier tests that end while a child is built would make a difference of counts
    negative (a CI run saw -4).
    """
    records: list[Built] = []
    indexes: list[object] = []
    started: list[threading.Thread] = []
    original_init = MemoryIndex.__init__
    original_start = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self)
        original_start(self)

    def counting_init(self: MemoryIndex, *args: Any, **kwargs: Any) -> None:
        indexes.append(self)
        original_init(self, *args, **kwargs)

    def recording(
        declaration: Declaration, options: AgentOptions, make_agent: Any
    ) -> SubagentAgent:
        threads, before = len(started), len(indexes)
        child = build_child(declaration, options, make_agent)
        records.append(
            Built(
                declaration,
                options,
                child,
                new_threads=len(started) - threads,
                new_indexes=len(indexes) - before,
            )
        )
        return child

    monkeypatch.setattr(MemoryIndex, "__init__", counting_init)
    monkeypatch.setattr(threading.Thread, "start", counting_start)
    monkeypatch.setattr(subagent_tools, "build_child", recording)
    return records


def harness_child(record: Built) -> HarnessAgent:
    assert isinstance(record.child, HarnessAgent)
    return record.child


def spawning(agent_id: str, *extra: dict[str, Any], task: str = "do the task") -> ScriptedChatModel:
    """A parent that spawns ``agent_id`` with ``task`` when told "delegate", then finishes."""
    call = {"name": "agent_spawn", "input": {"agent_id": agent_id, "task": task}}
    return ScriptedChatModel(
        [
            {"match": "^delegate$", "tool_calls": [call], "repeat": True},
            *extra,
            {"match": "agent_key: ", "text": "parent done", "repeat": True},
        ]
    )


def child_model(*turns: dict[str, Any]) -> ScriptedChatModel:
    return ScriptedChatModel([*turns, {"text": "child done", "repeat": True}])


def spawn_result(parent_model: ScriptedChatModel) -> str:
    """The agent_spawn result the parent's model was shown last."""
    return parent_model.requests[-1][-1].tool_results[0].text


def options(workspace: Path, **changes: Any) -> AgentOptions:
    """A parent's options: the helpers' quiet defaults, with ``changes``."""
    values: dict[str, Any] = {
        "model": ScriptedChatModel([]),
        "workspace": WorkspaceManager(workspace),
        "max_iters": 5,
        "memory": None,
        "tool_result_eviction": None,
        "workspace_context": None,
        "trace": False,
    }
    values.update(changes)
    return AgentOptions(**values)


def child_of(declaration: Declaration, parent: AgentOptions) -> SubagentAgent:
    return build_child(declaration, parent, HarnessAgent.from_options)


def system_text(request: Sequence[Msg]) -> str:
    assert request[0].role == "system"
    return request[0].text


# -- build_child ---------------------------------------------------------------------------


async def test_a_child_is_a_leaf_whose_prompt_is_the_spec_body_and_the_subagent_context(
    workspace: Path,
) -> None:
    model = child_model()
    spec = SubagentSpec(
        name="helper", description="Helps.", sys_prompt="You are HELPER-PROMPT.", max_iters=3
    )
    child = child_of(spec, options(workspace, model=model, tools=(whoami,)))
    assert isinstance(child, HarnessAgent)
    try:
        assert child.name == "helper"
        assert child.delegate.max_iters == 3
        assert child.tasks is None
        assert DELEGATION_TOOLS.isdisjoint(child.delegate.toolkit.names)
        assert "task_list" not in child.delegate.toolkit
        reply = answer(await child.call("do the task", ctx=RuntimeContext(user_id="alice")))
    finally:
        await child.aclose()
    assert reply.text == "child done"
    prompt = system_text(model.requests[0])
    assert prompt.startswith("You are HELPER-PROMPT.\n\n# Subagent Context")
    assert SUBAGENT_CONTEXT in prompt
    assert "## Subagents" not in prompt  # no delegation section either
    assert "agent_spawn" not in {schema.name for schema in child.delegate.toolkit.schemas()}


async def test_a_child_without_a_prompt_gets_the_subagent_context_alone(workspace: Path) -> None:
    model = child_model()
    child = child_of(
        SubagentSpec(name="bare", description="Bare."), options(workspace, model=model)
    )
    assert isinstance(child, HarnessAgent)
    async with child:
        answer(await child.call("go", ctx=RuntimeContext()))
    assert system_text(model.requests[0]) == SUBAGENT_CONTEXT


async def test_the_tools_allow_list_keeps_only_the_listed_tools(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = SubagentSpec(
        name="narrow", description="Narrow.", tools=("shout", "read_file", "web_search", "nope")
    )
    with caplog.at_level(logging.WARNING, logger="harness.subagents"):
        child = child_of(
            spec,
            options(
                workspace,
                tools=(whoami, shout),
                memory=QUIET,
                tool_result_eviction=ToolResultEvictionConfig(),
            ),
        )
    assert isinstance(child, HarnessAgent)
    async with child:
        assert sorted(child.delegate.toolkit.names) == ["read_file", "shout"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "'narrow'" in warnings[0]
    assert "nope, web_search" in warnings[0]
    assert "shout" not in warnings[0]


async def test_an_empty_allow_list_leaves_no_tools(workspace: Path) -> None:
    spec = SubagentSpec(name="none", description="No tools.", tools=())
    child = child_of(spec, options(workspace, tools=(whoami,), memory=QUIET))
    assert isinstance(child, HarnessAgent)
    async with child:
        assert child.delegate.toolkit.names == []


async def test_an_allow_list_does_not_change_the_parents_tools(workspace: Path) -> None:
    spec = SubagentSpec(name="narrow", description="Narrow.", tools=("shout",))
    shared = options(workspace, tools=(whoami, shout), memory=QUIET)
    child = child_of(spec, shared)
    sibling = child_of(SubagentSpec(name="wide", description="Wide."), shared)
    assert isinstance(child, HarnessAgent)
    assert isinstance(sibling, HarnessAgent)
    async with child, sibling:
        assert child.delegate.toolkit.names == ["shout"]
        assert {"whoami", "shout", "memory_search"} <= set(sibling.delegate.toolkit.names)


async def test_a_factory_builds_the_child_from_the_parents_options(workspace: Path) -> None:
    received: list[AgentOptions] = []

    class Echo:
        async def call(self, msgs: str, *, ctx: RuntimeContext) -> Finished:
            echoed = [TextBlock(text=f"echo {msgs}")]
            return Finished(Msg(role="assistant", name="echo", content=echoed))

    def build(given: AgentOptions) -> SubagentAgent:
        received.append(given)
        return Echo()

    parent = options(workspace)
    child = child_of(SubagentFactory(name="echo", description="Echoes.", build=build), parent)
    assert received == [replace(parent, name="echo", sys_prompt=SUBAGENT_CONTEXT, subagents=None)]
    assert (answer(await child.call("hi", ctx=RuntimeContext()))).text == "echo hi"


# -- through HarnessAgent and agent_spawn ----------------------------------------------------


async def test_a_spawned_child_inherits_tools_hooks_and_workspace_but_not_delegation(
    workspace: Path, built: list[Built]
) -> None:
    recorder = Recorder()
    parent_model = spawning("general-purpose", {"match": "^do the task$", "text": "child reply"})
    async with HarnessAgent(
        model=parent_model, workspace=workspace, tools=[whoami], hooks=[recorder], memory=QUIET
    ) as parent:
        assert set(parent.delegate.toolkit.names) >= DELEGATION_TOOLS
        reply = answer(await parent.call("delegate", ctx=ALICE))
        assert reply.text == "parent done"
        assert "status: ok\nreply:\nchild reply" in spawn_result(parent_model)
        [record] = built
        child = harness_child(record)
        assert child.model is parent.model  # no model of its own: the parent's
        assert child.workspace is parent.workspace
        names = set(child.delegate.toolkit.names)
        assert {"whoami", "memory_search", "read_file"} <= names
        assert DELEGATION_TOOLS.isdisjoint(names)
        assert "task_list" not in names
        # the same hook instance, not a copy
        assert any(hook is recorder for hook in child.delegate.hooks.hooks)
    child_events = [(kind, session) for kind, agent, session in recorder.seen if agent != "harness"]
    assert {kind for kind, _ in child_events} >= {"PreCall", "PreReasoning", "PostCall"}
    assert {agent for _, agent, _ in recorder.seen} == {"harness", "general-purpose"}
    assert all(session is not None and session.startswith("sub-") for _, session in child_events)


async def test_a_spec_with_a_model_uses_it_and_the_parents_model_sees_none_of_the_child(
    workspace: Path, built: list[Built]
) -> None:
    own = child_model({"match": "^do the task$", "text": "from the child's own model"})
    spec = SubagentSpec(name="helper", description="Helps.", sys_prompt="HELPER", model=own)
    parent_model = spawning("helper")
    async with HarnessAgent(
        model=parent_model, workspace=workspace, subagents=[spec], memory=QUIET
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        assert harness_child(built[0]).model is own
    assert "from the child's own model" in spawn_result(parent_model)
    assert len(own.requests) == 1
    assert "HELPER" in system_text(own.requests[0])
    assert all(r[-1].text != "do the task" for r in parent_model.requests)


async def test_a_file_declaration_with_an_allowed_model_spec_gets_that_model(
    workspace: Path, built: list[Built], tmp_path: Path
) -> None:
    script = tmp_path / "child.json"
    script.write_text(json.dumps({"turns": [{"text": "scripted from a file"}]}))
    (workspace / "subagents").mkdir()
    (workspace / "subagents" / "filed.md").write_text(
        f"---\nname: filed\ndescription: From a file.\nmodel: scripted:{script}\n"
        "tools: whoami\n---\nFILED-PROMPT\n"
    )
    parent_model = spawning("filed")
    async with HarnessAgent(
        model=parent_model,
        workspace=workspace,
        tools=[whoami, shout],
        memory=QUIET,
        subagents=SubagentsConfig(allowed_models=(f"scripted:{script}",)),
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        child = harness_child(built[0])
        assert child.model is not parent.model
        assert child.delegate.toolkit.names == ["whoami"]
    assert "scripted from a file" in spawn_result(parent_model)


async def test_a_child_whose_model_cannot_be_built_is_reported_to_the_parent(
    workspace: Path,
) -> None:
    (workspace / "subagents").mkdir()
    (workspace / "subagents" / "remote.md").write_text(
        "---\nname: remote\ndescription: Remote.\nmodel: openai:gpt-4o-mini\n---\nRemote.\n"
    )
    parent_model = spawning("remote", {"match": "could not start", "text": "parent done"})
    async with HarnessAgent(
        model=parent_model,
        workspace=workspace,
        memory=QUIET,
        subagents=SubagentsConfig(allowed_models=("openai:gpt-4o-mini",)),
    ) as parent:
        reply = answer(await parent.call("delegate", ctx=ALICE))
    assert reply.text == "parent done"
    assert spawn_result(parent_model).startswith("Error: could not start subagent 'remote'")
    assert "OPENAI_API_KEY" in spawn_result(parent_model)


async def test_a_factory_receives_the_parents_options(workspace: Path) -> None:
    received: list[AgentOptions] = []
    recorder = Recorder()
    memory = MemoryConfig(flush=False, auto_consolidate=False, offload=False)
    compaction = CompactionConfig()
    eviction = ToolResultEvictionConfig(max_result_chars=1234)
    memory_model = ScriptedChatModel([])
    summarizer = ScriptedChatModel([])

    class Fixed:
        async def call(self, msgs: str, *, ctx: RuntimeContext) -> Finished:
            fixed = [TextBlock(text="fixed reply")]
            return Finished(Msg(role="assistant", name="fixed", content=fixed))

    def build(given: AgentOptions) -> SubagentAgent:
        received.append(given)
        return Fixed()

    factory = SubagentFactory(name="custom", description="Custom.", build=build)
    parent_model = spawning("custom")
    async with HarnessAgent(
        model=parent_model,
        workspace=workspace,
        tools=[whoami],
        hooks=[recorder],
        max_iters=4,
        memory=memory,
        memory_model=memory_model,
        compaction=compaction,
        compaction_model=summarizer,
        tool_result_eviction=eviction,
        subagents=[factory],
        trace=False,
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        [given] = received
        assert given.model is parent.model
        assert given.workspace is parent.workspace
        assert isinstance(given.tools, tuple)
        assert [tool.name for tool in given.tools] == ["whoami"]  # the user's tools only
        assert given.hooks == (recorder,)
        assert given.name == "custom"
        assert given.sys_prompt == SUBAGENT_CONTEXT
        assert given.subagents is None
        assert given.max_iters == 4
        assert given.memory is memory
        assert given.memory_model is memory_model
        assert given.compaction is compaction
        assert given.compaction_model is summarizer
        assert given.tool_result_eviction is eviction
        assert given.trace is False
    assert "fixed reply" in spawn_result(parent_model)


@pytest.mark.parametrize("flush", [True, False])
async def test_a_child_flushes_memory_only_if_the_parent_does(
    workspace: Path, built: list[Built], flush: bool
) -> None:
    memory_model = ScriptedChatModel([{"match": FLUSH, "text": "NO_REPLY", "repeat": True}])
    spec = SubagentSpec(name="helper", description="Helps.", model=child_model())
    async with HarnessAgent(
        model=spawning("helper"),
        workspace=workspace,
        memory=MemoryConfig(flush=flush, auto_consolidate=False),
        memory_model=memory_model,
        subagents=[spec],
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        assert parent.maintenance is not None
        await parent.maintenance.settled()
    flushes = [r for r in memory_model.requests if FLUSH in r[-1].text]
    # one flush per call: the parent's and the child's, or none
    assert len(flushes) == (2 if flush else 0)
    assert len(memory_model.requests) == len(flushes)


async def test_a_child_has_no_memory_when_the_parent_has_none(
    workspace: Path, built: list[Built]
) -> None:
    spec = SubagentSpec(name="helper", description="Helps.", model=child_model())
    async with HarnessAgent(
        model=spawning("helper"), workspace=workspace, memory=None, subagents=[spec]
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        child = harness_child(built[0])
        assert child.maintenance is None
        assert "memory_search" not in child.delegate.toolkit
    assert not (workspace.parent / "memory_index.db").exists()


async def test_a_child_shares_the_parents_compaction_config(
    workspace: Path, built: list[Built]
) -> None:
    compaction = CompactionConfig()
    spec = SubagentSpec(name="helper", description="Helps.", model=child_model())
    async with HarnessAgent(
        model=spawning("helper"),
        workspace=workspace,
        memory=QUIET,
        compaction=compaction,
        subagents=[spec],
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        child = harness_child(built[0])
        assert child.compaction is compaction
        assert child.compactor is not None
    async with HarnessAgent(
        model=spawning("helper"), workspace=workspace, memory=QUIET, subagents=[spec]
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        assert harness_child(built[1]).compactor is None


@pytest.mark.parametrize("evict", [True, False])
async def test_a_child_evicts_large_tool_results_like_its_parent(
    workspace: Path, evict: bool
) -> None:
    own = child_model({"match": "^do the task$", "tool_calls": [{"name": "big", "input": {}}]})
    spec = SubagentSpec(name="helper", description="Helps.", model=own)
    eviction = ToolResultEvictionConfig(max_result_chars=300, preview_chars=10)
    async with HarnessAgent(
        model=spawning("helper"),
        workspace=workspace,
        tools=[big],
        memory=QUIET,
        tool_result_eviction=eviction if evict else None,
        subagents=[spec],
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
    shown = own.requests[1][-1].tool_results[0].text
    evicted = list((workspace / "users" / "alice" / "large_tool_results").rglob("*"))
    if evict:
        assert "THE-END" in shown  # the tail is previewed
        assert "x" * 400 not in shown
        [saved] = [p for p in evicted if p.is_file() and not p.name.startswith(".")]
        assert saved.parent.name == "helper"
        assert saved.read_text() == "x" * 400 + "THE-END"
    else:
        assert shown == "x" * 400 + "THE-END"
        assert not evicted


async def test_building_a_child_starts_no_thread_and_opens_no_index(
    workspace: Path, built: list[Built]
) -> None:
    spec = SubagentSpec(name="helper", description="Helps.", model=child_model())
    parent_model = spawning("helper", task="do the task")
    async with HarnessAgent(
        model=parent_model,
        workspace=workspace,
        memory=MemoryConfig(flush=False, auto_consolidate=False),
        subagents=[spec],
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        answer(await parent.call("delegate", ctx=RuntimeContext(user_id="bob")))
        assert len(built) == 2
        for record in built:
            assert harness_child(record).maintenance is parent.maintenance
            assert record.new_threads == 0
            assert record.new_indexes == 0
        shared = parent.maintenance
    # closing the parent closed its children: the worker is released by all of them
    async with HarnessAgent(model=ScriptedChatModel([]), workspace=workspace) as later:
        assert later.maintenance is not shared


# -- the caller's identity -------------------------------------------------------------------


async def test_a_child_acts_for_the_callers_user_and_tenant(
    workspace: Path, built: list[Built]
) -> None:
    own = child_model(
        {"match": "^do the task$", "tool_calls": [{"name": "whoami", "input": {}}]},
        {"match": "user=", "text": "child saw it"},
    )
    spec = SubagentSpec(name="helper", description="Helps.", model=own)
    parent_model = spawning("helper")
    async with HarnessAgent(
        model=parent_model, workspace=workspace, tools=[whoami], memory=QUIET, subagents=[spec]
    ) as parent:
        reply = answer(await parent.call("delegate", ctx=ALICE))
    assert reply.text == "parent done"
    assert own.requests[1][-1].tool_results[0].text == "user=alice tenant=t1"
    assert "child saw it" in spawn_result(parent_model)
    saved = list((workspace / "users" / "alice" / "agents" / "helper" / "context").glob("sub-*"))
    assert len(saved) == 1
    assert (saved[0] / "messages.jsonl").is_file()
    assert "child saw it" in (saved[0] / "messages.jsonl").read_text()
    assert not (workspace / "agents" / "helper").exists()  # nothing in the shared namespace


@pytest.mark.parametrize("index", [True, False])
async def test_a_childs_memory_search_finds_the_callers_memory_only(
    workspace: Path, index: bool
) -> None:
    for user, word in (("alice", "zanzibarite"), ("bob", "quokkaberry")):
        (workspace / "users" / user).mkdir(parents=True)
        (workspace / "users" / user / "MEMORY.md").write_text(
            f"# Memory\n\n- The secret word is {word}.\n"
        )
    searches = [
        {"name": "memory_search", "input": {"query": "zanzibarite"}},
        {"name": "memory_search", "input": {"query": "quokkaberry"}},
    ]
    own = child_model({"match": "^do the task$", "tool_calls": searches})
    spec = SubagentSpec(name="helper", description="Helps.", model=own)
    async with HarnessAgent(
        model=spawning("helper"),
        workspace=workspace,
        memory=MemoryConfig(flush=False, auto_consolidate=False, index=index),
        subagents=[spec],
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
    alices, bobs = (r.text for m in own.requests[1] for r in m.tool_results)
    assert alices.startswith("Found 1 matches")
    assert (
        "Source: MEMORY.md#L3 (trust: unknown; origin: no record)\n"
        "  [unknown] - The secret word is zanzibarite." in alices
    )
    assert bobs == "No matching memories found for: quokkaberry"


async def test_children_of_two_users_are_kept_apart(workspace: Path, built: list[Built]) -> None:
    spec = SubagentSpec(name="helper", description="Helps.", model=child_model())
    config = SubagentsConfig(declarations=(spec,), general_purpose=False)
    async with HarnessAgent(
        model=spawning("helper"), workspace=workspace, memory=QUIET, subagents=config
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        answer(await parent.call("delegate", ctx=RuntimeContext(session_id="main", user_id="bob")))
    for user in ("alice", "bob"):
        context = workspace / "users" / user / "agents" / "helper" / "context"
        assert len(list(context.glob("sub-*"))) == 1
