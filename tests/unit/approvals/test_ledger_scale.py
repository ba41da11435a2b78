"""The approval ledger's work grows with its records, not with their square; its records typed.

One model reply with N gated calls makes N requests, N decisions and N resumes. Each of those
used to read and parse the session's whole ledger (N = 1,000: about 2 million records parsed,
39 s to reject and resume). Now a ledger keeps what it read and reads only what was appended
since, and the gate asks its questions of an index: the records parsed, counted here, stay
within a few times N. The counts are of work done, never of time.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.approvals import ApprovalRule, ReviewerDecision
from harness.approvals.ledger import (
    Approvals,
    Decided,
    FileLedger,
    Finished,
    MemoryLedger,
    Requested,
    Started,
    StoreLedger,
    parse_record,
)
from harness.errors import HarnessError
from harness.models import ScriptedChatModel
from harness.stores.memory import InMemoryStore
from harness.workspace import ledger as ledgers

CTX = RuntimeContext(session_id="s", user_id="ann")
N = 60


async def deploy(target: str) -> str:
    """Deploy.

    Args:
        target: Where.
    """
    return f"deployed {target}"


def agent(workspace: Path) -> HarnessAgent:
    calls = [{"name": "deploy", "input": {"target": f"t{i}"}} for i in range(N)]
    return HarnessAgent(
        model=ScriptedChatModel(
            [{"match": "^ship$", "tool_calls": calls}, {"text": "done", "repeat": True}]
        ),
        workspace=workspace,
        tools=[deploy],
        approvals={"deploy": ApprovalRule()},
        memory=None,
        trace=False,
    )


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many records the ledgers parsed from the disk (one count)."""
    count = [0]
    parse = ledgers._parse

    def counting(data: bytes) -> list[dict[str, Any]]:
        records = parse(data)
        count[0] += len(records)
        return records

    monkeypatch.setattr(ledgers, "_parse", counting)
    return count


async def test_n_gated_calls_cost_the_ledger_o_of_n(workspace: Path, parsed: list[int]) -> None:
    first = agent(workspace)
    try:
        with contextlib.suppress(HarnessError):  # the call pauses
            await first.call("ship", ctx=CTX)
        pending = await first.pending_approvals(CTX)
    finally:
        await first.aclose()
    assert len(pending) == N
    assert parsed[0] <= N  # listing them read the file once; the requests read nothing

    parsed[0] = 0
    second = agent(workspace)  # another process, as far as the ledger knows
    try:
        await second.decide({p.id: ReviewerDecision("reject") for p in pending}, ctx=CTX)
        reply = answer(await second.resume(ctx=CTX))
    finally:
        await second.aclose()
    assert reply.text == "done"
    # Each record is parsed once by the agent that did not write it: N requests at the
    # decision, nothing more at the resume (N resumes, N questions: none reads it again).
    assert parsed[0] == N
    results = [r for m in await agent(workspace).sessions.load(CTX) for r in m.tool_results]
    assert len(results) == N
    assert all(r.is_error and "rejected" in r.text for r in results)


def test_typed_records_are_stored_as_before() -> None:
    request = Requested(
        id="apr_1",
        at=1.0,
        tool="deploy",
        arguments={"target": "prod"},
        description="Ship",
        decisions=("approve", "reject"),
        expires_at=2.0,
        agent="bot",
        session_id="s",
        user_id=None,
        tool_call_id="c1",
        fingerprint="f",
    )
    # The fields a request had on disk before records were typed, and no others.
    assert set(request.as_record()) == {
        "kind", "id", "at", "tool", "arguments", "description", "decisions", "expires_at",
        "agent", "session_id", "user_id", "tool_call_id", "idempotent", "fingerprint",
    }  # fmt: skip
    decided = Decided(id="apr_1", at=3.0, decision=ReviewerDecision("reject", message="no"))
    started = Started(id="apr_1", at=4.0, arguments={"target": "prod"})
    finished = Finished(id="apr_1", at=5.0, output="ok", is_error=False)
    assert decided.as_record()["decision"] == {"kind": "reject", "arguments": None, "message": "no"}
    assert finished.as_record()["result"] == {"output": "ok", "is_error": False}
    for record in (request, decided, started, finished):
        stored = json.loads(json.dumps(record.as_record()))
        assert parse_record(stored) == record
    # A record that does not read as its kind is left out, as a torn line is.
    assert parse_record({"kind": "requested", "id": "apr_2"}) is None
    assert parse_record({"kind": "decided", "id": "apr_1", "decision": {"kind": "maybe"}}) is None


def test_a_subagents_request_as_the_earlier_code_wrote_it_still_reads() -> None:
    stored = {
        "kind": "requested", "id": "apr_9", "at": 1.0, "tool": "deploy",
        "arguments": {"target": "x"}, "description": "d", "decisions": ["reject"],
        "expires_at": 9.0, "agent": "bot", "session_id": "s", "user_id": "ann",
        "idempotent": False, "tool_call_id": "c7", "fingerprint": "f", "subagent": None,
        "child_key": "child", "key": "agents/bot/context/s",
    }  # fmt: skip
    view = Approvals()
    view.add(stored)
    [approval] = view.of_call("c7")
    assert approval.request.child_key == "child"
    assert approval.pending().tool_call_id == "c7"
    assert view.calls() == {"c7"}


def _append_as_another_process(path: Path, records: list[dict[str, Any]]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"".join(json.dumps(r).encode() + b"\n" for r in records))
    finally:
        os.close(fd)


async def test_a_file_ledger_reads_only_what_was_appended_since(
    tmp_path: Path, parsed: list[int]
) -> None:
    ledger = FileLedger(tmp_path / "ledger")
    await ledger.change("k", lambda _: [{"kind": "x", "id": str(i)} for i in range(10)])
    assert parsed[0] == 0  # its own records are not read back
    assert await ledger.sessions() == ["k"]
    parsed[0] = 0
    _append_as_another_process(ledger.path("k"), [{"kind": "x", "id": "10"}])
    assert [r["id"] for r in await ledger.records("k")] == [str(i) for i in range(11)]
    assert parsed[0] == 1  # only the other writer's record
    # A torn last line (a writer killed mid-write) is no record, and the next append starts
    # a line of its own instead of being glued to it.
    with ledger.path("k").open("ab") as file:
        file.write(b'{"kind": "x", "id": "tor')
    await ledger.change("k", lambda _: [{"kind": "x", "id": "11"}])
    assert [r["id"] for r in await FileLedger(tmp_path / "ledger").records("k")][-2:] == [
        "10",
        "11",
    ]
    # A file replaced (another inode) or shortened is read again whole.
    path = ledger.path("k")
    path.with_suffix(".new").write_bytes(b'{"kind": "x", "id": "only", "key": "k"}\n')
    path.with_suffix(".new").replace(path)
    assert [r["id"] for r in await ledger.records("k")] == ["only"]


@pytest.mark.parametrize("kind", ["memory", "store"])
async def test_views_follow_every_writer_in_memory_and_in_a_store(kind: str) -> None:
    store = InMemoryStore()
    one, two = (
        (StoreLedger(store), StoreLedger(store)) if kind == "store" else (MemoryLedger(),) * 2
    )
    request = Requested(
        id="apr_1", at=1.0, tool="deploy", arguments={}, description="", decisions=("reject",),
        expires_at=9.0, agent="bot", session_id="s", user_id=None, tool_call_id="c1",
        fingerprint="f",
    )  # fmt: skip
    await one.update("k", Approvals, lambda _: [request.as_record()])
    assert await two.query("k", Approvals, lambda v: v.calls()) == {"c1"}
    decided = Decided(id="apr_1", at=2.0, decision=ReviewerDecision("reject"))
    await two.update("k", Approvals, lambda _: [decided.as_record()])
    [approval] = await one.query("k", Approvals, lambda v: v.of_call("c1"))
    assert approval.decided == decided
    assert [r["kind"] for r in await one.records("k")] == ["requested", "decided"]


def adding(record: dict[str, Any]) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """A change that appends ``record``."""
    return lambda _: [record]


async def test_a_store_ledger_fetches_only_the_changes_since_it_last_read() -> None:
    store = InMemoryStore()
    fetched = [0]
    search = store.search

    async def counting(*args: Any, **kwargs: Any) -> Any:
        items = await search(*args, **kwargs)
        fetched[0] += len(items)
        return items

    store.search = counting  # type: ignore[method-assign]
    one, two = StoreLedger(store), StoreLedger(store)
    for i in range(20):
        await one.change("k", adding({"kind": "x", "id": str(i)}))
    assert fetched[0] == 0  # its own changes are not fetched back
    assert len(await two.records("k")) == 20
    assert fetched[0] == 20
    await one.change("k", lambda _: [{"kind": "x", "id": "20"}])
    assert [r["id"] for r in await two.records("k")][-1] == "20"
    assert fetched[0] == 21  # the one change since
    assert await two.sessions() == ["k"]


async def test_two_store_ledgers_racing_for_one_change_lose_nothing() -> None:
    store = InMemoryStore()
    writers = [StoreLedger(store) for _ in range(5)]
    await writers[0].records("k")

    async def write(ledger: StoreLedger, i: int) -> None:
        for j in range(10):
            await ledger.change("k", adding({"kind": "x", "id": f"{i}.{j}"}))

    await asyncio.gather(*(write(ledger, i) for i, ledger in enumerate(writers)))
    ids = [r["id"] for r in await StoreLedger(store).records("k")]
    assert sorted(ids) == sorted(f"{i}.{j}" for i in range(5) for j in range(10))


async def test_a_store_ledger_reads_what_the_earlier_layout_wrote() -> None:
    store = InMemoryStore()
    ledger = StoreLedger(store)
    earlier = [{"kind": "x", "id": "old", "key": "k"}]  # one item per key, rewritten whole
    await store.put(ledger.NAMESPACE, ledgers._name("k"), {"key": "k", "records": earlier})
    await ledger.change("k", lambda _: [{"kind": "x", "id": "new"}])
    assert [r["id"] for r in await StoreLedger(store).records("k")] == ["old", "new"]
