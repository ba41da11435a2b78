"""Every refusal of every harness tool (memory, sessions, subagents, tasks, skills) is an error
result (``is_error``), as the file tools' are (``test_refusals_are_errors.py``).

The tools are the ones a default :class:`~harness.HarnessAgent` registers, so a tool added later
is drawn too. Arguments come from each tool's own schema, with the values that make tools refuse
(empty, blank, unknown ids, escaping paths, malformed targets, out-of-range numbers). The
property: a result reads as a refusal (``Error: ...``, a failed child's ``status: error`` line,
or one of the original's two refusal texts) exactly when it is marked ``is_error``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import HarnessAgent, RuntimeContext
from harness.kernel import Toolkit, ToolUseBlock
from harness.models import ScriptedChatModel
from harness.tools import FilesystemTools

ALICE = RuntimeContext(session_id="s1", user_id="alice")

ORIGINAL_REFUSALS = ("No query provided", "Session not found: ")
"""The original's refusal texts, kept as they were and marked as errors."""

_TEXT = st.one_of(
    st.sampled_from(
        [
            "",
            "   ",
            "nope",
            "../etc/passwd",
            "MEMORY.md",
            "MEMORY.md#",
            "MEMORY.md#\nInjected",
            "MEMORY.md##Deep",
            "notes.md#Section",
            "daily",
            "general-purpose",
            "memory/2026-01-01.md",
            "running",
            "bogus-status",
            "task_1",
        ]
    ),
    st.text(max_size=12),
)
_NUMBER = st.one_of(st.integers(-3, 3), st.integers(10**5, 10**7))


def _value(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if kind is None and "anyOf" in schema:  # an optional argument: None or its type
        kinds = [part for part in schema["anyOf"] if part.get("type") != "null"]
        return st.one_of(st.none(), *(_value(part) for part in kinds))
    if kind in ("integer", "number"):
        return _NUMBER
    if kind == "boolean":
        return st.booleans()
    return _TEXT


def _tools(workspace: Path) -> tuple[HarnessAgent, Toolkit]:
    agent = HarnessAgent(model=ScriptedChatModel([]), workspace=workspace)
    file_tools = {tool.__name__ for tool in FilesystemTools.__dict__.values() if callable(tool)}
    toolkit = agent.delegate.toolkit
    return agent, Toolkit([tool for tool in toolkit.tools if tool.name not in file_tools])


@st.composite
def _call(draw: st.DrawFn, toolkit: Toolkit) -> tuple[str, dict[str, Any]]:
    tool = draw(st.sampled_from(toolkit.tools))
    properties: dict[str, Any] = tool.schema.parameters.get("properties", {})
    required = set(tool.schema.parameters.get("required", []))
    arguments = {}
    for name, schema in properties.items():
        if name in required or draw(st.booleans()):
            arguments[name] = draw(_value(schema))
    return tool.name, arguments


def test_the_drawn_tools_are_the_harness_tools(workspace: Path) -> None:
    _, toolkit = _tools(workspace)
    assert {"memory_save", "session_history", "agent_spawn", "task_output", "load_skill"} <= set(
        toolkit.names
    )
    assert "write_file" not in toolkit


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_harness_tool_result_is_an_error_exactly_when_it_refuses(
    workspace: Path, data: st.DataObject
) -> None:
    agent, toolkit = _tools(workspace)

    async def run() -> tuple[str, bool]:
        try:
            name, arguments = data.draw(_call(toolkit))
            async with asyncio.timeout(30):
                result = await toolkit.call(
                    ToolUseBlock(id="c1", name=name, input=arguments), ALICE
                )
            return result.text, result.is_error
        finally:
            await agent.aclose()

    text, is_error = asyncio.run(run())
    header = text.split("\nreply:\n", 1)[0].splitlines()  # a child's reply is not the header
    refuses = text.startswith(("Error:", *ORIGINAL_REFUSALS)) or "status: error" in header
    assert refuses == is_error, (text, is_error)
