"""What the model sees, pinned: the assembled system prompt and the tool schemas of a default agent.

A change to either (a hook's section, a tool's docstring, a default) changes the files in
``tests/unit/golden/`` in the same commit, so it shows in review. To accept a change, run this
test with ``HARNESS_UPDATE_GOLDEN=1`` and read the diff.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from harness import HarnessAgent, RuntimeContext
from harness.kernel import ChatChunk, ChatResponse, Msg, TextBlock, ToolSchema
from harness.models import ScriptedChatModel

GOLDEN = Path(__file__).with_name("golden")


class Recording:
    """The scripted model, also keeping the tool schemas of every request."""

    model_name = "scripted"

    def __init__(self) -> None:
        self.script = ScriptedChatModel([{"text": "NO_REPLY", "repeat": True}])
        self.tools: list[Sequence[ToolSchema]] = []

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.tools.append(list(tools))
        async for item in self.script.stream(messages, tools, **options):
            yield item


def _stable(text: str, workspace: Path) -> str:
    """The prompt with what differs between machines and days put as placeholders."""
    text = text.replace(str(workspace), "<workspace>")
    text = re.sub(r"Today is [^\n]*\.", "Today is <date>.", text)
    text = text.replace(f"OS: {platform.system()} {platform.release()}", "OS: <os>")
    return text.replace(f"Temp dir: {tempfile.gettempdir()}", "Temp dir: <tmp>")


def _check(name: str, found: str) -> None:
    path = GOLDEN / name
    if os.environ.get("HARNESS_UPDATE_GOLDEN") == "1":
        path.write_text(found, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert found == expected, (
        f"what the model sees changed ({path.name}); if that is meant, run this test with "
        "HARNESS_UPDATE_GOLDEN=1 and commit the new file"
    )


async def test_the_system_prompt_and_tool_schemas_are_the_pinned_ones(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# Persona\nYou are careful.\n", encoding="utf-8")
    (workspace / "users" / "u1").mkdir(parents=True)
    memory = "## Facts\n- The user likes tea.\n"
    (workspace / "users" / "u1" / "MEMORY.md").write_text(memory, encoding="utf-8")
    model = Recording()
    async with HarnessAgent(model=model, workspace=workspace, sys_prompt="You help.") as agent:
        await agent.call("hello", ctx=RuntimeContext(session_id="s1", user_id="u1"))
    system = model.script.requests[0][0]
    assert system.role == "system"
    blocks = "\n\n<!-- the next block of the system message -->\n\n".join(
        block.text for block in system.content if isinstance(block, TextBlock)
    )
    _check("system_prompt.txt", _stable(blocks, workspace) + "\n")
    schemas = [dataclasses.asdict(schema) for schema in model.tools[0]]
    _check("tool_schemas.json", json.dumps(schemas, indent=1, ensure_ascii=False) + "\n")
