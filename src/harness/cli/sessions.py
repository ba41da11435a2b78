"""``harness sessions``: the saved sessions, what one holds, and what compaction did to it."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final

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
    looked_in,
    opened_workspace,
    run_async,
    shortened,
    shown_id,
)
from harness.cli._output import PLAIN, err, out
from harness.context import RuntimeContext
from harness.kernel import Msg
from harness.session import MESSAGES_FILE, CompactionLog, SessionStore
from harness.session.catalogue import SessionCatalogue
from harness.workspace import scoped, session_dir

__all__ = ["sessions_app"]

sessions_app = typer.Typer(
    help="Saved sessions and their compaction records.", no_args_is_help=True
)


DEFAULT_SHOWN: Final = 20
"""Messages ``harness sessions show`` prints by default: the end of the conversation."""

TEXT_HEAD: Final = 200
"""Characters of a message's text shown (on one line): enough to tell the messages apart."""

MessagesOpt = Annotated[
    int,
    typer.Option(
        "--messages",
        "-n",
        min=0,
        metavar="N",
        help="Show the last N messages (0 for none).",
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit", min=1, metavar="N", help="List at most N sessions.", show_default="all"
    ),
]


@sessions_app.command("list")
def list_command(
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
    limit: LimitOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List the user's saved sessions, most recently active first, with title and size."""

    async def _list() -> tuple[list[dict[str, Any]], str]:
        async with opened_workspace(workspace, store) as manager:
            found = await SessionCatalogue(manager, agent).list(
                user, limit=limit, count_messages=True
            )
        return [info.as_dict() for info in found], str(manager.root)

    sessions, root = run_async(_list())
    if as_json:
        out.print_json(json.dumps(sessions, ensure_ascii=False))
        return
    whose = f"agent {agent}" + (f", user {user}" if user else "")
    if not sessions:
        where = looked_in(root, user)
        err.print(f"No saved sessions of agent {agent} in {where}.", **PLAIN)
        return
    table = Table("session", "last activity", "messages", "title", title=f"Sessions of {whose}")
    for info in sessions:
        cells = (
            info["id"],
            _when(info["updated_at"]),
            "?" if info["messages"] is None else str(info["messages"]),
            info["title"] or "",
        )
        table.add_row(*map(Text, cells))  # a title is anyone's text: never markup
    out.print(table)


def _when(epoch: float | None) -> str:
    """A listing's time: local, to the second (the store may not know it)."""
    if epoch is None:
        return "?"
    return datetime.fromtimestamp(epoch).astimezone().isoformat(sep=" ", timespec="seconds")


@sessions_app.command("show")
def show_command(
    session: SessionArg,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
    messages: MessagesOpt = DEFAULT_SHOWN,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show a session: its last messages, where its files are, and its compactions."""

    async def _show() -> dict[str, Any] | None:
        ctx = RuntimeContext(session_id=session, user_id=user)
        async with opened_workspace(workspace, store) as manager:
            directory = session_dir(agent, session, user)
            files = await manager.list_own(directory)
            if not any(f.path.endswith(f"/{MESSAGES_FILE}") for f in files):
                return None
            # Only reads: load() is the running call's, and repairs what it cannot parse.
            saved = await SessionStore(manager, agent).read(ctx)
            records = await CompactionLog(manager, agent).read(session, user)
        shown = saved[len(saved) - messages :] if messages else []
        return {
            "session_id": session,
            "user_id": user,
            "agent": agent,
            "messages": len(saved),
            "session_dir": directory,
            "compaction_log": scoped(CompactionLog(manager, agent).path(session), user),
            "compactions": records,
            "last_messages": [_summary(m) for m in shown],
        }

    info = run_async(_show())
    if info is None:
        err.print(f"error: {_missing(session, workspace, user, agent)}", **PLAIN)
        raise typer.Exit(1)
    if as_json:
        out.print_json(json.dumps(info, ensure_ascii=False, default=str))
        return
    out.print(
        f"Session {session} of agent {agent}"
        + (f" for user {user}" if user else "")
        + f": {info['messages']} messages in {info['session_dir']}/",
        **PLAIN,
    )
    last = info["last_messages"]
    if last:
        out.print(f"Last {len(last)}:" if len(last) < info["messages"] else "Messages:", **PLAIN)
        for summary in last:
            out.print(Text("  " + _line(summary)), **PLAIN)
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


@sessions_app.command("rename")
def rename_command(
    session: SessionArg,
    title: Annotated[str, typer.Argument(help="The new title; '' goes back to the automatic one.")],
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
) -> None:
    """Title a session, as the web page's rename does (its listing shows the title)."""

    async def _rename() -> tuple[bool, str | None]:
        async with opened_workspace(workspace, store) as manager:
            try:
                info = await SessionCatalogue(manager, agent).rename(session, user, title)
            except KeyError:
                return False, None
        return True, info.title

    found, renamed = run_async(_rename())
    if not found:
        err.print(f"error: {_missing(session, workspace, user, agent)}", **PLAIN)
        raise typer.Exit(1)
    out.print(f"Session {session} is titled {renamed!r}.", **PLAIN)


def _missing(session: str, workspace: Path | None, user: str | None, agent: str) -> str:
    """The one line for a session that is not there, with the command that lists the others.

    The command repeats the options given, quoted for the shell; one that cannot be shown on
    one short line (a newline in it, thousands of characters) is named instead.
    """
    given = {
        "--workspace": None if workspace is None else str(workspace),
        "--user": user,
        "--agent": None if agent == DEFAULT_AGENT_NAME else agent,
    }
    where, unshown = "", []
    for flag, value in given.items():
        if value is None:
            continue
        if value.isprintable() and len(value) <= 200:
            where += f" {flag} {shlex.quote(value)}"
        else:
            unshown.append(flag)
    same = f" (with the same {', '.join(unshown)})" if unshown else ""
    whose = f"agent {shown_id(agent)}" + (f", user {shown_id(user)}" if user else "")
    return (
        f"no saved session {shortened(session)} of {whose}; "
        f"`harness sessions list{where}`{same} lists the sessions there are"
    )


def _head(text: str) -> str:
    """``text`` on one line, cut to :data:`TEXT_HEAD` characters."""
    line = " ".join(text.split())
    return line if len(line) <= TEXT_HEAD else line[: TEXT_HEAD - 3] + "..."


def _summary(message: Msg) -> dict[str, Any]:
    """A message as ``show`` lists it: who, its text's head, the tools it called or answered."""
    text = message.text or "\n".join(r.text for r in message.tool_results)
    return {
        "id": message.id,
        "role": message.role,
        "name": message.name,
        "text": _head(text),
        "tool_calls": [block.name for block in message.tool_uses],
        "tool_results": [block.name for block in message.tool_results],
    }


def _line(summary: dict[str, Any]) -> str:
    """One message of ``show``: ``role (name): text``, then the tools it calls, by name."""
    who = summary["role"] + (f" ({summary['name']})" if summary["name"] else "")
    answered = [name for name in summary["tool_results"] if name != summary["name"]]
    parts = [f"result of {', '.join(answered)}:"] if answered else []
    if summary["text"]:
        parts.append(summary["text"])
    if summary["tool_calls"]:
        parts.append("-> " + ", ".join(summary["tool_calls"]))
    return f"{who}: {' '.join(parts) or '(empty)'}"


def _outcome(step: object) -> str:
    """A step's outcome as the record keeps it (``{"status": ..., "detail": ...}``), in a word."""
    if isinstance(step, dict):
        return str(step.get("status", "?"))
    return "?" if step is None else str(step)
