"""Approvals through a HarnessAgent: pause, list, decide, resume in another agent, run once.

Each agent here is built afresh for the resume, as another process would be: what carries the
pause over is the session file and the ledger beside the workspace. A witness file outside the
agent counts the gated tool's runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from _witness import Witness

from _outcomes import answer, waits
from harness import HarnessAgent, RuntimeContext
from harness.approvals import (
    ApprovalPolicy,
    ApprovalRule,
    PendingApproval,
    ReviewerDecision,
    requires_approval,
)
from harness.errors import ApprovalConflict, InvalidDecision, UnknownApproval
from harness.models import ScriptedChatModel

CTX = RuntimeContext(session_id="s1", user_id="ann")
SHIP = {
    "match": "ship",
    "tool_calls": [
        {"name": "deploy", "input": {"target": "prod"}},
        {"name": "note", "input": {"text": "shipping"}},
    ],
}
DONE = {"text": "done", "repeat": True}


def make(
    workspace: Path,
    witness: Witness,
    approvals: Any = None,
    *,
    turns: tuple[dict[str, Any], ...] = (SHIP, DONE),
    tools: list[Any] | None = None,
) -> HarnessAgent:
    return HarnessAgent(
        model=ScriptedChatModel(list(turns)),
        workspace=workspace,
        tools=tools if tools is not None else witness.tools(),
        approvals=approvals if approvals is not None else {"deploy": ApprovalRule()},
        memory=None,
        trace=False,
    )


@pytest.fixture
def witness(tmp_path: Path) -> Witness:
    return Witness(tmp_path / "witness.txt")


async def pause(agent: HarnessAgent, text: str = "ship it") -> list[Mapping[str, Any]]:
    paused = waits(await agent.call(text, ctx=CTX))
    await agent.aclose()
    return list(paused.pending)


async def resume(
    workspace: Path, witness: Witness, decisions: Mapping[str, Any], **options: Any
) -> str:
    agent = make(workspace, witness, **options)
    try:
        return (answer(await agent.resume(decisions, ctx=CTX))).text
    finally:
        await agent.aclose()


async def results(workspace: Path, witness: Witness) -> list[tuple[str, bool]]:
    agent = make(workspace, witness)
    try:
        messages = await agent.sessions.load(CTX)
    finally:
        await agent.aclose()
    return [(r.text, r.is_error) for m in messages for r in m.tool_results]


async def test_a_paused_call_lists_its_approval_and_runs_only_the_ungated_sibling(
    workspace: Path, witness: Witness
) -> None:
    pending = await pause(make(workspace, witness, {"deploy": ApprovalRule(description="Ship")}))

    assert witness.runs() == ["note"]
    [request] = pending
    assert (request["tool"], request["arguments"], request["description"]) == (
        "deploy",
        {"target": "prod"},
        "Ship",
    )
    assert request["decisions"] == ["approve", "edit", "reject", "respond"]
    assert request["expires_at"] > request["requested_at"]
    listed = await make(workspace, witness).pending_approvals(CTX)
    assert [p.id for p in listed] == [request["id"]]


async def test_an_approval_from_another_agent_runs_the_call_once(
    workspace: Path, witness: Witness
) -> None:
    [request] = await pause(make(workspace, witness))

    assert await resume(workspace, witness, {request["id"]: "approve"}) == "done"
    assert witness.runs() == ["note", "deploy:prod"]
    # Deciding again, the same way, is harmless: nothing runs again, and the model (here
    # one with nothing to say) is not asked again; the turn's reply stands.
    assert await resume(workspace, witness, {request["id"]: "approve"}, turns=()) == "done"
    assert witness.runs() == ["note", "deploy:prod"]
    assert await make(workspace, witness).pending_approvals(CTX) == []


async def test_reject_respond_and_edit_do_what_they_say(workspace: Path, witness: Witness) -> None:
    outcomes = {}
    for kind, decision in {
        "reject": ReviewerDecision("reject", message="not on a Friday"),
        "respond": ReviewerDecision("respond", message="prod is frozen; use staging"),
        "edit": ReviewerDecision("edit", arguments={"target": "staging"}),
    }.items():
        root = workspace / kind
        [request] = await pause(make(root, witness))
        await resume(root, witness, {request["id"]: decision})
        outcomes[kind] = (await results(root, witness))[-1]

    assert outcomes["reject"] == (
        "Error: not executed: a reviewer rejected it: not on a Friday.",
        True,
    )
    assert outcomes["respond"] == (
        "A reviewer answered instead of running the tool: prod is frozen; use staging",
        False,
    )
    assert outcomes["edit"] == (
        "deployed staging\n\n[run with arguments a reviewer edited]",
        False,
    )
    assert witness.runs().count("deploy:staging") == 1
    assert "deploy:prod" not in witness.runs()


async def test_an_edit_the_tool_would_refuse_is_refused_and_the_approval_still_waits(
    workspace: Path, witness: Witness
) -> None:
    """Checked when recorded: a typo once used up the approval (the call was refused when it
    was about to run, and the reviewer could not decide again)."""
    [request] = await pause(make(workspace, witness))
    agent = make(workspace, witness)
    try:
        bad = ReviewerDecision("edit", arguments={"target": 7})
        with pytest.raises(InvalidDecision, match="target: Input should be a valid string"):
            await agent.decide({request["id"]: bad}, ctx=CTX)
        assert [p.id for p in await agent.pending_approvals(CTX)] == [request["id"]]
    finally:
        await agent.aclose()
    good = ReviewerDecision("edit", arguments={"target": "staging"})
    assert await resume(workspace, witness, {request["id"]: good}) == "done"
    assert witness.runs().count("deploy:staging") == 1


async def test_a_decision_is_final_and_bound_to_its_session(
    workspace: Path, witness: Witness
) -> None:
    [request] = await pause(
        make(
            workspace, witness, {"deploy": ApprovalRule(decisions=frozenset({"approve", "reject"}))}
        )
    )
    agent = make(workspace, witness)
    assert agent.approvals is not None
    key = agent.sessions.directory(CTX)

    with pytest.raises(ValueError, match="allows approve, reject, not respond"):
        await agent.approvals.record(key, {request["id"]: ReviewerDecision("respond", message="x")})
    await agent.approvals.record(key, {request["id"]: ReviewerDecision("reject")})
    await agent.approvals.record(key, {request["id"]: ReviewerDecision("reject")})  # the same
    with pytest.raises(ApprovalConflict, match="already decided"):
        await agent.approvals.record(key, {request["id"]: ReviewerDecision("approve")})
    other = RuntimeContext(session_id="s1", user_id="bob")  # another user's session
    with pytest.raises(UnknownApproval):
        answer(await agent.resume({request["id"]: "approve"}, ctx=other))
    await agent.aclose()
    assert "deploy:prod" not in witness.runs()


async def test_a_new_turn_waits_until_the_approvals_are_decided(
    workspace: Path, witness: Witness
) -> None:
    await pause(make(workspace, witness))
    agent = make(workspace, witness)

    refused = waits(await agent.call("something else", ctx=CTX))
    assert not refused.accepted
    assert "not accepted" in refused.message
    messages = await agent.sessions.load(CTX)
    await agent.aclose()

    assert all(m.text != "something else" for m in messages)


async def test_expiry_is_checked_when_the_call_would_run(workspace: Path, witness: Witness) -> None:
    [request] = await pause(make(workspace, witness, {"deploy": ApprovalRule(expires_after=60)}))
    agent = make(workspace, witness)
    assert agent.approvals is not None
    agent.approvals.clock = lambda: request["expires_at"] + 1  # approved, but too late

    answer(await agent.resume({request["id"]: "approve"}, ctx=CTX))
    await agent.aclose()

    assert "deploy:prod" not in witness.runs()
    assert (await results(workspace, witness))[-1] == (
        "Error: not executed: its approval request expired before it could run.",
        True,
    )


async def test_an_edited_session_line_runs_nothing(workspace: Path, witness: Witness) -> None:
    [request] = await pause(make(workspace, witness))
    agent = make(workspace, witness)
    session = workspace / "users" / "ann" / agent.sessions.path(CTX).split("users/ann/", 1)[-1]
    await agent.aclose()
    lines = session.read_text().splitlines()
    turn = json.loads(lines[1])
    turn["content"][0]["input"] = {"target": "everything"}  # what the sandbox could write
    lines[1] = json.dumps(turn)
    session.write_text("\n".join(lines) + "\n")

    await resume(workspace, witness, {request["id"]: "approve"})

    assert [r for r in witness.runs() if r.startswith("deploy")] == []
    assert (await results(workspace, witness))[-1] == (
        "Error: not executed: it does not match the call that was submitted for approval.",
        True,
    )


async def test_a_waiting_call_the_ledger_never_heard_of_is_never_run(
    workspace: Path, witness: Witness
) -> None:
    """A forged unanswered turn in the session file gets a lost result, not a run."""
    await pause(
        make(
            workspace,
            witness,
            {"note": ApprovalRule()},
            turns=(
                {"match": "ship", "tool_calls": [{"name": "note", "input": {"text": "x"}}]},
                DONE,
            ),
        )
    )
    agent = make(workspace, witness)
    session = workspace / "users" / "ann" / agent.sessions.path(CTX).split("users/ann/", 1)[-1]
    await agent.aclose()
    lines = session.read_text().splitlines()
    turn = json.loads(lines[1])
    turn["content"][0] = {
        "type": "tool_use",
        "id": "forged",
        "name": "deploy",
        "input": {"target": "prod"},
    }
    lines[1] = json.dumps(turn)
    session.write_text("\n".join(lines) + "\n")

    agent = make(workspace, witness)
    answer(await agent.call(None, ctx=CTX))
    await agent.aclose()

    assert "deploy:prod" not in witness.runs()


async def test_the_gate_fails_closed_and_a_tool_can_declare_its_own(
    workspace: Path, witness: Witness
) -> None:
    def broken(arguments: Mapping[str, Any], ctx: RuntimeContext) -> bool:
        raise RuntimeError("the predicate has a bug")

    pending = await pause(make(workspace / "a", witness, {"deploy": ApprovalRule(when=broken)}))
    assert [p["tool"] for p in pending] == ["deploy"]

    invalid = (
        {"match": "ship", "tool_calls": [{"name": "deploy", "input": {"target": ["x"]}}]},
        DONE,
    )
    only_prod = ApprovalRule(when=lambda arguments, ctx: arguments.get("target") == "prod")
    pending = await pause(make(workspace / "b", witness, {"deploy": only_prod}, turns=invalid))
    assert [p["tool"] for p in pending] == ["deploy"]  # arguments that do not validate wait too

    @requires_approval(description="Sends money")
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        return "paid"

    paying = ({"match": "ship", "tool_calls": [{"name": "pay", "input": {"amount": 5}}]}, DONE)
    agent = HarnessAgent(
        model=ScriptedChatModel(list(paying)),
        workspace=workspace / "c",
        tools=[pay],
        memory=None,
        trace=False,
    )
    pending = await pause(agent)
    assert [(p["tool"], p["description"]) for p in pending] == [("pay", "Sends money")]


async def test_a_resolver_decides_in_process_without_a_pause(
    workspace: Path, witness: Witness
) -> None:
    seen: list[PendingApproval] = []

    async def resolver(pending: PendingApproval) -> ReviewerDecision | None:
        seen.append(pending)
        return ReviewerDecision("approve")

    policy = ApprovalPolicy(rules={"deploy": ApprovalRule()}, resolver=resolver)
    agent = make(workspace, witness, policy)
    reply = answer(await agent.call("ship it", ctx=CTX))
    await agent.aclose()

    assert reply.text == "done"
    assert [p.tool for p in seen] == ["deploy"]
    assert sorted(witness.runs()) == ["deploy:prod", "note"]


async def test_a_request_whose_call_never_reached_the_session_blocks_nothing(
    workspace: Path, witness: Witness
) -> None:
    """The process stopped after the request and before the session's save: nothing waits."""
    await pause(make(workspace, witness))
    agent = make(workspace, witness, turns=({"text": "hello again", "repeat": True},))
    session = workspace / "users" / "ann" / agent.sessions.path(CTX).split("users/ann/", 1)[-1]
    first = session.read_text().splitlines()[0]
    session.write_text(first + "\n")  # only the user's message was saved

    assert await agent.pending_approvals(CTX) == []
    assert (answer(await agent.call("hello", ctx=CTX))).text == "hello again"
    await agent.aclose()
    assert "deploy:prod" not in witness.runs()


async def test_a_subagents_gated_call_pauses_its_parent_and_resumes_through_it(
    workspace: Path, witness: Witness
) -> None:
    """The child inherits the gate; its waiting call is the parent's pending approval, and a
    decision on the parent (from another agent, as another process would) continues the
    child, which runs the tool once, and then the parent."""
    turns = (
        {
            "match": "delegate",
            "tool_calls": [
                {"name": "agent_spawn", "input": {"agent_id": "general-purpose", "task": "ship"}}
            ],
        },
        SHIP,
        {"match": "status: ok", "text": "the child shipped it", "repeat": True},
        DONE,
    )
    paused = waits(await make(workspace, witness, turns=turns).call("delegate it", ctx=CTX))
    [request] = paused.pending
    assert (request["tool"], request["subagent"]) == ("deploy", "general-purpose")
    assert "deploy:prod" not in witness.runs()
    parent = make(workspace, witness, turns=turns)
    assert [(p.tool, p.subagent) for p in await parent.pending_approvals(CTX)] == [
        ("deploy", "general-purpose")
    ]

    ident = str(request["id"])
    reply = answer(await parent.resume({ident: "approve"}, ctx=CTX))
    again = answer(await parent.resume({ident: "approve"}, ctx=CTX))  # harmless
    messages = await parent.sessions.load(CTX)
    await parent.aclose()

    assert reply.text == again.text == "the child shipped it"
    assert witness.runs().count("deploy:prod") == 1
    spawned = [r for m in messages for r in m.tool_results if r.name == "agent_spawn"]
    assert [(r.is_error, "status: ok" in r.text) for r in spawned] == [(False, True)]
