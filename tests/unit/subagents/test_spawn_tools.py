"""agent_spawn, agent_send and agent_list, called directly and through a scripted parent."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from _children import Child, factory

from _outcomes import answer, ran
from harness import AgentOptions, HarnessAgent, RuntimeContext
from harness.errors import StorageError
from harness.hooks import SubagentsHook
from harness.models import ScriptedChatModel
from harness.subagents import (
    SPAWN_DEPTH_KEY,
    SubagentFactory,
    SubagentsConfig,
    SubagentSpec,
)

ALICE = RuntimeContext(session_id="s1", user_id="alice")


def counting_child(reply: str = "done", **options: Any) -> Child:
    return Child(reply, numbered=True, **options)


KEY_LINE = re.compile(r"^agent_key: agent:worker:([0-9a-f]{16})$", re.MULTILINE)
TASK_LINE = re.compile(r"^task_id: (task_[0-9a-f]{16})$", re.MULTILINE)


class Builds:
    """A factory's build function that counts the children it builds."""

    def __init__(self, child: Child) -> None:
        self.child = child
        self.count = 0

    def __call__(self, options: AgentOptions) -> Child:
        self.count += 1
        return self.child


def make_agent(
    workspace: Path,
    *declarations: SubagentSpec | SubagentFactory,
    model: ScriptedChatModel | None = None,
    **config: Any,
) -> HarnessAgent:
    return HarnessAgent(
        model=model or ScriptedChatModel([]),
        workspace=workspace,
        memory=None,
        subagents=SubagentsConfig(declarations=declarations, **config),
    )


def hook(agent: HarnessAgent) -> SubagentsHook:
    assert agent.subagents is not None
    return agent.subagents


async def wait_all(agent: HarnessAgent, ctx: RuntimeContext = ALICE) -> None:
    assert agent.tasks is not None
    for record in await agent.tasks.records(ctx.user_id):
        await agent.tasks.wait(record, 5)


def key_of(output: str) -> str:
    match = KEY_LINE.search(output)
    assert match is not None, output
    return f"agent:worker:{match.group(1)}"


def task_of(output: str) -> str:
    match = TASK_LINE.search(output)
    assert match is not None, output
    return match.group(1)


# -- agent_spawn ---------------------------------------------------------------------------


async def test_spawn_without_task_is_accepted_with_header(workspace: Path) -> None:
    child = counting_child()
    async with make_agent(workspace, factory(child)) as agent:
        out = ran(await hook(agent).spawning.agent_spawn("worker", ALICE))
    lines = out.splitlines()
    assert len(lines) == 4, out
    match = KEY_LINE.fullmatch(lines[0])
    assert match is not None, out
    hexpart = match.group(1)
    assert lines[1:] == ["agent_id: worker", f"session_id: sub-{hexpart}", "status: accepted"]
    assert child.calls == []


async def test_spawn_blank_task_is_like_no_task(workspace: Path) -> None:
    child = counting_child()
    async with make_agent(workspace, factory(child)) as agent:
        out = ran(await hook(agent).spawning.agent_spawn("worker", ALICE, task="   "))
    assert out.endswith("\nstatus: accepted")
    assert child.calls == []


async def test_spawn_sync_ok_returns_reply(workspace: Path) -> None:
    child = counting_child("all good")
    async with make_agent(workspace, factory(child)) as agent:
        out = ran(await hook(agent).spawning.agent_spawn("worker", ALICE, task="do it"))
    key = key_of(out)
    assert out.startswith(f"agent_key: {key}\nagent_id: worker\nsession_id: sub-")
    assert out.endswith("\nstatus: ok\nreply:\nall good #1")
    assert [text for text, _ in child.calls] == ["do it"]


async def test_spawn_child_error_is_reported(workspace: Path) -> None:
    child = counting_child(error=RuntimeError("boom"))
    async with make_agent(workspace, factory(child)) as agent:
        out = ran(await hook(agent).spawning.agent_spawn("worker", ALICE, task="do it"))
    key_of(out)
    assert out.endswith("\nstatus: error\nerror: boom")


async def test_spawn_background_returns_task_id(workspace: Path) -> None:
    child = counting_child("bg result")
    async with make_agent(workspace, factory(child)) as agent:
        tools = hook(agent)
        out = ran(await tools.spawning.agent_spawn("worker", ALICE, task="go", timeout_seconds=0))
        key_of(out)
        assert "\nstatus: accepted\n" in out
        task_id = task_of(out)
        assert f"task_output(task_id='{task_id}')" in out
        result = await tools.task_tools.task_output(task_id, ALICE)
    assert "status: completed" in result
    assert result.endswith("Result:\nbg result #1")


async def test_spawn_negative_timeout_runs_in_background(workspace: Path) -> None:
    child = counting_child()
    async with make_agent(workspace, factory(child)) as agent:
        out = ran(
            await hook(agent).spawning.agent_spawn("worker", ALICE, task="go", timeout_seconds=-3)
        )
        assert "status: accepted" in out
        task_of(out)
        await wait_all(agent)


@pytest.mark.parametrize("agent_id", ["", "   "])
async def test_spawn_requires_agent_id(workspace: Path, agent_id: str) -> None:
    async with make_agent(workspace, factory(counting_child())) as agent:
        out = await hook(agent).spawning.agent_spawn(agent_id, ALICE, task="x")
    assert out == "Error: agent_id is required"


async def test_spawn_unknown_agent_id_lists_available(workspace: Path) -> None:
    async with make_agent(workspace, factory(counting_child())) as agent:
        out = ran(await hook(agent).spawning.agent_spawn("nobody", ALICE, task="x"))
    assert out.startswith("Error: Unknown agent_id: nobody")
    assert "general-purpose" in out
    assert "worker" in out


@pytest.mark.parametrize(("first", "second"), [("Scout", "scout"), ("scout", "SCOUT")])
async def test_spawn_label_reuse_is_case_insensitive(
    workspace: Path, first: str, second: str
) -> None:
    child = counting_child()
    async with make_agent(workspace, factory(child)) as agent:
        spawning = hook(agent).spawning
        out = ran(await spawning.agent_spawn("worker", ALICE, label=first))
        assert out.endswith("status: accepted")
        again = ran(await spawning.agent_spawn("worker", ALICE, label=second, task="x"))
        assert again == f"Error: Label already in use: {second}"
        listed = await spawning.agent_list(ALICE)
    assert listed.startswith("Active subagents (1):")
    assert f"  label: {first}" in listed
    assert child.calls == []


async def test_spawn_depth_limit(workspace: Path) -> None:
    child = counting_child()
    deep = RuntimeContext(session_id="s1", user_id="alice", extra={SPAWN_DEPTH_KEY: 3})
    async with make_agent(workspace, factory(child)) as agent:
        out = await hook(agent).spawning.agent_spawn("worker", deep, task="x")
    assert out == "Error: Maximum spawn depth exceeded (max=3)"
    assert child.calls == []


async def test_spawn_depth_limit_follows_config(workspace: Path) -> None:
    deep = RuntimeContext(session_id="s1", extra={SPAWN_DEPTH_KEY: 1})
    async with make_agent(workspace, factory(counting_child()), max_depth=1) as agent:
        out = await hook(agent).spawning.agent_spawn("worker", deep, task="x")
    assert out == "Error: Maximum spawn depth exceeded (max=1)"


@pytest.mark.parametrize(("parent_depth", "child_depth"), [(None, 1), (1, 2), (2, 3)])
async def test_child_ctx_depth_is_parent_plus_one(
    workspace: Path, parent_depth: int | None, child_depth: int
) -> None:
    child = counting_child()
    extra: dict[str, Any] = {"app": "value"}
    if parent_depth is not None:
        extra[SPAWN_DEPTH_KEY] = parent_depth
    ctx = RuntimeContext(session_id="s1", user_id="alice", extra=extra)
    async with make_agent(workspace, factory(child)) as agent:
        out = ran(await hook(agent).spawning.agent_spawn("worker", ctx, task="x"))
        listed = await hook(agent).spawning.agent_list(ctx)
    assert "status: ok" in out
    ((_, child_ctx),) = child.calls
    assert child_ctx.get(SPAWN_DEPTH_KEY) == child_depth
    assert child_ctx.get("app") == "value"
    assert child_ctx.user_id == "alice"
    session = re.search(r"^session_id: (\S+)$", out, re.MULTILINE)
    assert session is not None
    assert child_ctx.session_id == session.group(1)
    assert f"spawn_depth: {child_depth}" in listed


# -- timeouts ------------------------------------------------------------------------------


def test_timeout_resolution() -> None:
    config = SubagentsConfig()
    assert config.timeout(None) == 30
    assert config.timeout(0) == 0
    assert config.timeout(-1) == 0
    assert config.timeout(12.5) == 12.5
    assert config.timeout(10**9) == 600
    custom = SubagentsConfig(default_timeout_seconds=5, max_timeout_seconds=20)
    assert custom.timeout(None) == 5
    assert custom.timeout(21) == 20


async def test_default_timeout_applies_when_none_given(workspace: Path) -> None:
    gate = asyncio.Event()
    child = counting_child(gate=gate)
    async with make_agent(workspace, factory(child), default_timeout_seconds=0.1) as agent:
        out = ran(await hook(agent).spawning.agent_spawn("worker", ALICE, task="slow"))
        assert "status: timeout_promoted" in out
        assert "No reply within 0.1 s" in out
        gate.set()
        await wait_all(agent)


async def test_requested_timeout_is_capped(workspace: Path) -> None:
    gate = asyncio.Event()
    child = counting_child(gate=gate)
    async with make_agent(workspace, factory(child), max_timeout_seconds=0.1) as agent:
        out = ran(
            await hook(agent).spawning.agent_spawn(
                "worker", ALICE, task="slow", timeout_seconds=10_000
            )
        )
        assert "status: timeout_promoted" in out
        assert "No reply within 0.1 s" in out
        gate.set()
        await wait_all(agent)


async def test_slow_child_is_promoted_not_cancelled(workspace: Path) -> None:
    gate = asyncio.Event()
    child = counting_child("late reply", gate=gate)
    async with make_agent(workspace, factory(child)) as agent:
        tools = hook(agent)
        out = ran(
            await tools.spawning.agent_spawn("worker", ALICE, task="slow", timeout_seconds=0.2)
        )
        key_of(out)
        assert "\nstatus: timeout_promoted\n" in out
        task_id = task_of(out)
        assert f"task_output(task_id='{task_id}')" in out
        peek = await tools.task_tools.task_output(task_id, ALICE, block=False)
        assert "status: running" in peek
        assert not child.cancelled.is_set()
        gate.set()
        result = await tools.task_tools.task_output(task_id, ALICE, timeout_ms=5000)
    assert not child.cancelled.is_set()
    assert "status: completed" in result
    assert result.endswith("Result:\nlate reply #1")
    assert len(child.calls) == 1


async def test_cancelled_parent_cancels_waiting_child(workspace: Path) -> None:
    child = counting_child(gate=asyncio.Event())
    async with make_agent(workspace, factory(child)) as agent:
        call = asyncio.create_task(
            hook(agent).spawning.agent_spawn("worker", ALICE, task="x", timeout_seconds=30)
        )
        await asyncio.wait_for(child.started.wait(), 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(child.cancelled.wait(), 5)
        assert agent.tasks is not None
        assert await agent.tasks.records("alice") == []


# -- agent_send ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"message": "hi", "agent_key": "agent:worker:1", "label": "a"},
            "Error: Provide either agent_key or label, not both.",
        ),
        ({"message": "hi"}, "Error: Either agent_key or label is required."),
        ({"message": "  ", "label": "scout"}, "Error: message is required"),
        ({"message": "", "label": "scout"}, "Error: message is required"),
        ({"message": "hi", "label": "nope"}, "Error: Unknown label: nope"),
        (
            {"message": "hi", "agent_key": "agent:worker:0123"},
            "Error: Unknown agent_key: agent:worker:0123",
        ),
    ],
)
async def test_send_errors(workspace: Path, kwargs: dict[str, Any], expected: str) -> None:
    child = counting_child()
    async with make_agent(workspace, factory(child)) as agent:
        spawning = hook(agent).spawning
        ran(await spawning.agent_spawn("worker", ALICE, label="scout"))
        out = ran(await spawning.agent_send(ctx=ALICE, **kwargs))
    assert out == expected
    assert child.calls == []


async def test_send_continues_same_child_by_key_and_label(workspace: Path) -> None:
    child = counting_child("answer")
    builds = Builds(child)
    worker = SubagentFactory(name="worker", description="Works.", build=builds)
    async with make_agent(workspace, worker) as agent:
        spawning = hook(agent).spawning
        key = key_of(ran(await spawning.agent_spawn("worker", ALICE, label="Scout")))
        by_key = ran(await spawning.agent_send("first", ALICE, agent_key=key))
        by_label = ran(await spawning.agent_send("second", ALICE, label="SCOUT"))
    assert builds.count == 1
    assert by_key == f"agent_key: {key}\nstatus: ok\nreply:\nanswer #1"
    assert by_label == f"agent_key: {key}\nstatus: ok\nreply:\nanswer #2"
    assert [text for text, _ in child.calls] == ["first", "second"]
    sessions = {ctx.session_id for _, ctx in child.calls}
    assert sessions == {"sub-" + key.rsplit(":", 1)[1]}


async def test_send_error_of_child(workspace: Path) -> None:
    child = counting_child(error=ValueError("bad input"))
    async with make_agent(workspace, factory(child)) as agent:
        spawning = hook(agent).spawning
        key = key_of(ran(await spawning.agent_spawn("worker", ALICE)))
        out = ran(await spawning.agent_send("x", ALICE, agent_key=key))
    assert out == "Error: bad input"


async def test_send_in_background_returns_accepted_block(workspace: Path) -> None:
    child = counting_child("later")
    async with make_agent(workspace, factory(child)) as agent:
        tools = hook(agent)
        key = key_of(ran(await tools.spawning.agent_spawn("worker", ALICE)))
        out = ran(await tools.spawning.agent_send("go", ALICE, agent_key=key, timeout_seconds=0))
        assert out.startswith("status: accepted\ntask_id: task_")
        task_id = task_of(out)
        result = await tools.task_tools.task_output(task_id, ALICE)
        assert agent.tasks is not None
        record = await agent.tasks.get(task_id, "alice")
    assert result.endswith("Result:\nlater #1")
    assert record is not None
    assert record.agent_key == key
    assert record.agent_id == "worker"


async def test_send_promoted_keeps_key(workspace: Path) -> None:
    gate = asyncio.Event()
    child = counting_child(gate=gate)
    async with make_agent(workspace, factory(child)) as agent:
        tools = hook(agent)
        key = key_of(ran(await tools.spawning.agent_spawn("worker", ALICE)))
        out = ran(await tools.spawning.agent_send("x", ALICE, agent_key=key, timeout_seconds=0.1))
        assert out.startswith(f"agent_key: {key}\nstatus: timeout_promoted\ntask_id: task_")
        gate.set()
        result = await tools.task_tools.task_output(task_of(out), ALICE)
    assert "status: completed" in result
    assert not child.cancelled.is_set()


async def test_send_to_spec_child_keeps_its_conversation(workspace: Path) -> None:
    child_model = ScriptedChatModel([{"text": "first answer"}, {"text": "second answer"}])
    spec = SubagentSpec(name="worker", description="Works.", model=child_model)
    async with make_agent(workspace, spec) as agent:
        spawning = hook(agent).spawning
        out = ran(await spawning.agent_spawn("worker", ALICE, task="question one", label="w"))
        assert out.endswith("status: ok\nreply:\nfirst answer")
        again = ran(await spawning.agent_send("question two", ALICE, label="w"))
    assert again.endswith("status: ok\nreply:\nsecond answer")
    assert len(child_model.requests) == 2
    texts = [m.text for m in child_model.requests[1]]
    assert "question one" in texts
    assert "first answer" in texts
    assert texts[-1] == "question two"


# -- agent_list and isolation --------------------------------------------------------------


async def test_list_children(workspace: Path) -> None:
    async with make_agent(
        workspace, factory(counting_child()), factory(counting_child(), "other")
    ) as agent:
        spawning = hook(agent).spawning
        assert await spawning.agent_list(ALICE) == "No active subagents."
        first = key_of(ran(await spawning.agent_spawn("worker", ALICE, label="scout")))
        second_out = ran(await spawning.agent_spawn("other", ALICE))
        second = second_out.splitlines()[0].removeprefix("agent_key: ")
        listed = await spawning.agent_list(ALICE)
    assert listed.splitlines() == [
        "Active subagents (2):",
        f"- agent_key: {first}",
        "  agent_id: worker",
        "  label: scout",
        "  spawn_depth: 1",
        f"- agent_key: {second}",
        "  agent_id: other",
        "  spawn_depth: 1",
    ]


async def test_registries_are_per_user_and_session(workspace: Path) -> None:
    child = counting_child()
    bob = RuntimeContext(session_id="s1", user_id="bob")
    other_session = RuntimeContext(session_id="s2", user_id="alice")
    async with make_agent(workspace, factory(child)) as agent:
        spawning = hook(agent).spawning
        key = key_of(ran(await spawning.agent_spawn("worker", ALICE, label="scout")))
        for ctx in (bob, other_session):
            assert await spawning.agent_list(ctx) == "No active subagents."
            out = ran(await spawning.agent_send("hi", ctx, agent_key=key))
            assert out == f"Error: Unknown agent_key: {key}"
            assert ran(await spawning.agent_send("hi", ctx, label="scout")) == (
                "Error: Unknown label: scout"
            )
            # the label is free in another registry
            assert "status: accepted" in ran(
                await spawning.agent_spawn("worker", ctx, label="scout")
            )
        assert (await spawning.agent_list(ALICE)).startswith("Active subagents (1):")
    assert child.calls == []


# -- children outlive the process ----------------------------------------------------------


async def test_a_later_process_continues_a_child_by_key_and_label(workspace: Path) -> None:
    """A new agent on the same workspace (a restart, another worker) knows the old children."""
    child_model = ScriptedChatModel(
        [{"text": "first answer"}, {"text": "second answer"}, {"text": "third answer"}]
    )
    spec = SubagentSpec(name="worker", description="Works.", model=child_model)
    async with make_agent(workspace, spec) as agent:
        out = ran(
            await hook(agent).spawning.agent_spawn("worker", ALICE, task="question one", label="w")
        )
        key = key_of(out)

    async with make_agent(workspace, spec) as restarted:
        spawning = hook(restarted).spawning
        listed = await spawning.agent_list(ALICE)
        again = ran(await spawning.agent_send("question two", ALICE, agent_key=key))
        by_label = ran(await spawning.agent_send("question three", ALICE, label="W"))
        reused = ran(await spawning.agent_spawn("worker", ALICE, label="w"))

    assert listed.splitlines()[:4] == [
        "Active subagents (1):",
        f"- agent_key: {key}",
        "  agent_id: worker",
        "  label: w",
    ]
    assert again == f"agent_key: {key}\nstatus: ok\nreply:\nsecond answer"
    texts = [m.text for m in child_model.requests[1]]
    assert texts[-3:] == ["question one", "first answer", "question two"]  # its session, restored
    assert by_label == f"agent_key: {key}\nstatus: ok\nreply:\nthird answer"
    assert reused == "Error: Label already in use: w"
    stored = workspace / "users/alice/agents/harness/children/s1.json"
    assert [c["key"] for c in json.loads(stored.read_text())["children"]] == [key]


async def test_a_child_spawned_on_another_worker_is_reachable_here(workspace: Path) -> None:
    child = counting_child()
    async with (
        make_agent(workspace, factory(child)) as worker_a,
        make_agent(workspace, factory(child)) as worker_b,
    ):
        assert await hook(worker_b).spawning.agent_list(ALICE) == "No active subagents."
        key = key_of(ran(await hook(worker_a).spawning.agent_spawn("worker", ALICE, label="scout")))
        by_key = await hook(worker_b).spawning.agent_send("hi", ALICE, agent_key=key)
        by_label = await hook(worker_b).spawning.agent_send("again", ALICE, label="scout")
    assert by_key == f"agent_key: {key}\nstatus: ok\nreply:\ndone #1"
    assert by_label == f"agent_key: {key}\nstatus: ok\nreply:\ndone #2"


async def test_another_users_stored_children_stay_unknown(workspace: Path) -> None:
    child = counting_child()
    async with make_agent(workspace, factory(child)) as agent:
        key = key_of(ran(await hook(agent).spawning.agent_spawn("worker", ALICE, label="scout")))
    bob = RuntimeContext(session_id="s1", user_id="bob")
    async with make_agent(workspace, factory(child)) as restarted:
        spawning = hook(restarted).spawning
        assert ran(await spawning.agent_send("hi", bob, agent_key=key)) == (
            f"Error: Unknown agent_key: {key}"
        )
        assert (
            ran(await spawning.agent_send("hi", bob, label="scout"))
            == "Error: Unknown label: scout"
        )
        assert await spawning.agent_list(bob) == "No active subagents."
    assert child.calls == []


async def test_a_child_whose_declaration_is_gone_says_so(workspace: Path) -> None:
    async with make_agent(workspace, factory(counting_child())) as agent:
        key = key_of(ran(await hook(agent).spawning.agent_spawn("worker", ALICE)))
    async with make_agent(workspace, factory(counting_child(), "other")) as restarted:
        out = await hook(restarted).spawning.agent_send("hi", ALICE, agent_key=key)
    assert out == (
        f"Error: cannot continue {key}: its subagent 'worker' is no longer declared; "
        "spawn another one"
    )


async def test_an_unreadable_registry_is_ignored_with_a_warning(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stored = workspace / "users/alice/agents/harness/children/s1.json"
    stored.parent.mkdir(parents=True)
    stored.write_text("{not json")
    async with make_agent(workspace, factory(counting_child())) as agent:
        spawning = hook(agent).spawning
        assert await spawning.agent_list(ALICE) == "No active subagents."
        key = key_of(ran(await spawning.agent_spawn("worker", ALICE)))
    assert "ignored the unreadable subagent registry" in caplog.text
    assert [c["key"] for c in json.loads(stored.read_text())["children"]] == [key]


async def test_a_child_that_cannot_be_registered_is_closed_and_the_error_raised(
    workspace: Path,
) -> None:
    class ClosingChild(Child):
        closed = False

        async def aclose(self) -> None:
            self.closed = True

    child = ClosingChild()
    async with make_agent(workspace, factory(child)) as agent:
        spawning = hook(agent).spawning

        async def refused(*args: object, **kwargs: object) -> str:
            raise StorageError("the store is down")

        spawning.workspace.update_text = refused  # type: ignore[method-assign]
        with pytest.raises(StorageError, match="the store is down"):
            ran(await spawning.agent_spawn("worker", ALICE, task="hi"))
        assert await spawning.agent_list(ALICE) == "No active subagents."
    assert child.closed
    assert child.calls == []


# -- background failures -------------------------------------------------------------------


async def test_background_failure_is_failed_with_message(workspace: Path) -> None:
    child = counting_child(error=RuntimeError("kaput"))
    async with make_agent(workspace, factory(child)) as agent:
        tools = hook(agent)
        out = ran(await tools.spawning.agent_spawn("worker", ALICE, task="x", timeout_seconds=0))
        result = await tools.task_tools.task_output(task_of(out), ALICE)
    assert "status: failed: kaput" in result
    assert "Error: kaput" in result
    assert "completed" not in result


async def test_promoted_failure_is_failed_with_message(workspace: Path) -> None:
    gate = asyncio.Event()
    child = counting_child(gate=gate, error=RuntimeError("late crash"))
    async with make_agent(workspace, factory(child)) as agent:
        tools = hook(agent)
        out = ran(await tools.spawning.agent_spawn("worker", ALICE, task="x", timeout_seconds=0.1))
        assert "status: timeout_promoted" in out
        gate.set()
        result = await tools.task_tools.task_output(task_of(out), ALICE)
    assert "status: failed: late crash" in result


# -- through the parent's reasoning loop ---------------------------------------------------


async def test_parent_model_spawns_through_tool_call(workspace: Path) -> None:
    child = counting_child("child says hi")
    parent = ScriptedChatModel(
        [
            {
                "match": "delegate",
                "tool_calls": [
                    {"name": "agent_spawn", "input": {"agent_id": "worker", "task": "greet"}}
                ],
            },
            {"match": "status: ok", "text": "The worker said hi."},
        ]
    )
    async with make_agent(workspace, factory(child), model=parent) as agent:
        reply = answer(await agent.call("please delegate", ctx=ALICE))
    assert reply.text == "The worker said hi."
    assert [text for text, _ in child.calls] == ["greet"]
    ((_, child_ctx),) = child.calls
    assert child_ctx.get(SPAWN_DEPTH_KEY) == 1
    assert child_ctx.user_id == "alice"
    last = parent.requests[1][-1]
    outputs = "\n".join(result.text for result in last.tool_results)
    assert "status: ok\nreply:\nchild says hi #1" in outputs


async def test_parent_spawns_in_background_and_collects_with_task_output(
    workspace: Path,
) -> None:
    child = counting_child("bg done")
    parent = ScriptedChatModel(
        [
            {
                "match": "start",
                "tool_calls": [
                    {
                        "name": "agent_spawn",
                        "input": {"agent_id": "worker", "task": "t", "timeout_seconds": 0},
                    }
                ],
            },
            {"match": "status: accepted", "text": "started"},
        ]
    )
    async with make_agent(workspace, factory(child), model=parent) as agent:
        assert (answer(await agent.call("start it", ctx=ALICE))).text == "started"
        outputs = "\n".join(r.text for r in parent.requests[1][-1].tool_results)
        result = await hook(agent).task_tools.task_output(task_of(outputs), ALICE)
    assert result.endswith("Result:\nbg done #1")
