"""The approval property, drawn: whatever the reviewers do and whenever the clock says, a gated
call runs at most once, and only after an approve or an edit that came before its expiry.

Hypothesis draws a story: decisions (approve, edit, reject, respond, a conflicting second one,
an unknown id), resumes from fresh agents (another process, as far as the session and the
ledger know), new turns while the call waits, a crash that left ``started`` without
``finished`` in the ledger, and the clock moving past the expiry. After every step the witness
(the tool's side effects) and the ledger are checked against what was decided.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from _outcomes import waits
from harness import HarnessAgent, RuntimeContext
from harness.approvals import ApprovalRule, ReviewerDecision
from harness.errors import ApprovalConflict, UnknownApproval

CTX = RuntimeContext(session_id="s", user_id="ann")
EXPIRY = 100.0

STEPS = st.lists(
    st.one_of(
        st.sampled_from(["approve", "edit", "reject", "respond"]).map(lambda k: ("decide", k)),
        st.sampled_from(["resume", "new-turn", "unknown-id", "crash-started", "late"]).map(
            lambda k: (k, "")
        ),
    ),
    min_size=1,
    max_size=8,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def agent(root: Path, runs: list[str], clock: Clock) -> HarnessAgent:
    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: Where.
        """
        runs.append(target)
        return f"deployed {target}"

    built = HarnessAgent(
        model=_model(),
        workspace=root,
        tools=[deploy],
        approvals={"deploy": ApprovalRule(expires_after=EXPIRY)},
        memory=None,
        trace=False,
    )
    assert built.approvals is not None
    built.approvals.clock = clock
    return built


def _model() -> Any:
    from harness.models import ScriptedChatModel

    return ScriptedChatModel(
        [
            {"match": "^ship$", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
            {"text": "ok", "repeat": True},
        ]
    )


def _started(ident: str, now: float) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The ledger change of a process that recorded the start and died before the tool ran."""
    return lambda _: [{"kind": "started", "id": ident, "at": now, "arguments": {}}]


DECISIONS = {
    "approve": ReviewerDecision("approve"),
    "edit": ReviewerDecision("edit", arguments={"target": "staging"}),
    "reject": ReviewerDecision("reject", message="no"),
    "respond": ReviewerDecision("respond", message="not needed"),
}


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
@example(steps=[("decide", "approve"), ("crash-started", ""), ("resume", "")])
@example(steps=[("decide", "edit"), ("late", ""), ("new-turn", "")])
def test_a_gated_call_runs_at_most_once_and_only_when_approved_in_time(
    tmp_path_factory: Any, steps: list[tuple[str, str]]
) -> None:
    asyncio.run(_story(tmp_path_factory.mktemp("story") / "ws", steps))


async def _story(root: Path, steps: list[tuple[str, str]]) -> None:
    runs: list[str] = []
    clock = Clock()
    first = agent(root, runs, clock)
    try:
        ident = str(waits(await first.call("ship", ctx=CTX)).pending[0]["id"])
    finally:
        await first.aclose()

    decided: str | None = None  # the decision that stands
    expired = False
    crashed = False  # a run "started" and never finished (the process died in the tool)
    for step, kind in steps:
        ran_before = len(runs)
        worker = agent(root, runs, clock)
        assert worker.approvals is not None
        key = worker.sessions.directory(CTX)
        try:
            if step == "decide":
                try:
                    await worker.decide({ident: DECISIONS[kind]}, ctx=CTX)
                    if decided is None:
                        decided = kind
                    else:
                        assert decided == kind  # the same again: harmless
                except ApprovalConflict:
                    assert decided is not None
                    assert decided != kind
            elif step == "unknown-id":
                try:
                    await worker.decide({"apr_unknown": DECISIONS["approve"]}, ctx=CTX)
                    raise AssertionError("an unknown approval was accepted")
                except UnknownApproval:
                    pass
            elif step == "late":
                clock.now += EXPIRY + 1
                expired = True
            elif step == "crash-started" and decided in ("approve", "edit") and not runs:
                # The process died right after recording the start, before the tool ran.
                records = await worker.approvals.ledger.records(key)
                if not any(r.get("kind") == "started" for r in records):
                    await worker.approvals.ledger.change(key, _started(ident, clock.now))
                    crashed = True
            elif step in ("resume", "new-turn"):
                if step == "resume":
                    outcome = await worker.resume(ctx=CTX)
                else:
                    outcome = await worker.call("hello", ctx=CTX)
                if outcome.pending:
                    assert decided is None
                    assert not expired
        finally:
            await worker.aclose()

        assert len(runs) <= 1, runs
        if len(runs) > ran_before:
            assert not expired  # expiry is checked when the call would run
        if runs:
            assert decided in ("approve", "edit")
            assert not crashed
            assert runs == ["prod" if decided == "approve" else "staging"]
