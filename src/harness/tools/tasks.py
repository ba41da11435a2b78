"""The task tools: ``task_output``, ``task_cancel`` and ``task_list``.

They read the caller's task records (see :mod:`harness.subagents.tasks`), so they work for
tasks started in an earlier call, or by an earlier process: results survive restarts.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from harness.context import RuntimeContext
from harness.kernel import ToolFailure
from harness.subagents.tasks import TaskRecord, TaskRepository, TaskStatus

__all__ = ["TaskTools", "format_task", "format_time"]

DEFAULT_WAIT_MS: Final = 30_000
MAX_WAIT_MS: Final = 600_000
MAX_LISTED: Final = 50


def format_time(moment: datetime | None) -> str:
    """UTC as ``2026-01-02T03:04:05Z`` (``-`` for no time)."""
    return f"{moment:%Y-%m-%dT%H:%M:%SZ}" if moment is not None else "-"


def format_task(record: TaskRecord, result: str | None) -> str:
    """A task's state and, when it has one, its full result or error."""
    lines = [
        f"task_id: {record.task_id}",
        f"agent_id: {record.agent_id}",
        f"status: {record.describe_status}",
        f"created_at: {format_time(record.created_at)}",
        "",
    ]
    match record.status:
        case TaskStatus.COMPLETED:
            lines += ["Result:", result] if result else ["Task completed with no result."]
        case TaskStatus.FAILED:
            lines.append(f"Error: {record.error or 'unknown error'}")
        case TaskStatus.CANCELLED:
            lines.append("Task was cancelled.")
        case TaskStatus.PENDING:
            lines.append("Task pending (waiting for a free slot)...")
        case TaskStatus.RUNNING:
            lines.append("Task still running...")
        case TaskStatus.WAITING:
            ids = ", ".join(record.approvals) or "see the pending approvals"
            lines.append(
                f"Task waits for a person to approve a tool call of its subagent ({ids}). "
                "It continues once they decide; tell the user if they should."
            )
    return "\n".join(lines)


class TaskTools:
    """Inspect and stop the caller's background tasks."""

    def __init__(self, tasks: TaskRepository) -> None:
        self.tasks = tasks

    def tools(self) -> list[Callable[..., Any]]:
        return [self.task_output, self.task_cancel, self.task_list]

    async def task_output(
        self,
        task_id: str,
        ctx: RuntimeContext,
        block: bool | None = None,
        timeout_ms: int | None = None,
    ) -> str:
        """Get a background task's status and, once it has finished, its full result.

        Args:
            task_id: The task_id that agent_spawn or agent_send returned.
            block: Wait for the task to finish (default true); false only peeks.
            timeout_ms: How long to wait, in milliseconds (default 30000, at most 600000).
        """
        if not task_id or not task_id.strip():
            return ToolFailure("Error: task_id is required")
        record = await self.tasks.get(task_id.strip(), ctx.user_id)
        if record is None:
            return ToolFailure(f"Error: No background task found with ID: {task_id}")
        if block is not False and not record.status.at_rest:
            wait_ms = DEFAULT_WAIT_MS if timeout_ms is None else min(timeout_ms, MAX_WAIT_MS)
            wait_ms = max(0, wait_ms)
            record = await self.tasks.wait(record, wait_ms / 1000)
        return format_task(record, await self.tasks.result(record))

    async def task_cancel(self, task_id: str, ctx: RuntimeContext) -> str:
        """Stop a background task that is still pending or running.

        Args:
            task_id: The task to stop.
        """
        if not task_id or not task_id.strip():
            return ToolFailure("Error: task_id is required")
        record = await self.tasks.get(task_id.strip(), ctx.user_id)
        if record is None:
            return ToolFailure(f"Error: No background task found with ID: {task_id}")
        if record.status.terminal:
            return (
                f"task_id: {record.task_id}\nstatus: {record.status.value}\n"
                "note: Task already in terminal state, cannot cancel."
            )
        record = await self.tasks.cancel(record.task_id, ctx.user_id) or record
        return (
            f"task_id: {record.task_id}\nstatus: {record.status.value}\n"
            "Cancellation requested successfully."
        )

    async def task_list(self, ctx: RuntimeContext, status: str | None = None) -> str:
        """List your background tasks, newest last.

        Args:
            status: Only tasks with this status: pending, running, waiting (for approval),
                completed, failed, cancelled, or all (default).
        """
        wanted = (status or "all").strip().lower()
        if wanted not in ("all", *TaskStatus):
            choices = ", ".join(["all", *TaskStatus])
            return ToolFailure(f"Error: unknown status '{status}'; use one of: {choices}")
        only = None if wanted == "all" else TaskStatus(wanted)
        records = await self.tasks.records(ctx.user_id, status=only)
        if not records:
            return "No background tasks tracked" + (f" with status '{wanted}'." if only else ".")
        lines = [f"{len(records)} tracked task(s):"]
        if len(records) > MAX_LISTED:
            lines.append(f"(the {len(records) - MAX_LISTED} oldest are not shown)")
        lines += [
            f"- task_id: {r.task_id}  agent: {r.agent_id}  status: {r.describe_status}  "
            f"created: {format_time(r.created_at)}"
            for r in records[-MAX_LISTED:]
        ]
        return "\n".join(lines)
