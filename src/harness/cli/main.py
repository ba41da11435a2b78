"""The ``harness`` command: init, run, chat, the offline demo, and memory/sessions/tasks.

Each command parses its options, calls the library and renders the result. Library errors
become one red line on stderr in :func:`run_async`, the one place that handles them: exit code
2 for configuration problems (no model, unknown model spec, missing API key, unusable
workspace), 1 for failures while running.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import shlex
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.markup import escape

from harness.agent import HarnessAgent
from harness.approvals import ReviewerDecision
from harness.cli._agent import AgentArgs, agent_command, connected_engine, opened_agent
from harness.cli._common import (
    VerboseOpt,
    checked_workspace,
    not_blank,
    replied,
    run_async,
    text_problem,
    valid_path,
)
from harness.cli._output import PLAIN, err, out, prompt_shown, setup_logging
from harness.cli.approvals import approvals_app
from harness.cli.demo import run_demo
from harness.cli.memory import memory_app
from harness.cli.serve import keys_app, serve_command
from harness.cli.sessions import sessions_app
from harness.cli.tasks import tasks_app
from harness.cli.trace import trace_command
from harness.context import RuntimeContext
from harness.errors import ConfigError, HarnessError
from harness.kernel import (
    Ended,
    Outcome,
    StreamItem,
    TextDelta,
    ToolFinished,
    ToolStarted,
    settled,
)
from harness.structured import OutputSpec
from harness.workspace import init_workspace

__all__ = ["app", "main"]

app = typer.Typer(
    help="Harness: an agent with a workspace, memory and persistent sessions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.add_typer(approvals_app, name="approvals")
app.add_typer(memory_app, name="memory")
app.add_typer(sessions_app, name="sessions")
app.add_typer(tasks_app, name="tasks")
app.add_typer(keys_app, name="keys")
app.command("trace")(trace_command)
app.command("serve")(serve_command)


@app.command()
@agent_command(per_turn=False)
def worker(given: AgentArgs) -> None:
    """Run turns of the --engine's queue until stopped: a worker of the durable engine.

    Give it the agent options every other worker and server of the queue has (the same model,
    tools and --store). docs/durable-execution.md.
    """
    setup_logging(given.verbose)
    if given.engine is None:
        err.print("error: a worker needs --engine temporal://HOST:PORT", soft_wrap=True)
        raise typer.Exit(2)
    engine_url = given.engine

    async def _work() -> None:
        async with opened_agent(given) as agent:
            engine = await connected_engine(engine_url)
            observe = None
            with contextlib.suppress(ImportError):  # without serve, nobody reads events
                from harness.serve.engine import turn_log_observer

                observe = turn_log_observer(agent)
            async with engine.worker(agent, observe=observe):
                err.print(f"worker of {engine.config.task_queue!r} on {engine.config.address}")
                await asyncio.Event().wait()

    run_async(_work())


@app.command()
def init(
    directory: Annotated[
        Path | None,
        typer.Argument(
            help="Where to create the workspace.",
            callback=valid_path,
            show_default="$HARNESS_WORKSPACE or ./.harness/workspace",
        ),
    ] = None,
) -> None:
    """Create a workspace skeleton with commented AGENTS.md, MEMORY.md and knowledge/."""

    async def _init() -> tuple[Path, list[str]]:
        manager = await asyncio.to_thread(checked_workspace, directory)
        return manager.root, await asyncio.to_thread(init_workspace, manager.root)

    root, created = run_async(_init())
    # Paths are printed whole (no re-wrapping at the console width) and never read as markup.
    plain: dict[str, Any] = {"highlight": False, "markup": False, "soft_wrap": True}
    if created:
        out.print(f"Initialized workspace {root}", **plain)
        for path in created:
            out.print(f"  created {path}", **plain)
    else:
        out.print(f"Workspace {root} already has every skeleton file; nothing changed.", **plain)
    # The next step, to stderr: stdout stays the list of what was made.
    where = shlex.quote(str(root))
    err.print(
        f"Next: edit {root / 'AGENTS.md'}, then chat with it:\n"
        f"  harness chat -w {where} --model openai:gpt-4o-mini   (OPENAI_API_KEY set)\n"
        f"  harness chat -w {where} --model scripted:FILE        (offline; docs/cli.md)",
        **plain,
    )


@app.command()
@agent_command()
def run(
    prompt: Annotated[str, typer.Argument(help="What to ask the agent.", callback=not_blank)],
    given: AgentArgs,
    as_json: Annotated[bool, typer.Option("--json", help="Print the reply as JSON.")] = False,
    output_schema: Annotated[
        Path | None,
        typer.Option(
            "--output-schema",
            metavar="FILE",
            help="A JSON schema the answer must fit: the reply is that JSON (docs/cli.md).",
        ),
    ] = None,
) -> None:
    """Run one turn and print the reply (exit 3 when it waits for approval: docs/approvals.md)."""
    setup_logging(given.verbose)
    session, user = given.session, given.user
    schema = _schema(output_schema) if output_schema is not None else None

    async def _run() -> tuple[str, str]:
        async with opened_agent(given) as agent:
            ctx = RuntimeContext(session_id=session, user_id=user)
            if given.engine is None:
                return _said(await agent.call(prompt, ctx=ctx, output=schema))
            engine = await connected_engine(given.engine)
            async with engine.worker(agent):  # this process is one of the engine's workers
                return _said(await engine.call(agent, prompt, ctx=ctx, output=schema))

    message_id, text = run_async(_run())
    if as_json:
        record = {"session_id": session, "user_id": user, "message_id": message_id, "reply": text}
        out.print_json(json.dumps(record, ensure_ascii=False))
    else:
        out.print(text, markup=False, highlight=False, soft_wrap=True)  # verbatim, never re-wrapped


def _schema(path: Path) -> dict[str, Any]:
    """The JSON schema of ``--output-schema``; a usage error (exit 2) saying what is wrong."""
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read the schema {path}: {exc}") from None
    if not isinstance(schema, dict):
        raise typer.BadParameter(f"the schema {path} must be a JSON object")
    try:
        OutputSpec.of(schema)
    except ConfigError as exc:
        raise typer.BadParameter(f"{path}: {exc}") from None
    return schema


def _said(ended: Ended) -> tuple[str, str]:
    reply = replied(ended)
    return reply.id, reply.text


@app.command()
@agent_command()
def chat(given: AgentArgs) -> None:
    """Chat with streaming replies; /session [NAME] shows or switches the session, /exit quits.

    A tool call that waits for approval is asked about inline; no answer within two minutes
    rejects it.
    """
    setup_logging(given.verbose)
    if given.engine is not None:
        err.print(
            "error: chat does not take --engine yet; use harness run or serve with --engine",
            soft_wrap=True,
        )
        raise typer.Exit(2)
    run_async(_chat(opened_agent(given), given.session, given.user))


async def _chat(
    opened: contextlib.AbstractAsyncContextManager[HarnessAgent], session: str, user: str | None
) -> None:
    async with opened as agent:
        _read_stdin_as_bytes()
        lines = _Lines()
        err.print(
            f"Chatting in session [bold]{escape(session)}[/bold] (/session [NAME], /exit).",
            highlight=False,
        )
        while True:
            try:
                with prompt_shown("[bold green]you>[/bold green] "):
                    line = await lines.next()
            except EOFError:
                err.print()
                break
            text = line.strip()
            if not text:
                continue
            problem = text_problem(text)
            if problem is not None:  # bytes that are not UTF-8, or a NUL
                err.print(f"error: that line {problem}; type it again", **PLAIN)
                continue
            if text in ("/exit", "/quit"):
                break
            if text.startswith("/session"):
                name = text.removeprefix("/session").strip()
                if name:
                    session = name
                err.print(f"session: {session}", **PLAIN)
                continue
            if _COMMAND.fullmatch(text):  # /help, or a command that does not exist
                known = text in ("/help", "/?")
                err.print(
                    CHAT_HELP if known else f"unknown command {text}; /help lists them", **PLAIN
                )
                continue
            ctx = RuntimeContext(session_id=session, user_id=user)
            try:
                await _chat_turn(agent, text, ctx, lines)
            except HarnessError as exc:
                # One failed turn (a model error, say) does not end the chat; the session keeps
                # the question, so the user can simply try again.
                out.print()
                message = escape(f"{type(exc).__name__}: {exc}")
                err.print(f"[red]error:[/red] {message}", highlight=False)


_COMMAND: Final = re.compile(r"/(?:\?|[A-Za-z][\w-]*)")
"""A line that is one slash word is a chat command, never sent to the model (a path such as
``/etc/hosts is what?`` is a question)."""
CHAT_HELP: Final = """\
Commands (never sent to the model):
  /session         show the session this chat is in
  /session NAME    continue in session NAME (made on its first turn)
  /help            this list
  /exit, /quit     leave (so does end of input, Ctrl-D)
Anything else is a turn for the agent. A tool call that waits for approval is asked about here."""


def _read_stdin_as_bytes() -> None:
    """Read chat input with ``surrogateescape``, as argv is read, whatever the locale.

    Under a strict UTF-8 locale (en_US.UTF-8), a line of other bytes would raise in the
    middle of reading; read this way it arrives, and is refused as one error line.
    """
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, io.UnsupportedOperation):  # already read from
            reconfigure(errors="surrogateescape")


CHAT_APPROVAL_TIMEOUT: Final = 120.0
"""Seconds ``harness chat`` waits for an answer about a tool call; then the call is rejected."""


class _Lines:
    """The chat's input, read by one thread for the whole chat.

    So a question that gives up waiting (an approval's timeout) leaves no reader behind that
    would take the next line typed.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def read() -> None:
            while True:
                line = sys.stdin.readline()
                loop.call_soon_threadsafe(self._queue.put_nowait, line or None)
                if not line:
                    return

        threading.Thread(target=read, name="harness-chat-input", daemon=True).start()

    async def next(self) -> str:
        """The next line; EOFError at the end of the input."""
        line = await self._queue.get()
        if line is None:
            self._queue.put_nowait(None)  # the end stays the end
            raise EOFError
        return line.rstrip("\n")


async def _chat_turn(
    agent: HarnessAgent, text: str | None, ctx: RuntimeContext, lines: _Lines
) -> None:
    """One turn, streamed; a pause for approval asks at the prompt and continues the turn."""
    while pending := (await _streamed(agent, text, ctx)).pending:
        out.print()
        decisions = {str(r["id"]): await _ask(r, lines) for r in pending}
        await agent.decide(decisions, ctx=ctx, by="harness chat")
        text = None  # continue the turn: the decided calls run (or not), then the model


async def _ask(request: Mapping[str, Any], lines: _Lines) -> ReviewerDecision:
    arguments = json.dumps(request.get("arguments"), ensure_ascii=False)
    err.print(
        f"{request.get('description')}\n  {request.get('tool')}({arguments})",
        markup=False,
        highlight=False,
    )
    try:
        with prompt_shown("approve? [y/N] ", markup=False):
            async with asyncio.timeout(CHAT_APPROVAL_TIMEOUT):
                answer = await lines.next()
    except (TimeoutError, EOFError):
        err.print("\nno answer: rejected", **PLAIN)
        return ReviewerDecision("reject", message="nobody answered in time")
    if answer.strip().lower() in ("y", "yes"):
        return ReviewerDecision("approve")
    return ReviewerDecision("reject", message="rejected at the chat prompt")


async def _streamed(agent: HarnessAgent, text: str | None, ctx: RuntimeContext) -> Ended:
    """The turn's text and tool activity as they come; its outcome (a failure raised)."""
    outcome: Outcome | None = None
    async with contextlib.aclosing(agent.stream(text, ctx=ctx)) as items:
        async for item in items:
            _show(item)
            if isinstance(item, Outcome):
                outcome = item
    out.print()
    assert outcome is not None  # a stream ends with its outcome
    return settled(outcome)


def _show(item: StreamItem) -> None:
    """One item of a streamed turn, as the chat shows it: text on stdout, tools on stderr."""
    if isinstance(item, TextDelta):
        out.print(item.text, end="", markup=False, highlight=False)
    elif isinstance(item, ToolStarted):
        call = f"{item.call.name}({json.dumps(item.call.input, ensure_ascii=False)})"
        err.print(f"-> {call}", style="dim", markup=False, highlight=False)
    elif isinstance(item, ToolFinished):
        status = "error" if item.result.is_error else f"{len(item.result.text)} chars"
        err.print(f"<- {item.result.name}: {status}", style="dim", markup=False, highlight=False)


@app.command()
def demo(
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="Where to run the tour.",
            callback=valid_path,
            show_default="a new temporary directory",
        ),
    ] = None,
    verbose: VerboseOpt = False,
) -> None:
    """Take the offline tour: a scripted session that shows what the harness does."""
    setup_logging(verbose)
    run_async(run_demo(workspace))


def main() -> None:
    """Entry point of the ``harness`` console script.

    A usage error (an unknown option, a value out of range, an empty id) is one line on stderr
    and exit code 2, like every other error of the command: Click's own rendering is a box of
    several lines that a script reading stderr cannot take apart.
    """
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # Click's errors, as Typer ships Click
        # A group run alone (`harness tasks`) has printed its help already; Typer tells that
        # error by its class name as well, the class not being public.
        if type(exc).__name__ != "NoArgsIsHelpError":
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            message = f"error: {exc.format_message()}{hint}"
            err.print(message, markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:  # end of input at a prompt
        raise SystemExit(1) from None
    raise SystemExit(code if isinstance(code, int) else 0)
