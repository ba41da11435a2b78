"""Subagents: a declared subagent works in the background; its result reaches the agent once.

Run::

    python examples/04_subagents.py [DIR]

Offline by default: one ScriptedChatModel plays the agent, the subagent and the memory model.
Set HARNESS_MODEL (e.g. ``openai:gpt-4o-mini`` with OPENAI_API_KEY) to use a real model (it
then decides itself whether to delegate). Everything is written under DIR (default: a new
temporary directory).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import HarnessAgent, RuntimeContext, SubagentsConfig, SubagentSpec
from harness.models import ScriptedChatModel

SCRIPT: list[dict[str, Any]] = [
    {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
    # The parent hands the work over, in the background (timeout 0).
    {
        "match": "(?i)in the background",
        "tool_calls": [
            {
                "name": "agent_spawn",
                "input": {
                    "agent_id": "log-analyst",
                    "task": "Find the errors in today's log.",
                    "label": "logs",
                    "timeout_seconds": 0,
                },
            }
        ],
    },
    {"match": "status: accepted", "text": "The log analyst is on it."},
    # The subagent: it reads the log and reports.
    {"match": "(?i)find the errors", "tool_calls": [{"name": "read_server_log"}]},
    {"match": "ERROR upstream", "text": "1 error: 12:02:03 upstream timeout after 30000 ms."},
    # The parent's next step carries the completion notice.
    {"match": "<system-reminder>", "text": "The analyst found one error: an upstream timeout."},
]

ANALYST = SubagentSpec(
    name="log-analyst",
    description="Reads the server log and reports its errors.",
    sys_prompt="You read logs and report only the errors, with their times.",
    tools=("read_server_log",),  # an allow-list of the tools it inherits
    max_iters=4,
)


def read_server_log() -> str:
    """Read today's server log."""
    lines = [f"12:{i // 60:02d}:{i % 60:02d} INFO served in {20 + i % 7} ms" for i in range(400)]
    lines[123] = "12:02:03 ERROR upstream timeout after 30000 ms"
    return "\n".join(lines)


async def main(workdir: Path) -> None:
    ctx = RuntimeContext(session_id="delegation", user_id="ada")
    agent = HarnessAgent(
        model=os.environ.get("HARNESS_MODEL") or ScriptedChatModel(SCRIPT),
        workspace=workdir / "workspace",
        tools=[read_server_log],
        subagents=SubagentsConfig(declarations=(ANALYST,)),
    )
    async with agent:
        assert agent.tasks is not None
        ask = "Have the log analyst check today's log in the background."
        reply = (await agent.call(ask, ctx=ctx)).reply
        print(f"you:   {ask}\nagent: {reply.text}")
        for task in await agent.tasks.records("ada", session_id="delegation"):
            task = await agent.tasks.wait(task, 30)
            print(f"task {task.task_id} ({task.agent_id}): {task.describe_status}")
            print(f"  result file: users/ada/{agent.tasks.result_path(task.task_id)}")
            print(f"  result: {await agent.tasks.result(task)}")
        later = "Any news?"
        reply = (await agent.call(later, ctx=ctx)).reply
        notices = [
            m.text
            for m in await agent.sessions.load(ctx)
            if m.metadata.get("reminder") == "task_delivery"
        ]
        print(f"the notice the agent got, once:\n{notices[0] if notices else '(none)'}")
        print(f"you:   {later}\nagent: {reply.text}")
    print("`harness tasks list --user ada -w <workspace>` lists the task")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="harness-"))
    asyncio.run(main(target))
