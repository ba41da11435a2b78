"""``harness tasks``: the background subagent tasks of an agent, as the task tools see them."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from harness.agent import DEFAULT_AGENT_NAME
from harness.cli._common import (
    AgentOpt,
    StoreOpt,
    UserOpt,
    WorkspaceOpt,
    opened_workspace,
    run_async,
    shortened,
    shown_id,
    valid_id,
    valid_text,
)
from harness.cli._output import out
from harness.errors import ConfigError
from harness.subagents import TaskRecord, TaskRepository, TaskStatus
from harness.tools.tasks import format_task, format_time

__all__ = ["tasks_app"]

tasks_app = typer.Typer(help="Background subagent tasks.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print as JSON.")]
TaskArg = Annotated[str, typer.Argument(help="The task id (task_...).", callback=valid_id)]
PLAIN: dict[str, Any] = {"markup": False, "highlight": False, "soft_wrap": True}


async def _found(repo: TaskRepository, task_id: str, user: str | None) -> TaskRecord:
    record = await repo.get(task_id, user)
    if record is None:
        whose = f" of user {shown_id(user)}" if user else ""  # one line, whatever the id
        msg = (
            f"no task {shortened(task_id)}{whose} in {repo.directory}; "
            "`harness tasks list` shows them"
        )
        raise ConfigError(msg)
    return record


def _as_json(record: TaskRecord, result: str | None = None) -> str:
    data = record.model_dump(mode="json")
    if result is not None:
        data["result"] = result
    return json.dumps(data, ensure_ascii=False)


@tasks_app.command("list")
def list_command(
    workspace: WorkspaceOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only tasks with this status.", show_default="all", callback=valid_text
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session", "-s", help="Only tasks started in this session.", callback=valid_id
        ),
    ] = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """List the tasks, oldest first; a lost worker's tasks show as failed."""
    try:
        only = TaskStatus(status) if status else None
    except ValueError:
        choices = ", ".join(TaskStatus)
        raise typer.BadParameter(f"use one of: {choices}", param_hint="--status") from None

    async def _list() -> list[TaskRecord]:
        async with opened_workspace(workspace, store) as manager:
            repo = TaskRepository(manager, agent)
            return await repo.records(user, status=only, session_id=session)

    records = run_async(_list())
    if as_json:
        out.print_json(f"[{','.join(_as_json(r) for r in records)}]")
        return
    if not records:
        out.print("No background tasks.")
        return
    table = Table("task", "agent", "status", "session", "created", "finished")
    for r in records:
        cells = (
            r.task_id,
            r.agent_id,
            r.describe_status,
            r.session_id,
            format_time(r.created_at),
            format_time(r.finished_at),
        )
        table.add_row(*map(Text, cells))  # Text, not str: a session id may read as markup
    out.print(table)


@tasks_app.command("show")
def show_command(
    task_id: TaskArg,
    workspace: WorkspaceOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Show one task: its state and its full result or error."""

    async def _show() -> tuple[TaskRecord, str | None]:
        async with opened_workspace(workspace, store) as manager:
            repo = TaskRepository(manager, agent)
            record = await _found(repo, task_id, user)
            return record, await repo.result(record)

    record, result = run_async(_show())
    if as_json:
        out.print_json(_as_json(record, result))
        return
    out.print(format_task(record, result), **PLAIN)


@tasks_app.command("cancel")
def cancel_command(
    task_id: TaskArg,
    workspace: WorkspaceOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
    store: StoreOpt = None,
) -> None:
    """Cancel a pending or running task; the process running it stops it at its next heartbeat."""

    async def _cancel() -> tuple[TaskRecord, bool]:
        async with opened_workspace(workspace, store) as manager:
            repo = TaskRepository(manager, agent)
            record = await _found(repo, task_id, user)
            if record.status.terminal:
                return record, False
            return await repo.cancel(task_id, user) or record, True

    record, changed = run_async(_cancel())
    if changed:
        out.print(
            f"Task {record.task_id}: cancellation requested ({record.describe_status}).", **PLAIN
        )
    else:
        out.print(f"Task {record.task_id} had already finished: {record.describe_status}.", **PLAIN)
