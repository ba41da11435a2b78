"""``harness sessions``: what a saved session holds and what compaction did to it."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from harness.agent import DEFAULT_AGENT_NAME
from harness.cli._common import (
    AgentOpt,
    SessionArg,
    StoreOpt,
    UserOpt,
    WorkspaceOpt,
    opened_workspace,
    run_async,
)
from harness.cli._output import out
from harness.context import RuntimeContext
from harness.session import CompactionLog, SessionStore
from harness.workspace import scoped, session_dir

__all__ = ["sessions_app"]

sessions_app = typer.Typer(
    help="Saved sessions and their compaction records.", no_args_is_help=True
)

PLAIN: dict[str, Any] = {"markup": False, "highlight": False, "soft_wrap": True}


@sessions_app.command("show")
def show_command(
    session: SessionArg,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show a session: its size, where its files are, and every compaction it went through."""

    async def _show() -> dict[str, Any]:
        ctx = RuntimeContext(session_id=session, user_id=user)
        async with opened_workspace(workspace, store) as manager:
            # Only reads: load() is the running call's, and repairs what it cannot parse.
            messages = await SessionStore(manager, agent).read(ctx)
            records = await CompactionLog(manager, agent).read(session, user)
        return {
            "session_id": session,
            "user_id": user,
            "agent": agent,
            "messages": len(messages),
            "session_dir": session_dir(agent, session, user),
            "compaction_log": scoped(CompactionLog(manager, agent).path(session), user),
            "compactions": records,
        }

    info = run_async(_show())
    if as_json:
        out.print_json(json.dumps(info, ensure_ascii=False, default=str))
        return
    out.print(
        f"Session {session} of agent {agent}"
        + (f" for user {user}" if user else "")
        + f": {info['messages']} messages in {info['session_dir']}/",
        **PLAIN,
    )
    records = info["compactions"]
    if not records:
        out.print("No compactions.", **PLAIN)
        return
    table = Table("time", "messages", "tokens", "first kept", "flush", "offload", "summary")
    for r in records:
        cells = (
            str(r.get("time", "?")),
            f"{r.get('messages_before', '?')} -> {r.get('messages_after', '?')}",
            f"{r.get('tokens_before', '?')} -> {r.get('tokens_after', '?')}",
            str(r.get("first_kept_id", "?")),
            _outcome(r.get("flush")),
            _outcome(r.get("offload")),
            str(r.get("summary_hash", "?"))[:12],
        )
        table.add_row(*map(Text, cells))  # Text, not str: a cell's str is read as markup
    out.print(table)


def _outcome(step: object) -> str:
    """A step's outcome as the record keeps it (``{"status": ..., "detail": ...}``), in a word."""
    if isinstance(step, dict):
        return str(step.get("status", "?"))
    return "?" if step is None else str(step)
