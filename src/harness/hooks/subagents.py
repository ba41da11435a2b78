"""Subagents: the delegation tools, the "## Subagents" prompt section, completion notices.

At every reasoning step this hook

- appends the ``## Subagents`` section (how to delegate, and the available agent ids with
  their descriptions) to the system message;
- tells the parent about background tasks of this session that finished since it last
  looked: one system reminder listing each (task id, agent, status, the first lines of its
  result), added to the conversation so later steps and calls still see it. Each task is
  reported once; the original had no such notice, and results nobody asked for were lost;
- continues this session's background tasks that waited for approvals which all expired
  before anyone decided (expired means rejected: the child reads them as such).

It contributes ``agent_spawn``, ``agent_send``, ``agent_list``, ``task_output``,
``task_cancel`` and ``task_list``.

Priority 80: after compaction (10) and eviction (50), which shape the conversation this step
sees; before user hooks (100) and the workspace context (900).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final

from harness.kernel import SYNTHETIC, Event, Hook, Msg, PreReasoning, Tool, report
from harness.sections import SystemSection
from harness.subagents.declarations import Declaration, SubagentCatalog
from harness.subagents.tasks import TaskRecord, TaskRepository, TaskStatus
from harness.tools.subagents import SubagentTools
from harness.tools.tasks import TaskTools

__all__ = ["SubagentsHook", "completion_notice", "subagents_section"]

MAX_NOTICED: Final = 10
MAX_NOTICE_CHARS: Final = 2_000
NOTICE_KIND: Final = "task_delivery"

_GUIDE: Final = """\
## Subagents

You can hand work to subagents: separate agents that do one task with their own context and \
report back. Their results reach you, not the user: tell the user what matters.

### Agent tools
- `agent_spawn(agent_id, task?, label?, timeout_seconds?)` starts a subagent. With a task it \
waits up to timeout_seconds (default 30, at most 600) for the reply; 0 runs it in the background \
and returns a task_id at once, and a run that takes longer than the wait continues in the \
background too. Without a task it starts a persistent subagent you talk to with agent_send. \
The reply always has an `agent_key:` line.
- `agent_send(agent_key | label, message, timeout_seconds?)` continues a subagent's \
conversation. Pass the full agent_key (it starts with `agent:`), not the agent_id, session_id \
or task_id, or the label you gave it.
- `agent_list()` lists the subagents you started in this conversation.

### Task tools
- `task_output(task_id, block?, timeout_ms?)` waits for a background task (or peeks with \
block=false) and returns its full result.
- `task_cancel(task_id)` stops a task you no longer need.
- `task_list(status?)` lists your tasks.
When background tasks finish you are told at your next step, with the first lines of each \
result.

### When to use subagents
- A complex, multi-step task that can be handed over completely.
- Independent tasks that can run in parallel (start each with timeout_seconds=0, collect the \
results with task_output).
- Focused or heavy reading that would fill your own context.
- When only the outcome matters, not the steps.

### When not to
- Trivial tasks you can do in one or two tool calls.
- When you need to see the intermediate steps.
- When delegating saves neither context nor effort, or only adds waiting.

### Available agent ids"""


def subagents_section(entries: Sequence[Declaration]) -> str:
    """The prompt section: how to delegate, and the subagents that can be spawned."""
    lines = [f"- `{entry.name}`: {entry.description}" for entry in entries]
    return "\n".join([_GUIDE, *lines])


def completion_notice(
    records: Sequence[tuple[TaskRecord, str | None]], *, more: int, lines: int
) -> Msg:
    """One reminder about finished tasks: each one's id, agent, status and result head."""
    count = len(records) + more
    noun = "task has" if count == 1 else "tasks have"
    parts = [
        "<system-reminder>",
        f"{count} background subagent {noun} finished since your last step. "
        "task_output(task_id=...) returns a full result.",
    ]
    for record, result in records:
        state = {TaskStatus.COMPLETED: "completed", TaskStatus.FAILED: "error"}.get(
            record.status, record.status.value
        )
        parts.append(f'<task id="{record.task_id}" state="{state}" agent="{record.agent_id}">')
        if record.status is TaskStatus.COMPLETED:
            parts += ["<task_result>", _head(result or "(no result)", lines), "</task_result>"]
        elif record.status is TaskStatus.FAILED:
            parts.append(f"<task_error>{record.error or 'unknown error'}</task_error>")
        else:
            parts.append("The task was cancelled before it finished.")
        parts.append("</task>")
    if more:
        parts.append(f"... and {more} more; call task_list() to see them.")
    parts.append("</system-reminder>")
    return Msg(
        role="user",
        name="system",
        content="\n".join(parts),
        metadata={SYNTHETIC: True, "reminder": NOTICE_KIND},
    )


def _head(text: str, lines: int) -> str:
    kept = text.splitlines()[:lines]
    head = "\n".join(kept)[:MAX_NOTICE_CHARS]
    total = text.count("\n") + 1
    if total > len(kept) or len(head) < len(text.rstrip("\n")):
        head += f"\n... ({total} lines in all)"
    return head


class SubagentsHook(Hook):
    """Offers delegation to subagents and reports finished background tasks."""

    priority = 80
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning,)

    def __init__(
        self,
        catalog: SubagentCatalog,
        tasks: TaskRepository,
        spawning: SubagentTools,
        *,
        notice_lines: int = 20,
        shutdown_grace_seconds: float = 0.0,
    ) -> None:
        self.catalog = catalog
        self.shutdown_grace_seconds = shutdown_grace_seconds
        self.tasks = tasks
        self.spawning = spawning
        self.task_tools = TaskTools(tasks)
        self.notice_lines = notice_lines
        self._section: tuple[object, str] | None = None
        self._system = SystemSection()

    def tools(self) -> Sequence[Callable[..., Any] | Tool]:
        return [*self.spawning.tools(), *self.task_tools.tools()]

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PreReasoning)
        entries = await self.catalog.entries(event.ctx.user_id)
        if self._section is None or self._section[0] is not entries:
            self._section = (entries, subagents_section(list(entries.values())))
        event.messages = self._system.apply(event.messages, self._section[1])
        finished = await self.tasks.undelivered(event.ctx)
        for record in await self.tasks.overdue(event.ctx):
            # Nobody decided in time, and expired means rejected: its child reads it so.
            await self.spawning.continue_task(record.task_id, record.agent_key or "", {}, event.ctx)
        if not finished:
            return
        shown = finished[:MAX_NOTICED]
        notice = completion_notice(
            [(record, await self.tasks.result(record)) for record in shown],
            more=len(finished) - len(shown),
            lines=self.notice_lines,
        )
        # In the conversation itself, so the session keeps it; reported once.
        event.memory.append(notice)
        event.messages.append(notice)
        await self.tasks.mark_delivered(shown)
        report(
            "task_notice",
            tasks=[
                {"task_id": r.task_id, "subagent": r.agent_id, "status": r.describe_status}
                for r in shown
            ],
            more=len(finished) - len(shown),
        )

    async def aclose(self) -> None:
        """Let running tasks finish (up to the grace period), then close the children."""
        await self.tasks.aclose(self.shutdown_grace_seconds)
        await self.spawning.aclose()
