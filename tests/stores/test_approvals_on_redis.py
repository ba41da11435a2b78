"""Approvals on a workspace in a real Redis: the ledger lives in the store, out of the files.

Two workers (agents with their own connections) share one Redis: one pauses, the other lists
the pending approval and resumes it; two reviewers racing to decide it differently end with one
decision; the gated tool runs once.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from _outcomes import answer, waits
from harness import HarnessAgent, RuntimeContext
from harness.approvals import ReviewerDecision, StoreLedger
from harness.errors import ApprovalConflict
from harness.models import ScriptedChatModel
from harness.stores import RedisStore

CTX = RuntimeContext(session_id="s", user_id="ann")


def worker(store: RedisStore, runs: list[str], tmp_path: Path) -> HarnessAgent:
    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: Where.
        """
        runs.append(target)
        return f"deployed {target}"

    turns: list[dict[str, Any]] = [
        {"match": "ship", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
        {"text": "done", "repeat": True},
    ]
    return HarnessAgent(
        model=ScriptedChatModel(turns),
        workspace=tmp_path / "ws",
        store=store,
        tools=[deploy],
        approvals=["deploy"],
        memory=None,
        trace=False,
    )


async def test_a_pause_on_one_worker_is_resumed_on_another_once(
    redis_url: str, tmp_path: Path
) -> None:
    prefix, runs = f"test-{uuid.uuid4().hex}", list[str]()
    stores = [RedisStore(redis_url, prefix=prefix) for _ in range(3)]  # a connection each
    first, second, reviewer = (worker(store, runs, tmp_path) for store in stores)
    try:
        assert isinstance(first.approvals.ledger if first.approvals else None, StoreLedger)
        waits(await first.call("ship it", ctx=CTX))
        [pending] = await second.pending_approvals(CTX)
        assert second.approvals is not None
        assert reviewer.approvals is not None
        key = second.sessions.directory(CTX)

        decided = await asyncio.gather(
            second.approvals.record(key, {pending.id: ReviewerDecision("approve")}),
            reviewer.approvals.record(key, {pending.id: ReviewerDecision("reject")}),
            return_exceptions=True,
        )
        conflicts = [d for d in decided if isinstance(d, ApprovalConflict)]
        assert len(conflicts) == 1, decided  # one decision stands, the other is told so

        reply = answer(await second.resume(ctx=CTX))
        assert reply.text == "done"
        answer(await second.resume(ctx=CTX))  # nothing waits now: a plain continue
        assert runs in ([], ["prod"])  # approved: once; rejected: never
        assert await first.pending_approvals(CTX) == []
    finally:
        for agent in (first, second, reviewer):
            await agent.aclose()
        for store in stores:
            await store.aclose()
