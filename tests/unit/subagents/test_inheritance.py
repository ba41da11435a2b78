"""What a child inherits: docs/subagents.md's table, child_options, and the children built.

The table names every option of AgentOptions with one rule; ``child_options`` follows it for
every option, for a declaration that overrides all it can, one that overrides nothing, and a
factory; and children spawned through a parent have what the table says, the options a
declaration cannot reach included.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from _outcomes import answer
from harness import AgentOptions, HarnessAgent, MemoryConfig, Msg, RuntimeContext
from harness.approvals import ApprovalPolicy, ApprovalRule
from harness.compaction import CompactionConfig, ToolResultEvictionConfig
from harness.hooks import AgentTraceHook, SkillsHook, WorkspaceContextConfig
from harness.kernel import Finished, TextBlock
from harness.mcp import MCPServerConfig
from harness.models import ScriptedChatModel
from harness.options import child_options
from harness.session.lease import ProcessLeases
from harness.stores.memory import InMemoryStore
from harness.subagents import (
    SUBAGENT_CONTEXT,
    SubagentAgent,
    SubagentFactory,
    SubagentsConfig,
    SubagentSpec,
)
from harness.tools import subagents as subagent_tools
from harness.workspace import WorkspaceManager

DOC = Path(__file__).resolve().parents[3] / "docs" / "subagents.md"
RULES = {"declaration", "narrowed", "off", "shared", "inherited"}
QUIET = MemoryConfig(flush=False, auto_consolidate=False)
ALICE = RuntimeContext(session_id="main", user_id="alice")
FIELDS = [field.name for field in dataclasses.fields(AgentOptions)]


def table() -> dict[str, str]:
    """Option -> rule, from the rows of the doc's "What a child inherits" table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## What a child inherits\n", 1)[1].split("\n## ", 1)[0]
    row = re.compile(r"^\| `(\w+)` \| (\w+) \| .+ \|$", re.MULTILINE)
    return {match[1]: match[2] for match in row.finditer(section)}


def parent_options(workspace: Path) -> AgentOptions:
    """Options with a value of its own (not the default) for every field."""

    def tool() -> str:
        """A tool."""
        return "t"

    return AgentOptions(
        model=ScriptedChatModel([]),
        name="parent",
        workspace=WorkspaceManager(workspace),
        sys_prompt="PARENT PROMPT",
        tools=(tool,),
        hooks=(AgentTraceHook(None, agent_name="x"),),
        max_iters=7,
        workspace_context=WorkspaceContextConfig(max_context_tokens=1234),
        filesystem=None,
        store=InMemoryStore(),
        filesystem_tools=False,
        allowed_tools=("tool", "read_file", "calc__add"),
        memory=QUIET,
        memory_model=ScriptedChatModel([]),
        tool_result_eviction=ToolResultEvictionConfig(max_result_chars=999),
        compaction=CompactionConfig(),
        compaction_model=ScriptedChatModel([]),
        subagents=SubagentsConfig(max_running=2),
        skills=False,
        mcp_servers=(MCPServerConfig(name="calc", command="true"),),
        mcp_config=workspace.parent / "tools.json",
        trace=False,
        otel=True,
        session_wait=12.5,
        session_fsync="turn",
        session_leases=ProcessLeases(),
        approvals=ApprovalPolicy(rules={"tool": ApprovalRule()}),
        durable=True,
    )


# -- the table -------------------------------------------------------------------------------


def test_the_table_gives_every_option_one_known_rule() -> None:
    rules = table()
    assert sorted(rules) == sorted(FIELDS)
    assert set(rules.values()) <= RULES


def test_the_parent_options_of_these_tests_differ_from_the_defaults(workspace: Path) -> None:
    parent = parent_options(workspace)
    defaults = AgentOptions(model=parent.model)
    same = [n for n in FIELDS if n != "model" and getattr(parent, n) == getattr(defaults, n)]
    assert same == ["filesystem"]  # None is the only filesystem a workspace manager can take


# -- child_options follows it ----------------------------------------------------------------


def check_inherited(parent: AgentOptions, child: AgentOptions) -> None:
    """Every shared or inherited option of the child is the parent's object itself."""
    for name, rule in table().items():
        if rule in {"shared", "inherited"}:
            assert getattr(child, name) is getattr(parent, name), name
        elif rule == "off":
            assert getattr(child, name) is None, name


def test_a_spec_overrides_what_the_table_says_and_inherits_the_rest(workspace: Path) -> None:
    parent = parent_options(workspace)
    own = ScriptedChatModel([])
    spec = SubagentSpec(
        name="narrow",
        description="Narrow.",
        sys_prompt="CHILD PROMPT",
        model=own,
        max_iters=3,
        tools=("read_file", "write_file", "calc__add"),
    )
    child = child_options(parent, spec)
    check_inherited(parent, child)
    declared = {
        "name": "narrow",
        "sys_prompt": f"CHILD PROMPT\n\n{SUBAGENT_CONTEXT}",
        "model": own,
        "max_iters": 3,
    }
    assert {n: getattr(child, n) for n, rule in table().items() if rule == "declaration"} == (
        declared
    )
    # within the parent's: write_file is declared, but the parent does not allow it
    assert child.allowed_tools == ("read_file", "calc__add")


def test_a_spec_that_says_nothing_keeps_the_parents_model_and_limits(workspace: Path) -> None:
    parent = parent_options(workspace)
    child = child_options(parent, SubagentSpec(name="plain", description="Plain."))
    check_inherited(parent, child)
    assert child.model is parent.model
    assert child.allowed_tools == parent.allowed_tools
    assert child.sys_prompt == SUBAGENT_CONTEXT
    no_limit = child_options(dataclasses.replace(parent, allowed_tools=None), spec_with_tools())
    assert no_limit.allowed_tools == ("read_file",)


def spec_with_tools() -> SubagentSpec:
    return SubagentSpec(name="reader", description="Reads.", tools=("read_file",))


def test_a_factory_gets_the_parents_options_with_its_name_and_the_subagent_context(
    workspace: Path,
) -> None:
    parent = parent_options(workspace)
    factory = SubagentFactory(name="made", description="Made.", build=lambda options: Echo())
    child = child_options(parent, factory)
    check_inherited(parent, child)
    assert child == dataclasses.replace(
        parent, name="made", sys_prompt=SUBAGENT_CONTEXT, subagents=None
    )


class Echo:
    async def call(self, msgs: str, *, ctx: RuntimeContext) -> Finished:
        return Finished(Msg(role="assistant", name="echo", content=[TextBlock(text="echo")]))


# -- the options value and the agent ---------------------------------------------------------


def test_the_agents_keywords_are_the_options_fields() -> None:
    parameters = list(inspect.signature(HarnessAgent.__init__).parameters.values())[1:]
    fields = dataclasses.fields(AgentOptions)
    assert [p.name for p in parameters] == [f.name for f in fields]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
    for parameter, field in zip(parameters, fields, strict=True):
        default = inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
        assert parameter.default is default, field.name
        assert parameter.annotation == field.type, field.name


def test_every_keyword_reaches_the_agents_options(workspace: Path) -> None:
    given = {n: getattr(parent_options(workspace), n) for n in FIELDS}
    given["subagents"] = None  # delegation would need a model that answers
    agent = HarnessAgent(**given)
    built = {"model", "workspace", "memory_model", "compaction_model", "session_leases"}
    for name in set(FIELDS) - built - {"tools"}:
        assert getattr(agent.options, name) == given[name], name
    for name in built:  # given as objects, so the agent used them as they are
        assert getattr(agent.options, name) is given[name], name
    assert isinstance(agent.options.tools, tuple)
    assert [tool.name for tool in agent.options.tools] == ["tool"]  # as the toolkit's Tool


async def test_from_options_builds_the_agent_the_options_describe(workspace: Path) -> None:
    model = ScriptedChatModel([{"text": "hi", "repeat": True}])
    options = AgentOptions(
        model=model, workspace=workspace, name="built", max_iters=3, skills=False, memory=None
    )
    async with HarnessAgent.from_options(options) as agent:
        assert agent.name == "built"
        assert agent.delegate.max_iters == 3
        assert "load_skill" not in agent.delegate.toolkit
        assert agent.options == dataclasses.replace(
            options,
            workspace=agent.workspace,
            memory_model=model,
            compaction_model=model,
            session_leases=agent.leases,
        )
        # an agent made from another's options shares what that one built
        async with HarnessAgent.from_options(agent.options) as sibling:
            assert sibling.workspace is agent.workspace
            assert sibling.leases is agent.leases
            assert sibling.model is model
            assert (answer(await sibling.call("hello"))).text == "hi"


def test_options_keep_what_they_were_given_as_tuples() -> None:
    def tool() -> str:
        """A tool."""
        return "t"

    options = AgentOptions(
        model="scripted:x",
        tools=(t for t in [tool]),
        hooks=[],
        mcp_servers=[],
        allowed_tools=["tool"],
        subagents=[SubagentSpec(name="a", description="A.")],
    )
    assert options.tools == (tool,)
    assert options.hooks == ()
    assert options.mcp_servers == ()
    assert options.allowed_tools == ("tool",)
    assert isinstance(options.subagents, tuple)
    with pytest.raises(ValueError, match="allowed_tools must be a list of tool names"):
        AgentOptions(model="scripted:x", allowed_tools="tool")


async def test_allowed_tools_offers_only_those_and_drops_the_skills_section(
    workspace: Path,
) -> None:
    async with HarnessAgent(
        model=ScriptedChatModel([]),
        workspace=workspace,
        memory=None,
        allowed_tools=["read_file", "nope"],
    ) as agent:
        assert agent.delegate.toolkit.names == ["read_file"]
        assert agent.mcp.allowed == frozenset({"read_file", "nope"})
        assert not any(isinstance(hook, SkillsHook) for hook in agent.delegate.hooks.hooks)


# -- through a parent: the options a declaration cannot reach --------------------------------


def spawning(agent_id: str) -> ScriptedChatModel:
    call = {"name": "agent_spawn", "input": {"agent_id": agent_id, "task": "do the task"}}
    return ScriptedChatModel(
        [
            {"match": "^delegate$", "tool_calls": [call]},
            {"match": "agent_key: ", "text": "parent done", "repeat": True},
            {"text": "child done", "repeat": True},
        ]
    )


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[SubagentAgent]:
    built: list[SubagentAgent] = []
    original = subagent_tools.build_child

    def recording(*args: Any) -> SubagentAgent:
        built.append(original(*args))
        return built[-1]

    monkeypatch.setattr(subagent_tools, "build_child", recording)
    return built


async def test_a_child_inherits_skills_file_tools_otel_and_mcp_servers(
    workspace: Path, children: list[SubagentAgent]
) -> None:
    servers = (MCPServerConfig(name="calc", command="true"),)  # fails to start: a warning
    async with HarnessAgent(
        model=spawning("general-purpose"),
        workspace=workspace,
        memory=QUIET,
        skills=False,
        filesystem_tools=False,
        tool_result_eviction=None,
        otel=True,
        mcp_servers=servers,
    ) as parent:
        assert (answer(await parent.call("delegate", ctx=ALICE))).text == "parent done"
        [child] = children
        assert isinstance(child, HarnessAgent)
        assert child.options.skills is False
        assert child.options.filesystem_tools is False
        assert child.options.otel is True
        assert child.mcp.servers == servers
        assert child.mcp.toolset is not None  # its own, started at its first call
        assert child.mcp.toolset is not parent.mcp.toolset
        names = child.delegate.toolkit.names
        assert not {"load_skill", "read_file", "write_file"} & set(names)
        [trace] = [h for h in child.delegate.hooks.hooks if isinstance(h, AgentTraceHook)]
        assert trace.spans is not None


async def test_a_declaration_narrows_the_inherited_tools_and_cannot_widen_them(
    workspace: Path, children: list[SubagentAgent]
) -> None:
    (workspace / "subagents").mkdir()
    (workspace / "subagents" / "wide.md").write_text(
        "---\nname: wide\ndescription: Wants more.\n"
        "tools: [read_file, write_file, load_skill]\n---\nWIDE\n"
    )
    async with HarnessAgent(
        model=spawning("wide"),
        workspace=workspace,
        memory=QUIET,
        filesystem_tools=False,
        tool_result_eviction=None,
    ) as parent:
        answer(await parent.call("delegate", ctx=ALICE))
        [child] = children
        assert isinstance(child, HarnessAgent)
        # no file tools in the parent, so none in the child; load_skill it has and allows
        assert child.delegate.toolkit.names == ["load_skill"]
