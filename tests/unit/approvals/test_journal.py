"""A durable agent decides a call found unanswered from its journal, and never past a gate.

The states a worker can die in, for every mix of gated or not and idempotent or not: the
model's reply saved and its call never started (it runs, or waits if gated: never past the
gate); started and never finished (outcome unknown, unless idempotent: then it runs again);
finished (its recorded result; it does not run again).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import HarnessAgent, RuntimeContext
from harness.approvals import ApprovalPolicy, ApprovalRule
from harness.kernel import Finished, Msg, Paused, Run, ToolResultBlock, ToolUseBlock
from harness.models import ScriptedChatModel

CALL = ToolUseBlock(id="call_1", name="act", input={"x": 1})


def agent_for(root: Path, *, gated: bool, idempotent: bool, ran: list[int]) -> HarnessAgent:
    def act(x: int) -> str:
        """Act."""
        ran.append(x)
        return f"acted {x}"

    rules = {"act": ApprovalRule(idempotent=idempotent)} if gated else {}
    return HarnessAgent(
        model=ScriptedChatModel([{"text": "after", "repeat": True}]),
        workspace=root,
        tools=[act],
        memory=None,
        subagents=None,
        trace=False,
        approvals=ApprovalPolicy(
            rules=rules, idempotent=frozenset({"act"}) if idempotent else frozenset()
        ),
        durable=True,
    )


async def died(agent: HarnessAgent, ctx: RuntimeContext, state: str) -> None:
    """Leave the session as a worker that died in ``state`` would have (an ungated call's
    journal, for "started" and "finished", written by the gate itself)."""
    reply = Msg(role="assistant", name=agent.name, content=[CALL])
    await agent.sessions.save(ctx, [Msg(role="user", content="go"), reply])
    if state == "never started":
        return
    assert agent.approvals is not None
    key = agent.sessions.directory(ctx)
    tool = agent.delegate.toolkit.get("act")
    started = await agent.approvals.decide(key, agent.name, ctx, CALL, tool, resumed=False)
    assert isinstance(started, Run)  # journaled as started, and not run here
    if state == "finished":
        result = ToolResultBlock(id=CALL.id, name=CALL.name, output="acted 1 (recorded)")
        await agent.approvals.finished(key, CALL, result)


def tool_result(agent_messages: list[Msg]) -> str:
    (result,) = [block for m in agent_messages for block in m.tool_results]
    return result.text


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_call_that_never_started_runs_once(tmp_path: Path, idempotent: bool) -> None:
    ran: list[int] = []
    ctx = RuntimeContext(session_id="s")
    async with agent_for(tmp_path, gated=False, idempotent=idempotent, ran=ran) as agent:
        await died(agent, ctx, "never started")
        ended = await agent.resume(ctx=ctx)
        again = await agent.resume(ctx=ctx)  # a second takeover finds the turn over
        assert isinstance(ended, Finished)
        assert isinstance(again, Finished)
        assert ran == [1]
        assert tool_result(await agent.sessions.load(ctx)) == "acted 1"


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_gated_call_that_never_started_still_waits(
    tmp_path: Path, idempotent: bool
) -> None:
    ran: list[int] = []
    ctx = RuntimeContext(session_id="s")
    async with agent_for(tmp_path, gated=True, idempotent=idempotent, ran=ran) as agent:
        await died(agent, ctx, "never started")
        ended = await agent.resume(ctx=ctx)
        assert isinstance(ended, Paused)
        assert [request["tool"] for request in ended.pending] == ["act"]
        assert ran == []


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_call_that_started_is_unknown_unless_idempotent(
    tmp_path: Path, idempotent: bool
) -> None:
    ran: list[int] = []
    ctx = RuntimeContext(session_id="s")
    async with agent_for(tmp_path, gated=False, idempotent=idempotent, ran=ran) as agent:
        await died(agent, ctx, "started")
        ended = await agent.resume(ctx=ctx)
        assert isinstance(ended, Finished)
        result = tool_result(await agent.sessions.load(ctx))
        if idempotent:
            assert ran == [1]
            assert result == "acted 1"
        else:
            assert ran == []
            assert "whether it took effect is unknown" in result


async def test_a_call_that_finished_gets_its_recorded_result(tmp_path: Path) -> None:
    ran: list[int] = []
    ctx = RuntimeContext(session_id="s")
    async with agent_for(tmp_path, gated=False, idempotent=True, ran=ran) as agent:
        await died(agent, ctx, "finished")
        ended = await agent.resume(ctx=ctx)
        assert isinstance(ended, Finished)
        assert ran == []
        assert tool_result(await agent.sessions.load(ctx)) == "acted 1 (recorded)"


async def test_without_durable_a_call_found_unanswered_is_a_lost_result(tmp_path: Path) -> None:
    """The default agent keeps its rule: a call it did not see finish is never run again."""
    ran: list[int] = []
    ctx = RuntimeContext(session_id="s")

    def act(x: int) -> str:
        """Act."""
        ran.append(x)
        return "acted"

    async with HarnessAgent(
        model=ScriptedChatModel([{"text": "after", "repeat": True}]),
        workspace=tmp_path,
        tools=[act],
        memory=None,
        subagents=None,
        trace=False,
    ) as agent:
        await agent.sessions.save(
            ctx, [Msg(role="user", content="go"), Msg(role="assistant", content=[CALL])]
        )
        await agent.call("next", ctx=ctx)
        assert ran == []
