"""task_cancel, through a scripted parent, stops a real child in the middle of a long tool call."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext, SubagentSpec
from harness.models import ScriptedChatModel
from harness.subagents import TaskStatus

CTX = RuntimeContext(session_id="s1", user_id="alice")


async def test_task_cancel_stops_the_child_inside_its_tool_call(workspace: Path) -> None:
    in_tool = asyncio.Event()
    cancelled = asyncio.Event()

    async def crawl(url: str) -> str:
        """Fetch a site, very slowly.

        Args:
            url: Where to start.
        """
        in_tool.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    child_model = ScriptedChatModel(
        [{"match": "Crawl", "tool_calls": [{"name": "crawl", "input": {"url": "https://x"}}]}]
    )
    spawn = {"agent_id": "crawler", "task": "Crawl the site.", "timeout_seconds": 0}
    parent_model = ScriptedChatModel(
        [
            {"match": "^start", "tool_calls": [{"name": "agent_spawn", "input": spawn}]},
            {"match": "status: accepted", "text": "started"},
        ]
    )
    crawler = SubagentSpec(
        name="crawler", description="Crawls sites.", model=child_model, tools=("crawl",)
    )
    async with HarnessAgent(
        model=parent_model, workspace=workspace, tools=[crawl], memory=None, subagents=[crawler]
    ) as agent:
        assert (answer(await agent.call("start", ctx=CTX))).text == "started"
        spawned = next(r.text for m in parent_model.requests[1] for r in m.tool_results)
        match = re.search(r"^task_id: (task_\w+)$", spawned, re.MULTILINE)
        assert match, spawned
        async with asyncio.timeout(5):
            await in_tool.wait()
        assert agent.subagents is not None

        reply = await agent.subagents.task_tools.task_cancel(match[1], CTX)

        assert "status: cancelled" in reply
        assert cancelled.is_set()  # the child's tool call itself was cancelled, not abandoned
        assert agent.tasks is not None
        record = await agent.tasks.get(match[1], "alice")
        assert record is not None
        assert record.status is TaskStatus.CANCELLED
        assert await agent.tasks.result(record) is None
        output = await agent.subagents.task_tools.task_output(match[1], CTX)
        assert "Task was cancelled." in output
    # The child's session kept the task it was given, not the unanswered tool call.
    (session,) = (workspace / "users/alice/agents/crawler/context").iterdir()
    saved = (session / "messages.jsonl").read_text(encoding="utf-8")
    assert "Crawl the site." in saved
    assert '"crawl"' not in saved
