"""The "## Subagents" prompt section and completion notices, through HarnessAgent.call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from _children import Child, factory

from _outcomes import answer, ran
from harness import HarnessAgent, RuntimeContext
from harness.hooks import SubagentsHook
from harness.kernel import Msg, TextBlock
from harness.models import ScriptedChatModel
from harness.subagents import SubagentFactory, SubagentsConfig, SubagentSpec

ALICE = RuntimeContext(session_id="s1", user_id="alice")
REMINDER = "<system-reminder>"


def chatty() -> ScriptedChatModel:
    """A parent that answers every request with text."""
    return ScriptedChatModel([{"text": "ok", "repeat": True}])


def make_agent(
    workspace: Path,
    *declarations: SubagentSpec | SubagentFactory,
    model: ScriptedChatModel | None = None,
    **config: Any,
) -> HarnessAgent:
    return HarnessAgent(
        model=model or chatty(),
        workspace=workspace,
        memory=None,
        subagents=SubagentsConfig(declarations=declarations, **config),
    )


def hook(agent: HarnessAgent) -> SubagentsHook:
    assert agent.subagents is not None
    return agent.subagents


def system_text(request: list[Msg]) -> str:
    """The system message's text blocks, one paragraph each (``Msg.text`` runs them together)."""
    return "\n\n".join(
        block.text
        for m in request
        if m.role == "system"
        for block in m.content
        if isinstance(block, TextBlock)
    )


def section(request: list[Msg]) -> str:
    """The one text block that holds the subagents section."""
    (found,) = [
        block.text
        for m in request
        if m.role == "system"
        for block in m.content
        if isinstance(block, TextBlock) and "## Subagents" in block.text
    ]
    return found


def reminders(request: list[Msg]) -> list[str]:
    return [m.text for m in request if REMINDER in m.text]


async def spawn_background(agent: HarnessAgent, ctx: RuntimeContext = ALICE) -> str:
    out = ran(await hook(agent).spawning.agent_spawn("worker", ctx, task="job", timeout_seconds=0))
    task_id = next(line for line in out.splitlines() if line.startswith("task_id: "))
    return task_id.removeprefix("task_id: ")


async def settle(agent: HarnessAgent, user_id: str | None = "alice") -> None:
    assert agent.tasks is not None
    for record in await agent.tasks.records(user_id):
        await agent.tasks.wait(record, 5)


# -- the prompt section --------------------------------------------------------------------


async def test_section_lists_builtin_declared_and_workspace_agents(workspace: Path) -> None:
    (workspace / "subagents").mkdir()
    (workspace / "subagents" / "helper.md").write_text(
        "---\nname: helper\ndescription: Helps with files.\n---\nYou help.\n"
    )
    model = chatty()
    spec = SubagentSpec(name="worker", description="Does the heavy work.")
    async with make_agent(workspace, spec, model=model) as agent:
        answer(await agent.call("hi", ctx=ALICE))
        names = agent.delegate.toolkit.names
    text = section(model.requests[0])
    assert text.startswith("## Subagents\n")
    listed = text.split("\n### Available agent ids\n", 1)[1].splitlines()
    assert len(listed) == 3
    assert listed[0].startswith("- `general-purpose`: A general-purpose subagent")
    assert listed[1:] == ["- `worker`: Does the heavy work.", "- `helper`: Helps with files."]
    for tool in ("agent_spawn", "agent_send", "agent_list", "task_output", "task_cancel"):
        assert tool in names
    assert "task_list" in names


async def test_section_without_general_purpose(workspace: Path) -> None:
    model = chatty()
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        subagents=SubagentsConfig(declarations=(factory(Child()),), general_purpose=False),
    )
    async with agent:
        answer(await agent.call("hi", ctx=ALICE))
        out = ran(await hook(agent).spawning.agent_spawn("general-purpose", ALICE, task="x"))
    text = section(model.requests[0])
    assert text.endswith("### Available agent ids\n- `worker`: The worker subagent.")
    assert "general-purpose" not in system_text(model.requests[0])
    assert out.startswith("Error: Unknown agent_id: general-purpose")


async def test_declaration_list_is_accepted_as_subagents(workspace: Path) -> None:
    model = chatty()
    agent = HarnessAgent(
        model=model, workspace=workspace, memory=None, subagents=[factory(Child())]
    )
    async with agent:
        answer(await agent.call("hi", ctx=ALICE))
    system = system_text(model.requests[0])
    assert "- `worker`: The worker subagent." in system
    assert "- `general-purpose`:" in system


async def test_no_subagents_means_no_section_and_no_tools(workspace: Path) -> None:
    model = chatty()
    async with HarnessAgent(model=model, workspace=workspace, memory=None, subagents=None) as agent:
        answer(await agent.call("hi", ctx=ALICE))
        names = set(agent.delegate.toolkit.names)
        assert agent.subagents is None
        assert agent.tasks is None
    assert "## Subagents" not in system_text(model.requests[0])
    tools = {"agent_spawn", "agent_send", "agent_list", "task_output", "task_cancel", "task_list"}
    assert not names & tools


async def test_section_is_added_once_per_step(workspace: Path) -> None:
    parent = ScriptedChatModel(
        [
            {"match": "list", "tool_calls": [{"name": "agent_list", "input": {}}]},
            {"match": "No active subagents", "text": "none"},
        ]
    )
    async with make_agent(workspace, factory(Child()), model=parent) as agent:
        assert (answer(await agent.call("list them", ctx=ALICE))).text == "none"
    assert len(parent.requests) == 2
    for request in parent.requests:
        assert system_text(request).count("## Subagents") == 1
        section(request)


# -- completion notices --------------------------------------------------------------------


async def test_notice_is_delivered_once_after_background_task(workspace: Path) -> None:
    gate = asyncio.Event()
    child = Child("line one\nline two", gate=gate)
    parent = ScriptedChatModel(
        [
            {
                "match": "start",
                "tool_calls": [
                    {
                        "name": "agent_spawn",
                        "input": {"agent_id": "worker", "task": "job", "timeout_seconds": 0},
                    }
                ],
            },
            {"match": "status: accepted", "text": "started"},
            {"text": "noted", "repeat": True},
        ]
    )
    async with make_agent(workspace, factory(child), model=parent) as agent:
        assert (answer(await agent.call("start it", ctx=ALICE))).text == "started"
        assert all(not reminders(request) for request in parent.requests)
        assert agent.tasks is not None
        (record,) = await agent.tasks.records("alice")
        gate.set()
        await settle(agent)

        second_first = len(parent.requests)
        answer(await agent.call("anything new?", ctx=ALICE))
        (notice,) = reminders(parent.requests[second_first])
        assert notice.startswith(REMINDER)
        assert notice.rstrip().endswith("</system-reminder>")
        assert "1 background subagent task has finished" in notice
        assert f'<task id="{record.task_id}" state="completed" agent="worker">' in notice
        assert "<task_result>\nline one\nline two\n</task_result>" in notice
        assert "lines in all" not in notice

        saved = await agent.sessions.load(ALICE)
        assert sum(REMINDER in m.text for m in saved) == 1

        third_first = len(parent.requests)
        answer(await agent.call("and now?", ctx=ALICE))
        assert reminders(parent.requests[third_first]) == [notice]  # history only, no new one
        saved = await agent.sessions.load(ALICE)
        assert sum(REMINDER in m.text for m in saved) == 1
        stored = await agent.tasks.get(record.task_id, "alice")
        assert stored is not None
        assert stored.delivered_at is not None


async def test_notice_cuts_long_results(workspace: Path) -> None:
    body = "\n".join(f"row {i}" for i in range(1, 101))
    model = chatty()
    async with make_agent(workspace, factory(Child(body)), model=model, notice_lines=5) as agent:
        await spawn_background(agent)
        await settle(agent)
        answer(await agent.call("hi", ctx=ALICE))
    (notice,) = reminders(model.requests[0])
    assert "row 5\n" in notice
    assert "row 6" not in notice
    assert "(100 lines in all)" in notice


async def test_notice_of_failed_task(workspace: Path) -> None:
    model = chatty()
    child = Child(error=RuntimeError("it broke"))
    async with make_agent(workspace, factory(child), model=model) as agent:
        task_id = await spawn_background(agent)
        await settle(agent)
        answer(await agent.call("hi", ctx=ALICE))
    (notice,) = reminders(model.requests[0])
    assert f'<task id="{task_id}" state="error" agent="worker">' in notice
    assert "<task_error>it broke</task_error>" in notice
    assert "<task_result>" not in notice


async def test_notice_of_cancelled_task(workspace: Path) -> None:
    model = chatty()
    child = Child(gate=asyncio.Event())
    async with make_agent(workspace, factory(child), model=model) as agent:
        task_id = await spawn_background(agent)
        await asyncio.wait_for(child.started.wait(), 5)
        out = await hook(agent).task_tools.task_cancel(task_id, ALICE)
        assert "status: cancelled" in out
        answer(await agent.call("hi", ctx=ALICE))
    (notice,) = reminders(model.requests[0])
    assert f'<task id="{task_id}" state="cancelled" agent="worker">' in notice


async def test_notice_shows_ten_tasks_and_counts_the_rest(workspace: Path) -> None:
    model = chatty()
    async with make_agent(workspace, factory(Child("r")), model=model) as agent:
        for _ in range(12):
            await spawn_background(agent)
        await settle(agent)
        answer(await agent.call("hi", ctx=ALICE))
    (notice,) = reminders(model.requests[0])
    assert "12 background subagent tasks have finished" in notice
    assert notice.count("<task id=") == 10
    assert "... and 2 more" in notice


async def test_notice_goes_only_to_the_spawning_session(workspace: Path) -> None:
    model = chatty()
    bob = RuntimeContext(session_id="s1", user_id="bob")
    other = RuntimeContext(session_id="s2", user_id="alice")
    async with make_agent(workspace, factory(Child("res")), model=model) as agent:
        task_id = await spawn_background(agent)
        await settle(agent)
        answer(await agent.call("hi", ctx=bob))
        answer(await agent.call("hi", ctx=other))
        assert all(not reminders(request) for request in model.requests)
        answer(await agent.call("hi", ctx=ALICE))
        (notice,) = reminders(model.requests[-1])
        assert task_id in notice
        assert not any(REMINDER in m.text for m in await agent.sessions.load(other))
        assert not any(REMINDER in m.text for m in await agent.sessions.load(bob))


async def test_notice_survives_a_restart(workspace: Path) -> None:
    async with make_agent(workspace, factory(Child("before restart"))) as first:
        task_id = await spawn_background(first)
        await settle(first)
    model = chatty()
    async with make_agent(workspace, factory(Child()), model=model) as second:
        answer(await second.call("hi", ctx=RuntimeContext(session_id="s1", user_id="bob")))
        assert not reminders(model.requests[-1])
        answer(await second.call("hi", ctx=ALICE))
        (notice,) = reminders(model.requests[-1])
        assert f'<task id="{task_id}" state="completed" agent="worker">' in notice
        assert "before restart" in notice
        answer(await second.call("again", ctx=ALICE))
    assert reminders(model.requests[-1]) == [notice]
    async with make_agent(workspace, factory(Child()), model=chatty()) as third:
        assert third.tasks is not None
        assert await third.tasks.undelivered(ALICE) == []
