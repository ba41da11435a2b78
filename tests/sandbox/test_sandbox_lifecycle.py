"""SandboxLifecycleHook: start before each call, release after it, on failure too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.errors import ScriptExhaustedError
from harness.filesystem import LocalFilesystem, SandboxFilesystem
from harness.hooks import SandboxLifecycleHook
from harness.kernel import PostCall, PreCall
from harness.models import ScriptedChatModel


class RecordingSandbox(SandboxFilesystem):
    """A real sandbox that notes each start and release with the call's user and session."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.log: list[tuple[str, str | None, str | None]] = []

    async def start(self, ctx: RuntimeContext | None = None) -> None:
        await super().start(ctx)
        assert ctx is not None
        self.log.append(("start", ctx.user_id, ctx.session_id))

    async def release(self, ctx: RuntimeContext | None = None) -> None:
        await super().release(ctx)
        assert ctx is not None
        self.log.append(("release", ctx.user_id, ctx.session_id))


def _agent(workspace: Path, fs: object, turns: list[dict[str, object]]) -> HarnessAgent:
    return HarnessAgent(
        memory=None,
        model=ScriptedChatModel(turns),
        workspace=workspace,
        hooks=[SandboxLifecycleHook(fs)],
    )


async def test_start_and_release_once_per_call(workspace: Path, tmp_path: Path) -> None:
    fs = RecordingSandbox(tmp_path / "sandbox")
    agent = _agent(workspace, fs, [{"text": "done", "repeat": True}])
    answer(await agent.call("one", ctx=RuntimeContext(session_id="s1", user_id="alice")))
    answer(await agent.call("two", ctx=RuntimeContext(session_id="s2", user_id="bob")))
    assert fs.log == [
        ("start", "alice", "s1"),
        ("release", "alice", "s1"),
        ("start", "bob", "s2"),
        ("release", "bob", "s2"),
    ]
    assert (tmp_path / "sandbox" / "users" / "alice").is_dir()  # start made the namespace
    assert (tmp_path / "sandbox" / "users" / "bob").is_dir()


async def test_release_runs_when_the_call_fails(workspace: Path, tmp_path: Path) -> None:
    fs = RecordingSandbox(tmp_path / "sandbox")
    agent = _agent(workspace, fs, [])  # no turn: the model call fails
    with pytest.raises(ScriptExhaustedError):
        answer(await agent.call("hello", ctx=RuntimeContext(session_id="s", user_id="alice")))
    assert fs.log == [("start", "alice", "s"), ("release", "alice", "s")]


async def test_a_backend_without_a_lifecycle_is_left_alone(workspace: Path, tmp_path: Path) -> None:
    agent = _agent(workspace, LocalFilesystem(tmp_path / "plain"), [{"text": "done"}])
    reply = answer(await agent.call("hi", ctx=RuntimeContext(session_id="s")))
    assert reply.text == "done"


def test_priority_and_events() -> None:
    hook = SandboxLifecycleHook(object())
    assert hook.priority == 50
    assert hook.handles(PreCall)
    assert hook.handles(PostCall)


async def test_an_agent_on_a_sandbox_gets_the_hook_and_the_execute_tool(
    tmp_path: Path, sandbox: SandboxFilesystem
) -> None:
    ctx = RuntimeContext(session_id="s", user_id="ann")
    script: list[dict[str, Any]] = [
        {"match": "^go$", "tool_calls": [{"name": "execute", "input": {"command": "echo hi"}}]},
        {"match": "Exit code: 0", "text": "ran"},
    ]
    async with HarnessAgent(
        model=ScriptedChatModel(script), workspace=tmp_path / "local", filesystem=sandbox
    ) as agent:
        hooks = {type(h).__name__: h.priority for h in agent.delegate.hooks.hooks}
        assert hooks["SandboxLifecycleHook"] == 50
        assert "execute" in agent.delegate.toolkit
        assert (answer(await agent.call("go", ctx=ctx))).text == "ran"
    async with HarnessAgent(
        model=ScriptedChatModel([]),
        workspace=tmp_path / "plain",
        filesystem=LocalFilesystem(tmp_path / "p"),
    ) as plain:
        assert "execute" not in plain.delegate.toolkit
        assert "SandboxLifecycleHook" not in {type(h).__name__ for h in plain.delegate.hooks.hooks}
