from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from _outcomes import answer
from harness import (
    AgentInterrupted,
    CompactionConfig,
    HarnessAgent,
    Hook,
    MemoryConfig,
    Msg,
    RuntimeContext,
    ScriptExhaustedError,
    TurnNotSaved,
)
from harness.filesystem import LocalFilesystem
from harness.hooks import SessionPersistenceHook, SubagentsHook
from harness.kernel import (
    ChatChunk,
    ChatResponse,
    Event,
    Finished,
    PreCall,
    TextBlock,
    TextDelta,
    ToolSchema,
)
from harness.mcp import MCPHook
from harness.memory import Provenance
from harness.models import ScriptedChatModel
from harness.session import SessionFsync
from harness.stores import InMemoryStore
from harness.workspace.ledger import StoreLedger


class EchoModel:
    """Answers 'echo: <last user text>', after every call in flight has started (a barrier)."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.all_in = asyncio.Event()
        self.requests: list[list[Msg]] = []

    @property
    def model_name(self) -> str:
        return "echo"

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.requests.append(list(messages))
        self.arrived += 1
        if self.arrived >= self.parties:
            self.all_in.set()
        await asyncio.wait_for(self.all_in.wait(), timeout=5)
        last = next(m.text for m in reversed(messages) if m.role == "user")
        yield ChatResponse(content=[TextBlock(text=f"echo: {last}")])


def saved_texts(workspace: Path, rel: str) -> list[str]:
    path = workspace / rel / "messages.jsonl"
    return [Msg.model_validate_json(line).text for line in path.read_text().splitlines()]


async def test_two_users_two_sessions_concurrently_stay_apart(workspace: Path) -> None:
    model = EchoModel(parties=2)
    agent = HarnessAgent(memory=None, model=model, workspace=workspace)
    alice = RuntimeContext(session_id="s-a", user_id="alice")
    bob = RuntimeContext(session_id="s-b", user_id="bob")
    replies = await asyncio.gather(
        agent.call("I am alice", ctx=alice), agent.call("I am bob", ctx=bob)
    )
    assert [answer(r).text for r in replies] == ["echo: I am alice", "echo: I am bob"]
    assert saved_texts(workspace, "users/alice/agents/harness/context/s-a") == [
        "I am alice",
        "echo: I am alice",
    ]
    assert saved_texts(workspace, "users/bob/agents/harness/context/s-b") == [
        "I am bob",
        "echo: I am bob",
    ]
    # each request carried its own user's context and nothing of the other's conversation
    for request in model.requests:
        system = request[0].text
        user = "alice" if "I am alice" in request[-1].text else "bob"
        other = "bob" if user == "alice" else "alice"
        assert f"User ID: {user}" in system
        assert f"I am {other}" not in json.dumps([m.model_dump(mode="json") for m in request])


async def test_calls_on_one_session_are_serialized_and_both_kept(workspace: Path) -> None:
    model = ScriptedChatModel([{"text": "first answer"}, {"text": "second answer"}])
    agent = HarnessAgent(memory=None, model=model, workspace=workspace)
    ctx = RuntimeContext(session_id="shared")
    await asyncio.gather(agent.call("one", ctx=ctx), agent.call("two", ctx=ctx))
    texts = saved_texts(workspace, "agents/harness/context/shared")
    assert texts == ["one", "first answer", "two", "second answer"]
    assert len(model.requests[1]) == 4  # system + the whole first turn + the new question


async def test_session_restored_by_a_new_agent(workspace: Path) -> None:
    ctx = RuntimeContext(session_id="s1")
    await HarnessAgent(
        memory=None, model=ScriptedChatModel([{"text": "A1"}]), workspace=workspace
    ).call("Q1", ctx=ctx)
    model = ScriptedChatModel([{"text": "A2"}])
    await HarnessAgent(memory=None, model=model, workspace=workspace).call("Q2", ctx=ctx)
    assert [m.text for m in model.requests[0][1:]] == ["Q1", "A1", "Q2"]


async def test_default_session_and_context_reach_hooks(workspace: Path) -> None:
    seen: list[RuntimeContext] = []

    class Spy(Hook):
        events: ClassVar[tuple[type[Event], ...]] = (PreCall,)

        async def on_event(self, event: Event) -> None:
            seen.append(event.ctx)

    agent = HarnessAgent(
        memory=None,
        model=ScriptedChatModel([{"text": "x", "repeat": True}]),
        workspace=workspace,
        hooks=[Spy()],
    )
    answer(await agent.call("hi"))
    answer(await agent.call("hi", ctx=RuntimeContext(user_id="u", extra={"tenant": "t1"})))
    assert [(c.session_id, c.user_id) for c in seen] == [("default", None), ("default", "u")]
    assert seen[1].get("tenant") == "t1"


def test_hook_chain_order(workspace: Path) -> None:
    class Mine(Hook):
        pass

    mine = Mine()
    agent = HarnessAgent(
        memory=None, model=ScriptedChatModel([]), workspace=workspace, hooks=[mine]
    )
    kinds = [type(h).__name__ for h in agent.delegate.hooks.hooks]
    assert kinds == [
        "AgentTraceHook",
        "MCPHook",
        "ToolResultEvictionHook",
        "SubagentsHook",
        "SkillsHook",
        "Mine",
        "WorkspaceContextHook",
        "SessionPersistenceHook",
    ]
    assert [h.priority for h in agent.delegate.hooks.hooks] == [0, 1, 50, 80, 85, 100, 900, 900]


def test_hook_chain_with_memory(workspace: Path) -> None:
    class Mine(Hook):
        pass

    agent = HarnessAgent(
        model=ScriptedChatModel([]),
        workspace=workspace,
        hooks=[Mine()],
        compaction=CompactionConfig(),
    )
    kinds = [type(h).__name__ for h in agent.delegate.hooks.hooks]
    assert kinds == [
        "AgentTraceHook",
        "MCPHook",
        "MemoryFlushHook",
        "MemoryMaintenanceHook",
        "CompactionHook",
        "ToolResultEvictionHook",
        "SubagentsHook",
        "SkillsHook",
        "Mine",
        "WorkspaceContextHook",
        "SessionPersistenceHook",
    ]
    assert [h.priority for h in agent.delegate.hooks.hooks] == [
        0, 1, 5, 6, 10, 50, 80, 85, 100, 900, 900
    ]  # fmt: skip
    names = agent.delegate.toolkit.names
    for tool in (
        "memory_search",
        "memory_get",
        "memory_save",
        "session_search",
        "session_list",
        "read_file",
        "agent_spawn",
        "agent_send",
        "agent_list",
        "task_output",
        "task_cancel",
        "task_list",
    ):
        assert tool in names


def test_memory_tools_can_be_left_out(workspace: Path) -> None:
    agent = HarnessAgent(
        model=ScriptedChatModel([]), workspace=workspace, memory=MemoryConfig(tools=False)
    )
    assert not [n for n in agent.delegate.toolkit.names if n.startswith(("memory_", "session_"))]


def test_optional_hooks_can_be_left_out(workspace: Path) -> None:
    agent = HarnessAgent(
        memory=None,
        model=ScriptedChatModel([]),
        workspace=workspace,
        trace=False,
        workspace_context=None,
        tool_result_eviction=None,
        subagents=None,
        filesystem_tools=False,
        skills=False,
    )
    # MCPHook stays: it starts the servers of tools.json, if the workspace has one
    assert [type(h) for h in agent.delegate.hooks.hooks] == [MCPHook, SessionPersistenceHook]
    assert "read_file" not in agent.delegate.toolkit
    assert "agent_spawn" not in agent.delegate.toolkit
    assert "load_skill" not in agent.delegate.toolkit


async def test_default_workspace_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_WORKSPACE", str(tmp_path / "envws"))
    agent = HarnessAgent(memory=None, model=ScriptedChatModel([{"text": "x"}]))
    assert agent.workspace.root == tmp_path / "envws"
    answer(await agent.call("hi"))
    assert (
        tmp_path / "envws" / "agents" / "harness" / "context" / "default" / "messages.jsonl"
    ).exists()
    monkeypatch.delenv("HARNESS_WORKSPACE")
    monkeypatch.chdir(tmp_path)
    assert (
        HarnessAgent(memory=None, model=ScriptedChatModel([])).workspace.root
        == tmp_path / ".harness" / "workspace"
    )


async def test_model_spec_string(workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"text": "from the file"}]}))
    async with HarnessAgent(memory=None, model=f"scripted:{script}", workspace=workspace) as agent:
        assert (answer(await agent.call("hi"))).text == "from the file"


async def test_failed_call_keeps_the_accepted_user_turn(workspace: Path) -> None:
    model = ScriptedChatModel([{"match": "^never$", "text": "x"}])
    agent = HarnessAgent(memory=None, model=model, workspace=workspace)
    with pytest.raises(ScriptExhaustedError):
        answer(await agent.call("please remember this question"))
    assert saved_texts(workspace, "agents/harness/context/default") == [
        "please remember this question"
    ]


async def test_interrupted_tool_call_is_not_saved_but_the_user_turn_is(workspace: Path) -> None:
    started = asyncio.Event()

    async def slow() -> str:
        """Take a long time."""
        started.set()
        await asyncio.sleep(30)
        return "late"

    model = ScriptedChatModel(
        [{"text": "earlier"}, {"tool_calls": [{"name": "slow", "input": {}}]}, {"text": "after"}]
    )
    agent = HarnessAgent(memory=None, model=model, workspace=workspace, tools=[slow])
    ctx = RuntimeContext(session_id="s")
    answer(await agent.call("first", ctx=ctx))
    task = asyncio.create_task(agent.call("second", ctx=ctx))
    await started.wait()
    agent.interrupt()
    with pytest.raises(AgentInterrupted):
        await task
    saved = await agent.sessions.load(ctx)
    assert [(m.role, m.text) for m in saved] == [
        ("user", "first"),
        ("assistant", "earlier"),
        ("user", "second"),
    ]
    assert (answer(await agent.call("third", ctx=ctx))).text == "after"
    assert [m.role for m in model.requests[-1]] == ["system", "user", "assistant", "user", "user"]


async def test_stream_yields_deltas_and_persists(workspace: Path) -> None:
    agent = HarnessAgent(
        memory=None, model=ScriptedChatModel([{"text": "two words"}]), workspace=workspace
    )
    items = [item async for item in agent.stream("hi", ctx=RuntimeContext(session_id="st"))]
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["two ", "words"]
    assert isinstance(items[-1], Finished)
    assert items[-1].reply.text == "two words"
    assert saved_texts(workspace, "agents/harness/context/st") == ["hi", "two words"]


async def test_a_reply_whose_save_failed_is_a_failed_call(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply is not presented as kept: the call raises, carrying it (it used to return)."""
    agent = HarnessAgent(
        memory=None, model=ScriptedChatModel([{"text": "fine"}]), workspace=workspace
    )
    original = agent.sessions.save
    saves: list[int] = []

    async def full_at_the_end(*args: Any, **kwargs: Any) -> None:
        saves.append(1)
        if len(saves) > 1:  # the input before the model ran is saved; the reply is not
            raise OSError("disk full")
        await original(*args, **kwargs)

    monkeypatch.setattr(agent.sessions, "save", full_at_the_end)
    with pytest.raises(TurnNotSaved, match="could not be saved \\(the reply\\): disk full") as info:
        answer(await agent.call("hi"))
    assert isinstance(info.value.reply, Msg)
    assert info.value.reply.text == "fine"
    assert len(saves) == 2  # the Error that follows does not write the reply after all
    assert saved_texts(workspace, "agents/harness/context/default") == ["hi"]


async def test_no_model_request_before_the_session_is_saved(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedChatModel([{"text": "fine"}])
    agent = HarnessAgent(memory=None, model=model, workspace=workspace)

    async def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(agent.sessions, "save", broken)
    with pytest.raises(TurnNotSaved, match="before the model ran"):
        answer(await agent.call("hi"))
    assert model.requests == []


async def test_save_failure_after_error_is_noted_on_the_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = HarnessAgent(memory=None, model=ScriptedChatModel([]), workspace=workspace)
    original = agent.sessions.save
    saves: list[int] = []

    async def broken_after_the_first(*args: Any, **kwargs: Any) -> None:
        saves.append(1)
        if len(saves) > 1:
            raise OSError("disk full")
        await original(*args, **kwargs)

    monkeypatch.setattr(agent.sessions, "save", broken_after_the_first)
    with pytest.raises(ScriptExhaustedError) as info:
        answer(await agent.call("hi"))
    assert "the session could not be saved: disk full" in (info.value.__notes__ or [])


async def test_trace_hook_logs_one_line_per_event(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = HarnessAgent(
        memory=None, model=ScriptedChatModel([{"text": "hello there"}]), workspace=workspace
    )
    with caplog.at_level(logging.INFO, logger="harness.trace"):
        answer(await agent.call("hi", ctx=RuntimeContext(session_id="t1", user_id="ann")))
    lines = [r.getMessage() for r in caplog.records if r.name == "harness.trace"]
    assert [line.split()[1] for line in lines] == [
        "PreCall",
        "PreReasoning",
        "PostReasoning",
        "PostCall",
    ]
    assert all(line.startswith("[harness] ") and "session=t1 user=ann" in line for line in lines)
    assert "model=scripted" in lines[2]
    assert all("\n" not in line for line in lines)


class Closing(Hook):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def aclose(self) -> None:
        self.log.append("user hook closed")


async def test_closing_the_agent_closes_the_hooks_it_built_latest_first_and_not_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []

    def recording(cls: type[Hook]) -> None:
        async def aclose(self: Hook) -> None:
            closed.append(type(self).__name__)

        monkeypatch.setattr(cls, "aclose", aclose)

    for cls in (SubagentsHook, MCPHook, SessionPersistenceHook):
        recording(cls)
    agent = HarnessAgent(
        model=ScriptedChatModel([{"text": "ok"}]),
        workspace=tmp_path / "ws",
        hooks=[Closing(closed)],
    )
    await agent.aclose()
    await agent.aclose()  # a second close closes nothing again
    assert closed == ["SessionPersistenceHook", "SubagentsHook", "MCPHook"]


@pytest.mark.parametrize(("setting", "syncs"), [("step", 3), ("turn", 1), (None, 0)])
async def test_session_fsync_syncs_the_session_before_each_request_or_at_the_end(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, setting: SessionFsync, syncs: int
) -> None:
    import os

    synced: list[str] = []
    original = os.fsync

    def spy(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        original(fd)

    def echo(text: str) -> str:
        """Echo."""
        return text

    model = ScriptedChatModel(
        [{"tool_calls": [{"name": "echo", "input": {"text": "x"}}]}, {"text": "done"}]
    )
    ctx = RuntimeContext(session_id="s")
    async with HarnessAgent(
        model=model, workspace=workspace, tools=[echo], memory=None, session_fsync=setting
    ) as agent:
        monkeypatch.setattr(os, "fsync", spy)
        assert (answer(await agent.call("go", ctx=ctx))).text == "done"
    # before the first request, before the second (after the tool), and the reply
    assert synced.count("messages.jsonl") == syncs


async def test_every_memory_writer_shares_the_workspaces_provenance_in_its_store(
    tmp_path: Path,
) -> None:
    """Files on a local disk, ledgers in a shared store: the store keeps the memory ledger.

    The agent hands the provenance to nobody; the flush, consolidation, memory_save and the
    prompt each ask the workspace for it and get the one object, whose ledger is the store's.
    """
    store = InMemoryStore()
    backend = LocalFilesystem(tmp_path / "ws")
    async with HarnessAgent(
        model=ScriptedChatModel([]), workspace=tmp_path / "ws", filesystem=backend, store=store
    ) as agent:
        assert agent.workspace.backend is backend
        assert isinstance(agent.provenance.ledger, StoreLedger)
        assert Provenance.for_workspace(agent.workspace) is agent.provenance
        assert agent.maintenance is not None
        assert agent.maintenance.consolidator is not None
        assert agent.maintenance.consolidator.provenance is agent.provenance
