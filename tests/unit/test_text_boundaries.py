"""Text that cannot be stored is refused or escaped where it enters, never found at save time.

A lone surrogate (``\\ud800``-``\\udfff`` on its own) has no UTF-8 form. One in a user's text,
in a tool's argument or output, or in a file name a tool listed (a name that is not UTF-8
reaches Python as ``\\udc80``...) made every later save of the session fail, while each call
still returned its reply. Now the user's input is refused before anything runs
(``InvalidText``), and what the harness takes in from elsewhere (the model's answer, a tool's
result, a listing) is escaped, so the session saves and continues.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _outcomes import answer
from harness import HarnessAgent, InvalidText, MemoryConfig, Msg, RuntimeContext
from harness.filesystem import LocalFilesystem
from harness.kernel import TextBlock, storable
from harness.models import ScriptedChatModel
from harness.session import SessionStore
from harness.workspace import WorkspaceManager

QUIET = MemoryConfig(flush=False, auto_consolidate=False, index=False)
CTX = RuntimeContext(session_id="s", user_id="alice")

_SURROGATES = st.integers(min_value=0xD800, max_value=0xDFFF).map(chr)
_DIRTY = st.tuples(st.text(max_size=20), _SURROGATES, st.text(max_size=20)).map("".join)


async def _saved(workspace: Path) -> list[Msg]:
    return await SessionStore(WorkspaceManager(workspace), "harness").load(CTX)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_DIRTY, as_message=st.booleans())
async def test_a_users_text_that_is_not_text_is_refused_before_anything_runs(
    tmp_path_factory: pytest.TempPathFactory, text: str, as_message: bool
) -> None:
    workspace = tmp_path_factory.mktemp("input")
    model = ScriptedChatModel([{"text": "ok", "repeat": True}])
    async with HarnessAgent(model=model, workspace=workspace, memory=QUIET) as agent:
        answer(await agent.call("first", ctx=CTX))
        before = await _saved(workspace)
        given_input: str | Msg = Msg(role="user", content=text) if as_message else text
        with pytest.raises(InvalidText, match="lone surrogate"):
            answer(await agent.call(given_input, ctx=CTX))
        with pytest.raises(InvalidText):
            async for _ in agent.stream(given_input, ctx=CTX):
                pass
        assert len(model.requests) == 1
        assert [m.id for m in await _saved(workspace)] == [m.id for m in before]
        assert (answer(await agent.call("after", ctx=CTX))).text == "ok"


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(said=_DIRTY, argument=_DIRTY, output=_DIRTY)
async def test_what_the_model_and_a_tool_give_is_escaped_and_the_session_saves(
    tmp_path_factory: pytest.TempPathFactory, said: str, argument: str, output: str
) -> None:
    workspace = tmp_path_factory.mktemp("escaped")

    def echo(value: str) -> str:
        """Return a text with a lone surrogate in it.

        Args:
            value: Anything.
        """
        return output + value

    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "echo", "input": {"value": argument}}]},
        {"text": said},
        {"text": "again", "repeat": True},
    ]
    model = ScriptedChatModel(script)
    async with HarnessAgent(model=model, workspace=workspace, memory=QUIET, tools=[echo]) as agent:
        reply = answer(await agent.call("go", ctx=CTX))
        assert reply.text == storable(said)
        saved = await _saved(workspace)
        assert storable(saved) is saved  # nothing unstorable reached the file
        assert saved[-1].text == storable(said)
        assert (answer(await agent.call("more", ctx=CTX))).text == "again"


@pytest.mark.parametrize(
    "call",
    [
        {"name": "list_files", "input": {}},
        {"name": "glob_files", "input": {"pattern": "**"}},
        {"name": "grep_files", "input": {"pattern": "needle"}},
    ],
)
async def test_a_file_name_that_is_not_utf8_is_listed_escaped(
    tmp_path: Path, call: dict[str, Any]
) -> None:
    workspace = tmp_path / "ws"
    namespace = workspace / "users" / "alice"
    namespace.mkdir(parents=True)
    with open(os.path.join(os.fsencode(namespace), b"bad\xff.txt"), "wb") as handle:
        handle.write(b"needle\n")
    model = ScriptedChatModel([{"tool_calls": [call]}, {"text": "done", "repeat": True}])
    async with HarnessAgent(
        model=model, workspace=workspace, memory=QUIET, filesystem=LocalFilesystem(workspace)
    ) as agent:
        answer(await agent.call("list", ctx=CTX))
        saved = await _saved(workspace)
        results = [m for m in saved if m.role == "tool"]
        assert results
        assert "bad\\xff.txt" in results[0].tool_results[0].text
        assert (answer(await agent.call("again", ctx=CTX))).text == "done"


def test_storable_keeps_clean_values_as_they_are() -> None:
    message = Msg(role="user", content=[TextBlock(text="plain ü 日本")])
    assert storable(message) is message
    assert storable({"a": ["b", 1]}) == {"a": ["b", 1]}
    assert storable("a\udc80b") == "a\\x80b"
    assert storable("a\ud800b") == "a\\ud800b"


def test_an_id_that_is_not_text_is_refused() -> None:
    with pytest.raises(ValueError, match="not valid text"):
        RuntimeContext(session_id="s\udc80")


async def test_a_memory_models_answer_is_escaped_before_it_is_written(tmp_path: Path) -> None:
    """The flush writes the memory model's answer to the daily log: one holding a lone
    surrogate failed the append at every call, and the flush was asked again each time."""
    workspace = tmp_path / "ws"
    model = ScriptedChatModel(
        [
            {"match": "Extract NEW", "text": "- fact \udc80 kept", "repeat": True},
            {"text": "ok", "repeat": True},
        ]
    )
    flushing = MemoryConfig(auto_consolidate=False, index=False)
    async with HarnessAgent(model=model, workspace=workspace, memory=flushing) as agent:
        answer(await agent.call("remember the fact", ctx=CTX))
    logs = list((workspace / "users" / "alice" / "memory").glob("*.md"))
    assert len(logs) == 1
    assert "- fact \\x80 kept" in logs[0].read_text(encoding="utf-8")
