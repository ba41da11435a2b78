"""No file I/O on the event loop's thread during a call (DESIGN.md §5).

An audit hook records the file-system events Python raises (open, listdir, scandir, mkdir,
rename, remove, ...) and wrappers around ``os.stat``/``os.lstat`` (which path resolution uses)
record theirs, each with the thread it ran on; a whole HarnessAgent call, with workspace files
to inject, a session to restore and save, and memory to flush, offload and index, must do none
of it on the loop thread.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from harness import HarnessAgent, RuntimeContext
from harness.models import ScriptedChatModel

_WATCHED = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove", "os.replace"}
_recording: dict[str, Any] = {"on": False, "thread": None, "events": []}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recording["on"] and event in _WATCHED and threading.get_ident() == _recording["thread"]:
        _recording["events"].append((event, args[:1]))


sys.addaudithook(_audit)  # audit hooks cannot be removed; this one records only when switched on


def _watch(name: str, real: Any) -> Any:
    def watched(*args: Any, **kwargs: Any) -> Any:
        _audit(name, args)
        return real(*args, **kwargs)

    return watched


async def test_a_call_does_no_file_io_on_the_loop_thread(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _WATCHED.update({"os.stat", "os.lstat"})
    monkeypatch.setattr(os, "stat", _watch("os.stat", os.stat))
    monkeypatch.setattr(os, "lstat", _watch("os.lstat", os.lstat))
    (workspace / "AGENTS.md").write_text("persona")
    (workspace / "MEMORY.md").write_text("- a fact")
    (workspace / "knowledge").mkdir()
    (workspace / "knowledge" / "KNOWLEDGE.md").write_text("glossary")
    (workspace / "knowledge" / "faq.md").write_text("faq")

    def lookup(term: str) -> str:
        """Look a term up.

        Args:
            term: The term.
        """
        return f"{term}: found"

    model = ScriptedChatModel(
        [
            {"match": "Extract NEW memories", "text": "- a fact worth keeping", "repeat": True},
            {"match": "New daily log entries", "text": "- consolidated", "repeat": True},
            {"match": "warm", "text": "ready"},
            {"match": "first", "tool_calls": [{"name": "lookup", "input": {"term": "x"}}]},
            {"text": "answer", "repeat": True},
        ]
    )
    agent = HarnessAgent(model=model, workspace=workspace, tools=[lookup])
    ctx = RuntimeContext(session_id="io", user_id="u")
    await agent.call("warm up", ctx=ctx)  # imports and first-use setup happen here

    _recording.update(on=True, thread=threading.get_ident(), events=[])
    try:
        await agent.call("first", ctx=ctx)
        async for _ in agent.stream("second", ctx=ctx):
            pass
    finally:
        _recording["on"] = False
    assert _recording["events"] == []
    assert len(await agent.sessions.load(ctx)) == 8
