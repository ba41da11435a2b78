"""The kernel's decision point: each call of a step runs, is answered instead, or waits.

A hook decides at ToolDecision, before any tool of the step runs. A deferred call pauses the
call (a Paused outcome) after its siblings ran, keeping the model's turn; the next call decides the
waiting calls first, without asking the model, and without running a sibling again.
"""

from __future__ import annotations

from typing import Any

from _outcomes import answer, waits
from harness.kernel import (
    LOST_RESULT,
    Decision,
    Defer,
    Event,
    Hook,
    Msg,
    Paused,
    ReActAgent,
    Run,
    Substitute,
    ToolDecision,
    ToolResultBlock,
)
from harness.models import ScriptedChatModel

STEP = {
    "match": "go",
    "tool_calls": [
        {"name": "deploy", "input": {"target": "prod"}},
        {"name": "note", "input": {"text": "deploying"}},
    ],
}
ANSWER = {"match": "deployed|noted|lost", "text": "done"}
AFTER_INSTEAD = {"match": "child|rebuilt", "text": "done"}


class Tools:
    """Two tools that count their runs: the side effects a resume must not repeat."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []

    def all(self) -> list[Any]:
        async def deploy(target: str) -> str:
            """Deploy.

            Args:
                target: Where.
            """
            self.runs.append(("deploy", target))
            return f"deployed {target}"

        async def note(text: str) -> str:
            """Note.

            Args:
                text: What.
            """
            self.runs.append(("note", text))
            return "noted"

        return [deploy, note]


class Gate(Hook):
    """Decides ``deploy`` as told: ``None`` defers it, anything else is the decision."""

    def __init__(self) -> None:
        self.decision: Decision | None = None
        self.seen: list[ToolDecision] = []

    async def on_event(self, event: Event) -> None:
        if isinstance(event, ToolDecision):
            self.seen.append(event)
            if event.tool_call.name == "deploy":
                event.decision = self.decision or Defer({"id": "a1", "tool": "deploy"})


def agent(tools: Tools, gate: Gate, *turns: dict[str, Any]) -> ReActAgent:
    model = ScriptedChatModel([STEP, ANSWER, *turns])
    return ReActAgent(name="a", model=model, toolkit=tools.all(), hooks=[gate])


async def paused(agent: ReActAgent, memory: list[Msg]) -> Paused:
    return waits(await agent.call("go", memory=memory))


async def test_a_deferred_call_pauses_after_its_siblings_ran_and_keeps_the_turn() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    pause = await paused(agent(tools, gate), memory)

    assert list(pause.pending) == [{"id": "a1", "tool": "deploy"}]
    assert tools.runs == [("note", "deploying")]  # the ungated sibling ran, once
    assert [m.role for m in memory] == ["user", "assistant", "tool"]
    assert pause.reply is memory[1]  # the model's turn whose call waits
    assert [u.name for u in memory[1].tool_uses] == ["deploy", "note"]
    assert memory[2].tool_results[0].output == "noted"


async def test_the_next_call_decides_the_waiting_call_first_and_reruns_no_sibling() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    react = agent(tools, gate)
    await paused(react, memory)
    gate.decision = Run()

    reply = answer(await react.call(memory=memory))

    assert reply.text == "done"
    assert tools.runs == [("note", "deploying"), ("deploy", "prod")]
    resumed = [event for event in gate.seen if event.resumed]
    assert [event.tool_call.name for event in resumed] == ["deploy"]  # not the sibling
    assert [m.role for m in memory] == ["user", "assistant", "tool", "tool", "assistant"]


async def test_an_edit_runs_the_given_arguments_and_says_so() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    react = agent(tools, gate)
    await paused(react, memory)
    gate.decision = Run(arguments={"target": "staging"}, note="edited by a reviewer")

    answer(await react.call(memory=memory))

    assert tools.runs == [("note", "deploying"), ("deploy", "staging")]
    assert memory[3].tool_results[0].output == "deployed staging\n\n[edited by a reviewer]"


async def test_what_runs_instead_gives_the_result_and_the_tool_never_runs() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    react = agent(tools, gate, AFTER_INSTEAD)
    await paused(react, memory)

    async def continued() -> str:
        return "the child answered"

    gate.decision = Run(instead=continued)
    answer(await react.call(memory=memory))

    assert tools.runs == [("note", "deploying")]  # deploy itself never ran
    result = memory[3].tool_results[0]
    assert (result.id, result.output) == (memory[1].tool_uses[0].id, "the child answered")


async def test_what_runs_instead_may_wait_again_and_its_requests_name_the_call() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    react = agent(tools, gate)
    await paused(react, memory)
    turn = memory[1]

    async def waits_again() -> Paused:
        child = Msg(role="assistant", content="the child waits")
        return Paused(({"id": "child-2", "tool": "rm"},), reply=child)

    gate.decision = Run(instead=waits_again)
    again = waits(await react.call(memory=memory))

    use = turn.tool_uses[0]
    assert list(again.pending) == [
        {
            "id": "child-2",
            "tool": "rm",
            "via_tool_call": use.id,
            "via_tool": "deploy",
            "via_input": {"target": "prod"},
        }
    ]
    # the call still has no result: only its sibling's is in memory
    assert [r.id for m in memory for r in m.tool_results] == [turn.tool_uses[1].id]


async def test_what_runs_instead_and_raises_is_the_calls_error_result() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    react = agent(tools, gate, AFTER_INSTEAD)
    await paused(react, memory)

    async def broken() -> str:
        raise RuntimeError("the child could not be rebuilt")

    gate.decision = Run(instead=broken)
    answer(await react.call(memory=memory))

    result = memory[3].tool_results[0]
    assert result.is_error
    assert result.output == "Error: RuntimeError: the child could not be rebuilt"


async def test_a_substitute_answers_without_running_the_tool() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    gate.decision = Substitute(
        ToolResultBlock(id="ignored", name="deploy", output="rejected", is_error=True)
    )

    await agent(tools, gate).call("go", memory=memory)

    assert tools.runs == [("note", "deploying")]
    result = memory[2].tool_results[0]
    assert (result.id, result.output, result.is_error) == (
        memory[1].tool_uses[0].id,
        "rejected",
        True,
    )


async def test_a_waiting_call_nobody_decides_gets_a_lost_result_and_never_runs() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    await paused(agent(tools, gate), memory)

    plain = ReActAgent(
        name="a", model=ScriptedChatModel([ANSWER]), toolkit=tools.all(), hooks=[]
    )  # no gate: nothing knows the call was waiting, or whether it ran
    answer(await plain.call(memory=memory))

    assert tools.runs == [("note", "deploying")]
    assert memory[3].tool_results[0].output == LOST_RESULT


async def test_a_new_message_is_refused_while_a_call_waits_and_is_not_kept() -> None:
    tools, gate, memory = Tools(), Gate(), list[Msg]()
    react = agent(tools, gate)
    await paused(react, memory)
    before = list(memory)

    refused = waits(await react.call("something else", memory=memory))
    assert not refused.accepted
    assert refused.reply is before[1]
    assert "the new message was not accepted" in refused.message

    assert memory == before
    assert tools.runs == [("note", "deploying")]
