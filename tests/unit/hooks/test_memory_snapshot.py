"""The memory a session's system prompt shows is a snapshot; changes come as notes (issue 18).

A memory write in the middle of a session must not change the system prompt (the provider's
prompt cache would be lost for the whole conversation), and the model must still learn of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.hooks.workspace_context as workspace_context
from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.hooks import WorkspaceContextConfig, WorkspaceContextHook
from harness.kernel import Msg, PostCompact, PreReasoning, SessionState
from harness.models import ScriptedChatModel
from harness.workspace import WorkspaceManager

CTX = RuntimeContext(session_id="s1", user_id="ann")

STATES: dict[tuple[str | None, str | None], SessionState] = {}
"""Each session's state, as ``HarnessAgent`` would keep it with the session."""


@pytest.fixture(autouse=True)
def _fresh_states() -> None:
    STATES.clear()


def state_of(ctx: RuntimeContext) -> SessionState:
    return STATES.setdefault((ctx.session_id, ctx.user_id), SessionState())


def hook(workspace: Path, **config: object) -> WorkspaceContextHook:
    return WorkspaceContextHook(
        WorkspaceManager(workspace),
        agent_name="bot",
        config=WorkspaceContextConfig(refresh_seconds=0, **config),  # type: ignore[arg-type]
    )


async def step(
    context: WorkspaceContextHook, memory: list[Msg], ctx: RuntimeContext = CTX
) -> list[Msg]:
    """One step's request as the hook leaves it."""
    event = PreReasoning(
        ctx=ctx,
        agent="bot",
        memory=memory,
        state=state_of(ctx),
        call_id="c1",
        step=0,
        messages=[Msg(role="system", content="BASE"), *memory],
        tools=[],
    )
    await context.on_event(event)
    return event.messages


def write_memory(workspace: Path, text: str, user: str = "ann") -> None:
    folder = workspace / "users" / user
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "MEMORY.md").write_text(text)


def notes(request: list[Msg]) -> list[tuple[int, str]]:
    return [(i, m.text) for i, m in enumerate(request) if m.name == "workspace_update"]


async def test_a_session_keeps_its_prompt_and_learns_of_a_write_from_a_note(
    workspace: Path,
) -> None:
    write_memory(workspace, "## Facts\n- likes tea")
    context = hook(workspace)
    memory = [Msg(role="user", content="hi")]
    first = await step(context, memory)
    write_memory(workspace, "## Facts\n- likes green tea")
    memory.append(Msg(role="assistant", content="noted"))
    second = await step(context, memory)
    memory += [Msg(role="user", content="more"), Msg(role="assistant", content="sure")]
    third = await step(context, memory)

    assert first[0].content == second[0].content == third[0].content
    assert "- likes tea" in first[0].text
    assert "green" not in third[0].text
    [(where, text)] = notes(second)
    assert where == 3  # after the message that was last when the change was seen
    assert "MEMORY.md changed" in text
    assert "- [unknown] - likes tea" in text
    assert "+ [unknown] - likes green tea" in text
    assert notes(third) == [(3, text)]  # the same note at the same place, at every later step
    assert second[1 : where + 1] == third[1 : where + 1]


async def test_a_new_session_and_a_compaction_show_the_current_memory(workspace: Path) -> None:
    write_memory(workspace, "- one")
    context = hook(workspace)
    memory = [Msg(role="user", content="hi")]
    await step(context, memory)
    write_memory(workspace, "- two")
    assert notes(await step(context, memory))

    other = await step(
        context, [Msg(role="user", content="hi")], RuntimeContext(session_id="s2", user_id="ann")
    )
    assert "- two" in other[0].text
    assert not notes(other)

    await context.on_event(
        PostCompact(
            ctx=CTX,
            agent="bot",
            memory=memory,
            state=state_of(CTX),
            call_id="c1",
            removed=1,
            summary=Msg(role="user", content="summary"),
            tokens_after=10,
        )
    )
    compacted = await step(context, memory)
    assert "- two" in compacted[0].text
    assert not notes(compacted)


async def test_the_session_policy_keeps_the_snapshot_and_notes_through_a_compaction(
    workspace: Path,
) -> None:
    write_memory(workspace, "- one")
    context = hook(workspace, memory_refresh="session")
    memory = [Msg(role="user", content="hi")]
    await step(context, memory)
    write_memory(workspace, "- two")
    memory.append(Msg(role="assistant", content="ok"))
    await step(context, memory)
    # a compaction replaces the history the note followed
    memory[:] = [Msg(role="user", content="summary"), Msg(role="user", content="next")]
    await context.on_event(
        PostCompact(
            ctx=CTX,
            agent="bot",
            memory=memory,
            state=state_of(CTX),
            call_id="c1",
            removed=1,
            summary=memory[0],
            tokens_after=10,
        )
    )
    after = await step(context, memory)
    assert "- one" in after[0].text
    assert [where for where, _ in notes(after)] == [3]
    memory.append(Msg(role="assistant", content="ok"))
    later = await step(context, memory)
    assert [where for where, _ in notes(later)] == [3]  # moved once, then it stays


async def test_the_step_policy_shows_each_change_in_the_prompt(workspace: Path) -> None:
    write_memory(workspace, "- one")
    context = hook(workspace, memory_refresh="step")
    memory = [Msg(role="user", content="hi")]
    await step(context, memory)
    write_memory(workspace, "- two")
    request = await step(context, memory)
    assert "- two" in request[0].text
    assert not notes(request)


async def test_agents_md_is_always_current(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("rule one")
    context = hook(workspace)
    memory = [Msg(role="user", content="hi")]
    await step(context, memory)
    (workspace / "AGENTS.md").write_text("rule two")
    request = await step(context, memory)
    assert "rule two" in request[0].text
    assert not notes(request)


async def test_a_new_day_comes_as_a_note(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace_context, "_today", lambda: "Monday Nov 30, 2026")
    context = hook(workspace)
    memory = [Msg(role="user", content="hi")]
    first = await step(context, memory)
    monkeypatch.setattr(workspace_context, "_today", lambda: "Tuesday Dec 1, 2026")
    second = await step(context, memory)
    assert first[0].content == second[0].content
    assert "Today is Monday Nov 30, 2026." in second[0].text
    [(_, text)] = notes(second)
    assert "Today is now Tuesday Dec 1, 2026." in text


async def test_a_long_change_is_cut_and_says_where_the_rest_is(workspace: Path) -> None:
    write_memory(workspace, "")
    context = hook(workspace)
    memory = [Msg(role="user", content="hi")]
    await step(context, memory)
    write_memory(workspace, "\n".join(f"- fact {i}" for i in range(100)))
    [(_, text)] = notes(await step(context, memory))
    assert "+ [unknown] - fact 39" in text
    assert "- fact 40" not in text
    assert "... and 60 more changed lines: read MEMORY.md for all of it" in text


async def test_memory_save_mid_session_leaves_every_system_prompt_byte_identical(
    workspace: Path,
) -> None:
    model = ScriptedChatModel(
        [
            {
                "match": "^start",
                "tool_calls": [
                    {
                        "name": "memory_save",
                        "input": {
                            "fact": "The user's tea is green.",
                            "target": "MEMORY.md#Preferences",
                        },
                    }
                ],
            },
            {"match": "Saved|saved", "text": "noted"},
            {"text": "fine", "repeat": True},
        ]
    )
    write_memory(workspace, "## Preferences\n- The user drinks tea.")
    async with HarnessAgent(
        model=model, workspace=workspace, memory=MemoryConfig(flush=False, auto_consolidate=False)
    ) as agent:
        await agent.call("start: my tea is green", ctx=CTX)  # the user's words: saved as such
        await agent.call("again", ctx=CTX)
        saved = await agent.sessions.load(CTX)

    assert "green" in (workspace / "users" / "ann" / "MEMORY.md").read_text()
    systems = [request[0] for request in model.requests]
    assert len(systems) == 3
    assert all(
        s.model_dump(exclude={"id", "timestamp"})
        == systems[0].model_dump(exclude={"id", "timestamp"})
        for s in systems
    )
    assert "green" not in systems[0].text
    first_note = notes(model.requests[1])
    [(where, text)] = first_note
    assert "+ [user] - The user's tea is green." in text
    assert model.requests[1][where - 1].role == "tool"
    assert notes(model.requests[2]) == first_note
    assert all(m.name != "workspace_update" for m in saved)  # the note is the prompt's only
