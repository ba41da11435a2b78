"""A turn that replaces the session's last input (a chat's edit and regenerate): what it
replaces is set aside whole before the conversation is rewritten without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import HarnessAgent, RuntimeContext
from harness.errors import CannotRewind
from harness.kernel import SYNTHETIC, Msg, TextBlock, ToolResultBlock, ToolUseBlock
from harness.models import ScriptedChatModel
from harness.session.rewinds import REWOUND_FILE, rewind_point

CTX = RuntimeContext(session_id="s")


def texts(messages: list[Msg]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages if m.text]


async def test_an_edit_replaces_the_last_input_and_keeps_what_it_replaced(
    workspace: Path,
) -> None:
    turns: list[dict[str, object]] = [
        {"match": "^Hi", "text": "Hello."},
        {"match": "^What is in", "tool_calls": [{"name": "list_files", "input": {}}]},
        {"match": "DIR|empty", "text": "Nothing much."},
        {"match": "^Which files", "text": "None at all."},
    ]
    model = ScriptedChatModel(turns)
    async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:
        await agent.call("Hi", ctx=CTX)
        await agent.call("What is in here?", ctx=CTX)
        before = await agent.sessions.load(CTX)
        await agent.call("Which files are here?", ctx=CTX, rewind=True)
        after = await agent.sessions.load(CTX)
        directory = workspace / agent.sessions.directory(CTX)
    assert texts(after) == [
        ("user", "Hi"),
        ("assistant", "Hello."),
        ("user", "Which files are here?"),
        ("assistant", "None at all."),
    ]
    (record,) = [json.loads(line) for line in (directory / REWOUND_FILE).read_text().splitlines()]
    set_aside = [Msg.model_validate(m) for m in record["messages"]]
    assert before[: len(before) - len(set_aside)] == after[:2]  # the rest is set aside, whole
    assert set_aside == before[2:]
    assert set_aside[0].text == "What is in here?"


async def test_nothing_to_replace_is_refused_and_changes_nothing(workspace: Path) -> None:
    model = ScriptedChatModel([{"text": "Hello.", "repeat": True}])
    async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:
        with pytest.raises(CannotRewind, match="no message of the user's"):
            await agent.call("Hi", ctx=CTX, rewind=True)
        with pytest.raises(CannotRewind, match="give the new input"):
            await agent.call(None, ctx=CTX, rewind=True)
        assert await agent.sessions.load(CTX) == []


def typed(text: str) -> Msg:
    return Msg(role="user", content=[TextBlock(text=text)])


MESSAGES = st.lists(
    st.sampled_from(["typed", "note", "answer", "call"]).map(
        lambda kind: {
            "typed": typed("a question"),
            "note": Msg(role="user", content="a note", metadata={SYNTHETIC: True}),
            "answer": Msg(role="assistant", content="an answer"),
            "call": Msg(role="assistant", content=[ToolUseBlock(id="c", name="t", input={})]),
        }[kind]
    ),
    max_size=12,
)


def answered(messages: list[Msg]) -> list[Msg]:
    """``messages`` with each call's result after it (a valid conversation)."""
    out: list[Msg] = []
    for message in messages:
        out.append(message)
        if message.tool_uses:
            out.append(Msg(role="user", content=[ToolResultBlock(id="c", name="t", output="r")]))
    return out


@settings(max_examples=200, deadline=None)
@given(MESSAGES)
def test_the_cut_is_the_last_message_the_user_typed(drawn: list[Msg]) -> None:
    messages = answered(drawn)
    typed_at = [i for i, m in enumerate(messages) if m.role == "user" and m.text == "a question"]
    if not typed_at:
        with pytest.raises(CannotRewind):
            rewind_point(messages)
        return
    assert rewind_point(messages) == typed_at[-1]
