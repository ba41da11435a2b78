"""The trace file AgentTraceHook writes: what each record says, where it goes, who it is for."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from _tracing import BIG, SESSION, USER, read_records, run_full_call, trace_file, traced_agent

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.errors import ScriptExhaustedError, StorageError
from harness.hooks.trace import AgentTraceHook
from harness.kernel import ToolResultBlock
from harness.models import ScriptedChatModel
from harness.observability import record, summarize, total, trace_path
from harness.session import SessionStore
from harness.workspace import WorkspaceManager

CTX = RuntimeContext(session_id=SESSION, user_id=USER)
COMMON = ("ts", "event", "agent", "session_id", "user_id", "call_id", "elapsed_s")


def by_event(records: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == event]


async def test_a_call_with_tools_an_error_an_eviction_and_a_compaction(workspace: Path) -> None:
    await run_full_call(workspace)
    records = read_records(trace_file(workspace))

    assert [r["event"] for r in records] == [
        "PreCall",
        "PreReasoning",
        "PostReasoning",
        "PreActing",
        "PreActing",
        "PreActing",
        "PostActing",
        "PostActing",
        "PostActing",
        "PreReasoning",
        "PreCompact",
        "PostCompact",
        "PostReasoning",
        "PostCall",
    ]
    for rec in records:
        assert all(key in rec for key in COMMON)
        assert (rec["agent"], rec["session_id"], rec["user_id"]) == ("harness", SESSION, USER)
    assert len({r["call_id"] for r in records}) == 1
    assert records[0]["call_id"].startswith("call-")
    elapsed = [r["elapsed_s"] for r in records]
    assert elapsed == sorted(elapsed)

    first, second = by_event(records, "PostReasoning")
    assert (first["step"], first["model"], first["input_tokens"], first["output_tokens"]) == (
        0,
        "scripted",
        100,
        20,
    )
    assert first["tool_calls"] == ["lookup", "fail", "dump"]
    assert (second["input_tokens"], second["output_tokens"], second["text_chars"]) == (150, 5, 4)

    lookup, fail, dump = by_event(records, "PostActing")
    assert (lookup["tool"], lookup["arguments"], lookup["result_chars"]) == (
        "lookup",
        '{"term": "alpha"}',
        len("alpha: found"),
    )
    assert lookup["is_error"] is False
    assert "evicted" not in lookup
    assert fail["is_error"] is True
    assert fail["tool_call_id"] == "call_1"
    assert dump["result_chars"] == len(BIG)
    assert dump["evicted"] is True
    assert dump["evicted_path"].startswith("large_tool_results/harness/dump-")
    evicted = workspace / "users" / USER / dump["evicted_path"]
    assert evicted.read_text(encoding="utf-8") == BIG
    kept = [
        block
        for message in await SessionStore(WorkspaceManager(workspace), "harness").load(CTX)
        for block in message.content
        if isinstance(block, ToolResultBlock) and block.id == "call_2"
    ]
    assert [len(block.text) for block in kept] == [dump["kept_chars"]]
    assert kept[0].text.startswith("Tool output was too large (300 chars")
    assert all(r["latency_s"] >= 0 for r in (lookup, fail, dump))

    (pre,) = by_event(records, "PreCompact")
    (post,) = by_event(records, "PostCompact")
    assert pre["cut"] == post["removed"] >= 1
    assert post["tokens_before"] == pre["tokens_before"] > 0
    assert isinstance(post["tokens_after"], int)
    assert post["forced"] is False

    (end,) = by_event(records, "PostCall")
    assert (end["inputs"], end["reply_chars"], end["steps"]) == (1, len("done"), 2)
    assert end["latency_s"] >= end["elapsed_s"] - 0.001
    assert end["latency_s"] >= first["latency_s"] + second["latency_s"]


async def test_long_arguments_are_cut(workspace: Path) -> None:
    long_term = "y" * 1000
    script: list[dict[str, Any]] = [
        {"match": "go", "tool_calls": [{"name": "lookup", "input": {"term": long_term}}]},
        {"text": "ok"},
    ]
    agent, _, _ = traced_agent(workspace, script)
    answer(await agent.call("go", ctx=RuntimeContext(session_id="cut")))
    (acting,) = by_event(read_records(trace_file(workspace, "cut", None)), "PostActing")
    assert acting["arguments"] == '{"term": "' + "y" * 290 + "..."
    assert acting["result_chars"] == len(f"{long_term}: found")


async def test_a_failed_call_is_written_with_its_error(workspace: Path) -> None:
    agent, _, _ = traced_agent(workspace, [])  # no turn fits: the model fails
    with pytest.raises(ScriptExhaustedError):
        answer(await agent.call("anything", ctx=RuntimeContext(session_id="bad", user_id=USER)))
    records = read_records(trace_file(workspace, "bad"))
    assert [r["event"] for r in records] == ["PreCall", "PreReasoning", "Error"]
    error = records[-1]
    assert error["type"] == "ScriptExhaustedError"
    assert "anything" in error["message"]
    assert error["latency_s"] >= 0
    (call,) = summarize(records)
    assert (call.outcome, call.errors, call.steps) == ("error", 1, 0)


async def test_successive_calls_append_with_their_own_call_ids(workspace: Path) -> None:
    script = [{"text": "one"}, {"text": "two"}]
    agent, _, _ = traced_agent(workspace, script)
    ctx = RuntimeContext(session_id="twice")
    answer(await agent.call("first", ctx=ctx))
    answer(await agent.call("second", ctx=ctx))
    records = read_records(trace_file(workspace, "twice", None))
    ids = [r["call_id"] for r in records]
    assert len(set(ids)) == 2
    first, second = dict.fromkeys(ids)
    # each call's records are contiguous: one append per call
    assert ids == [first] * 4 + [second] * 4
    assert [c.reply_chars for c in summarize(records)] == [3, 3]


async def test_concurrent_calls_on_two_sessions_write_two_files_without_mixing(
    workspace: Path,
) -> None:
    arrived: list[str] = []
    both_in = asyncio.Event()

    async def meet(who: str) -> str:
        """Wait for the other call.

        Args:
            who: Which call this is.
        """
        arrived.append(who)
        if len(arrived) == 2:
            both_in.set()
        await asyncio.wait_for(both_in.wait(), timeout=5)
        return f"met {who}"

    model = ScriptedChatModel(
        [
            {"match": "^ann$", "tool_calls": [{"name": "meet", "input": {"who": "ann"}}]},
            {"match": "^bob$", "tool_calls": [{"name": "meet", "input": {"who": "bob"}}]},
            {"match": "met", "text": "bye", "repeat": True},
        ]
    )
    ws = WorkspaceManager(workspace)
    agent = HarnessAgent(
        model=model,
        workspace=ws,
        tools=[meet],
        hooks=[AgentTraceHook(ws, agent_name="harness")],
        trace=False,
        memory=None,
        subagents=None,
    )
    await asyncio.gather(
        agent.call("ann", ctx=RuntimeContext(session_id="a", user_id="ann")),
        agent.call("bob", ctx=RuntimeContext(session_id="b", user_id="bob")),
    )
    for user, session in (("ann", "a"), ("bob", "b")):
        records = read_records(trace_file(workspace, session, user))
        assert {(r["session_id"], r["user_id"]) for r in records} == {(session, user)}
        assert len({r["call_id"] for r in records}) == 1
        assert [r["event"] for r in records] == [
            "PreCall",
            "PreReasoning",
            "PostReasoning",
            "PreActing",
            "PostActing",
            "PreReasoning",
            "PostReasoning",
            "PostCall",
        ]
        (acting,) = by_event(records, "PostActing")
        assert acting["arguments"] == f'{{"who": "{user}"}}'
    ann_ids = {r["call_id"] for r in read_records(trace_file(workspace, "a", "ann"))}
    bob_ids = {r["call_id"] for r in read_records(trace_file(workspace, "b", "bob"))}
    assert ann_ids.isdisjoint(bob_ids)


async def test_traces_live_in_the_callers_namespace(workspace: Path) -> None:
    agent, _, _ = traced_agent(workspace, [{"text": "hi", "repeat": True}])
    answer(await agent.call("x", ctx=RuntimeContext(session_id="same", user_id="ann")))
    answer(await agent.call("x", ctx=RuntimeContext(session_id="same")))
    assert trace_file(workspace, "same", "ann").exists()
    assert trace_file(workspace, "same", None).exists()
    assert not (workspace / "users" / "bob").exists()
    ann = read_records(trace_file(workspace, "same", "ann"))
    shared = read_records(trace_file(workspace, "same", None))
    assert {r["user_id"] for r in ann} == {"ann"}
    assert {r["user_id"] for r in shared} == {None}
    assert trace_path("my agent", None) == "agents/my%20agent/traces/default.jsonl"


async def test_without_a_workspace_the_hook_only_logs(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = HarnessAgent(
        model=ScriptedChatModel([{"text": "hello"}]),
        workspace=workspace,
        hooks=[AgentTraceHook()],
        trace=False,
        memory=None,
    )
    with caplog.at_level(logging.INFO, logger="harness.trace"):
        answer(await agent.call("hi", ctx=RuntimeContext(session_id="log")))
    assert [r.getMessage().split()[1] for r in caplog.records if r.name == "harness.trace"] == [
        "PreCall",
        "PreReasoning",
        "PostReasoning",
        "PostCall",
    ]
    assert not list(workspace.rglob("traces"))


async def test_a_trace_that_cannot_be_written_never_fails_the_call(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    agent, _, ws = traced_agent(workspace, [{"text": "fine"}])

    async def broken(*args: Any, **kwargs: Any) -> str:
        raise StorageError("disk full")

    monkeypatch.setattr(ws, "append_text", broken)
    with caplog.at_level(logging.WARNING, logger="harness.trace"):
        reply = answer(await agent.call("q", ctx=RuntimeContext(session_id="full")))
    assert reply.text == "fine"
    assert "could not write the trace of session 'full': disk full" in caplog.text


async def test_record_adds_background_work_to_the_session_trace(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ws = WorkspaceManager(workspace)
    ctx = RuntimeContext(session_id="bg", user_id=USER)
    assert await record(ws, "harness", ctx, "memory_flush", facts=2, path="memory/x.md")
    assert await record(ws, "harness", ctx, "task", call_id="call-1", task_id="task_9")
    first, second = read_records(trace_file(workspace, "bg"))
    assert {k: first[k] for k in first if k != "ts"} == {
        "event": "memory_flush",
        "agent": "harness",
        "session_id": "bg",
        "user_id": USER,
        "call_id": None,
        "facts": 2,
        "path": "memory/x.md",
    }
    assert (second["call_id"], second["task_id"]) == ("call-1", "task_9")
    assert summarize([first]) == []  # work outside a call is no call

    async def broken(*args: Any, **kwargs: Any) -> str:
        raise StorageError("gone")

    monkeypatch.setattr(ws, "append_text", broken)
    with caplog.at_level(logging.WARNING):
        assert not await record(ws, "harness", ctx, "task")
    assert "could not write the task trace record of session 'bg': gone" in caplog.text


async def test_summaries_add_up(workspace: Path) -> None:
    await run_full_call(workspace)
    records = read_records(trace_file(workspace))
    (call,) = summarize(records)
    assert (call.input_tokens, call.output_tokens, call.steps) == (250, 25, 2)
    assert (call.tool_calls, call.tool_errors, call.evictions, call.compactions) == (3, 1, 1, 1)
    assert (call.errors, call.outcome, call.inputs, call.reply_chars) == (0, "ok", 1, 4)
    # three concurrent tools: their time is merged, not added
    tool_latencies = [r["latency_s"] for r in by_event(records, "PostActing")]
    assert max(tool_latencies) <= call.tools_s + 1e-9 <= sum(tool_latencies) + 1e-9
    assert call.model_s + call.tools_s + call.other_s == pytest.approx(call.latency_s)
    both = total([call, call])
    assert (both.call_id, both.input_tokens, both.tool_calls) == ("total", 500, 6)
