"""``harness approvals``: the tool calls a session waits on, and the decisions that continue it.

``list`` reads the approval ledger (beside the workspace, or in the store) and needs no model.
``approve``, ``reject``, ``edit`` and ``respond`` record a decision and continue the turn with
the model, as ``harness run`` would, printing its reply; a turn that waits again prints what it
waits for and exits 3. The same decision twice is harmless; a different one for a decided
approval fails (exit 1). See docs/approvals.md.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from harness.agent import DEFAULT_AGENT_NAME
from harness.approvals import (
    ApprovalGate,
    ApprovalPolicy,
    DecisionKind,
    ReviewerDecision,
    ledger_for,
)
from harness.cli._agent import AgentArgs, agent_command, connected_engine, opened_agent
from harness.cli._common import (
    AgentOpt,
    StoreOpt,
    UserOpt,
    WorkspaceOpt,
    looked_in,
    not_blank,
    opened_workspace,
    print_pending,
    replied,
    run_async,
    valid_id,
    valid_text,
)
from harness.cli._output import PLAIN, out, setup_logging
from harness.context import RuntimeContext
from harness.session import SessionStore
from harness.session.catalogue import SessionCatalogue
from harness.subagents import TaskRepository, waiting_approvals
from harness.tools.tasks import format_task

__all__ = ["approvals_app"]

approvals_app = typer.Typer(
    help="Tool calls waiting for your approval, and your decisions.", no_args_is_help=True
)

IdArg = Annotated[
    str,
    typer.Argument(help="The approval's id (see `harness approvals list`).", callback=valid_id),
]


@approvals_app.command("list")
def list_command(
    workspace: WorkspaceOpt = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            help="Only this session's calls.",
            callback=valid_id,
            show_default="every session of the user",
        ),
    ] = None,
    user: UserOpt = None,
    store: StoreOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List the tool calls that wait for a decision: every session of the user, or one."""

    async def _list() -> tuple[list[dict[str, Any]], str]:
        async with opened_workspace(workspace, store) as manager:
            gate = ApprovalGate(ApprovalPolicy(), ledger_for(manager))
            sessions, tasks = SessionStore(manager, agent), TaskRepository(manager, agent)
            if session is not None:
                ids = [session]
            else:
                listed = await SessionCatalogue(manager, agent).list(user)
                ids = [info.id for info in listed]
            pending = []
            for ident in ids:
                ctx = RuntimeContext(session_id=ident, user_id=user)
                pending += await waiting_approvals(gate, sessions, tasks, ctx)
            pending.sort(key=lambda request: request.requested_at)  # oldest first
            return [request.as_dict() for request in pending], str(manager.root)

    pending, root = run_async(_list())
    if as_json:
        out.print_json(json.dumps(pending, ensure_ascii=False))
    elif pending:
        print_pending(pending, sessions=session is None)
    else:
        sessions = f"session {session!r}" if session is not None else "every session"
        where = f"{sessions} of {looked_in(root, user)}"
        out.print(f"No tool call waits for approval in {where}.", **PLAIN)


def _decide(decision: ReviewerDecision, ident: str, given: AgentArgs) -> None:
    """Record ``decision`` on approval ``ident`` and continue what waited for it."""
    setup_logging(given.verbose)

    async def _continue() -> str:
        async with opened_agent(given) as agent:
            ctx = RuntimeContext(session_id=given.session, user_id=given.user)
            continued = await agent.decide({ident: decision}, ctx=ctx, by="harness approvals")
            if not continued and given.engine is not None:  # the turn's workflow goes on
                engine = await connected_engine(given.engine)
                async with engine.worker(agent):
                    return replied(await engine.resume(agent, ctx=ctx)).text
            if not continued:
                return replied(await agent.resume(None, ctx=ctx)).text
            # A background task's call: the task goes on here; wait for it as its shutdown
            # would (a task still running then is cancelled, as any task of a closing agent).
            assert agent.tasks is not None
            record = await agent.tasks.get(continued[ident], given.user)
            if record is None:
                return f"task {continued[ident]} is gone"
            grace = agent.subagents.shutdown_grace_seconds if agent.subagents else 0.0
            record = await agent.tasks.wait(record, grace)
            return format_task(record, await agent.tasks.result(record))

    out.print(run_async(_continue()), markup=False, highlight=False, soft_wrap=True)


@approvals_app.command("approve")
@agent_command()
def approve_command(
    ident: IdArg,
    given: AgentArgs,
) -> None:
    """Approve a call: it runs (once) and the turn continues."""
    _decide(_decision("approve"), ident, given)


@approvals_app.command("reject")
@agent_command()
def reject_command(
    ident: IdArg,
    message: Annotated[
        str | None,
        typer.Option("--message", "-m", help="Why; the model reads it.", callback=valid_text),
    ] = None,
    *,
    given: AgentArgs,
) -> None:
    """Reject a call: it does not run, the model is told so, and the turn continues."""
    _decide(_decision("reject", message=message), ident, given)


@approvals_app.command("edit")
@agent_command()
def edit_command(
    ident: IdArg,
    arguments: Annotated[
        str,
        typer.Option(
            "--arguments", "-a", help="The arguments to run with, as JSON.", callback=valid_text
        ),
    ],
    given: AgentArgs,
) -> None:
    """Run a call with your arguments instead of the model's (checked against the tool)."""
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        msg = f'--arguments is not JSON ({exc}); give an object such as \'{{"target": "staging"}}\''
        raise typer.BadParameter(msg) from None
    if not isinstance(parsed, dict):
        raise typer.BadParameter("--arguments must be a JSON object")
    _decide(_decision("edit", arguments=parsed), ident, given)


@approvals_app.command("respond")
@agent_command()
def respond_command(
    ident: IdArg,
    text: Annotated[
        str,
        typer.Argument(help="What the model reads instead of the result.", callback=not_blank),
    ],
    given: AgentArgs,
) -> None:
    """Answer instead of running the call: the model reads your text as its result."""
    _decide(_decision("respond", message=text), ident, given)


def _decision(kind: DecisionKind, **fields: Any) -> ReviewerDecision:
    """The decision, or a usage error (exit 2) that says what is wrong with it."""
    try:
        return ReviewerDecision(kind, **fields)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
