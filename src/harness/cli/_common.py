"""What the commands share: their common options and the one place errors become exit codes."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, TypeVar

import typer
from rich.markup import escape

from harness.agent import default_workspace
from harness.cli._output import err, out
from harness.errors import ConfigError, HarnessError, WorkspaceError
from harness.kernel import Ended, Msg, Paused
from harness.models import DEFAULT_LOCAL_CONTEXT_WINDOW, MIN_CONTEXT_WINDOW
from harness.stores import STORE_ENV, open_store
from harness.workspace import WorkspaceManager

__all__ = [
    "EXIT_PAUSED",
    "MCP_CONFIG_ENV",
    "AgentOpt",
    "ApprovalOpt",
    "ContextWindowOpt",
    "EngineOpt",
    "MCPConfigOpt",
    "ModelOpt",
    "ModelOptionOpt",
    "SessionArg",
    "SessionOpt",
    "StoreOpt",
    "UserOpt",
    "VerboseOpt",
    "WorkspaceOpt",
    "checked_workspace",
    "looked_in",
    "model_options",
    "not_blank",
    "one_line_errors",
    "opened_workspace",
    "print_pending",
    "replied",
    "run_async",
    "shortened",
    "shown_id",
    "text_problem",
    "valid_id",
    "valid_path",
    "valid_paths",
    "valid_text",
]

T = TypeVar("T")


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be used as text (saved as UTF-8, sent to a model), or None.

    A NUL never comes from a real command line (the kernel ends an argument at it), but a
    lone surrogate does: the interpreter decodes bytes that are not UTF-8 that way.
    """
    if "\x00" in value:
        return _HOLDS_NUL
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _NOT_UTF8
    return None


_HOLDS_NUL: Final = "holds a NUL character, which no file name or record can hold"
_NOT_UTF8: Final = "is not valid UTF-8"


def shortened(value: str, limit: int = 200) -> str:
    """``value`` quoted for a message, its middle cut when long: a line stays readable."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[: limit // 2]!r}...{value[-20:]!r} ({len(value):,} characters)"


def shown_id(value: str) -> str:
    """An id for a message: as it is when it prints as one short line, else :func:`shortened`."""
    return value if value.isprintable() and len(value) <= 200 else shortened(value)


def valid_text(value: str | None) -> str | None:
    """Refuse text that is not UTF-8 as a usage error, before it meets a file or a model."""
    problem = None if value is None else text_problem(value)
    if problem == _NOT_UTF8:
        problem += "; give it in UTF-8 (is the terminal's locale UTF-8?)"
    if problem is not None:
        raise typer.BadParameter(problem)
    return value


def valid_id(value: str | None) -> str | None:
    """Refuse an id that cannot name a session, user, agent or task, as a usage error.

    An id names a directory and is saved in records, so it must be non-blank UTF-8 text; the
    library refuses anything else too, but from deep inside, as a traceback.
    """
    if value is None:
        return None
    if value == "":
        msg = "must not be empty"
        raise typer.BadParameter(msg)
    if not value.strip():
        msg = "must not be blank"
        raise typer.BadParameter(msg)
    return valid_text(value)


def valid_path(value: Path | None) -> Path | None:
    """Refuse a path no system call takes (one with a NUL) as a usage error.

    Names that are not UTF-8 are left to the command: they are valid file names.
    """
    if value is not None and "\x00" in str(value):
        raise typer.BadParameter(_HOLDS_NUL)
    return value


def valid_paths(values: list[Path] | None) -> list[Path] | None:
    """:func:`valid_path` for each value of a repeatable option."""
    for value in values or []:
        valid_path(value)
    return values


WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Workspace directory.",
        callback=valid_path,
        # Typer renders help as Rich markup, where a literal "[default: ...]" is eaten as a tag.
        show_default="$HARNESS_WORKSPACE or ./.harness/workspace",
    ),
]


async def _stoppable(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro``, cancelling it on a stopping signal (which then raises :class:`_Stopped`)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[int] = []

    def stop(signum: int) -> None:
        if not received:  # a second signal while the call saves must not cut the save
            received.append(signum)
            task.cancel()

    for signum in STOPPING_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await coro
    except asyncio.CancelledError:
        if received:
            raise _Stopped(received[0]) from None
        raise
    finally:
        for signum in STOPPING_SIGNALS:
            loop.remove_signal_handler(signum)
            # From here to the process's exit (the loop's shutdown, the output) the call has
            # saved all it will; a stop must still exit as one during the call does, not by
            # the signal's default action.
            signal.signal(signum, _stopped_late)
        atexit.register(_ignore_stops_at_exit)  # Python's own exit resets the handlers


def _stopped_late(signum: int, _frame: object) -> None:
    # A signal handler runs between two bytecodes of whatever the main thread was doing, the
    # console's own printing (or a lazy import inside it) included: re-entering the console
    # from here failed that import and exited 1 with a traceback. A raw write re-enters
    # nothing.
    line = f"stopped by {signal.Signals(signum).name}; the session keeps every completed turn\n"
    with contextlib.suppress(OSError):
        os.write(2, line.encode())
    raise SystemExit(128 + signum)


def _ignore_stops_at_exit() -> None:
    """Once the command is done, a stop changes nothing: the process ends with its own code."""
    atexit.unregister(_ignore_stops_at_exit)
    signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING_SIGNALS)


def checked_workspace(path: Path | None) -> WorkspaceManager:
    """The workspace a command works in (the default one when none is given), checked usable.

    Blocking (it may create the directory): call it from a worker thread in async code.

    Raises:
        WorkspaceError: The path is not a directory that can be used: not one, not creatable,
            not readable and writable, too long for the system, or not UTF-8 (its path is
            written into the index and records, which hold text).
    """
    root = path or default_workspace()
    shown = shortened(str(root))
    problem = text_problem(str(root))
    if problem is not None:
        msg = f"the workspace path {shown} {problem}; rename it or pass another --workspace DIR"
        raise WorkspaceError(msg)
    try:
        root = root.expanduser()
    except RuntimeError:  # "~name/..." where no user is called name
        msg = f"the workspace path {shown} starts with the home of an unknown user; fix the ~"
        raise WorkspaceError(msg) from None
    manager = WorkspaceManager(root)
    try:
        manager.check()
    except OSError as exc:  # what check() does not foresee: a name too long, a loop of links
        msg = f"cannot use the workspace {shown}: {exc.strerror or exc}; pass --workspace DIR"
        raise WorkspaceError(msg) from exc
    return manager


@contextlib.asynccontextmanager
async def opened_workspace(path: Path | None, store: str | None) -> AsyncIterator[WorkspaceManager]:
    """The workspace a command reads: the local one, or the one kept in ``--store``.

    With a store (``--store`` or ``$HARNESS_STORE``), the files are read from it and the local
    directory only anchors the workspace; the store's connection is closed on the way out.
    """
    manager = await asyncio.to_thread(checked_workspace, path)
    url = store or os.environ.get(STORE_ENV)
    if not url:
        yield manager
        return
    from harness.filesystem.remote import RemoteFilesystem

    kv = open_store(url)
    try:
        yield WorkspaceManager(manager.root, RemoteFilesystem(kv))
    finally:
        await kv.aclose()


def not_blank(value: str) -> str:
    """Reject a blank prompt: there is nothing to send, and providers reject empty messages."""
    if not value.strip():
        msg = "must not be blank"
        raise typer.BadParameter(msg)
    valid_text(value)
    return value


SessionOpt = Annotated[
    str, typer.Option("--session", "-s", help="Session to continue.", callback=valid_id)
]
SessionArg = Annotated[str, typer.Argument(help="The session id.", callback=valid_id)]
AgentOpt = Annotated[
    str,
    typer.Option(
        "--agent", "-a", help="The agent whose sessions and tasks these are.", callback=valid_id
    ),
]
UserOpt = Annotated[
    str | None, typer.Option("--user", "-u", help="User the call acts for.", callback=valid_id)
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="openai:<model>, anthropic:<model>, local[:<file.gguf>] or scripted:<file>.",
        callback=valid_text,
        show_default="$HARNESS_MODEL",
    ),
]
EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        metavar="URL",
        help="Run turns on a durable engine, temporal://HOST:PORT: a turn outlives the "
        "process that took it (docs/durable-execution.md).",
        callback=valid_text,
        show_default="none: turns run in this process",
    ),
]

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="A store shared by several workers, redis://host:port/db: the workspace's files, "
        "sessions and memory live there.",
        callback=valid_text,
        show_default="$HARNESS_STORE, else the local workspace",
    ),
]


def window_size(value: int | None) -> int | None:
    """Reject a window too small for any prompt, before compaction refuses it less clearly."""
    if value is not None and value < MIN_CONTEXT_WINDOW:
        msg = (
            f"{value} is too small: give the model's context window, at least "
            f"{MIN_CONTEXT_WINDOW} tokens"
        )
        raise typer.BadParameter(msg)
    return value


ContextWindowOpt = Annotated[
    int | None,
    typer.Option(
        "--context-window",
        callback=window_size,
        metavar="N",
        help="The model's context window in tokens: compaction keeps the conversation well "
        "inside it, and a local model allocates that much.",
        show_default=f"$HARNESS_CONTEXT_WINDOW, else {DEFAULT_LOCAL_CONTEXT_WINDOW} for a local "
        "model, else unknown",
    ),
]


def key_value(pairs: list[str] | None) -> list[str] | None:
    """Check that each ``--option`` is KEY=VALUE; :func:`model_options` reads them."""
    for pair in pairs or []:
        key, sep, _ = pair.partition("=")
        if not sep or not key.strip():
            msg = f"{shortened(pair)} is not KEY=VALUE (e.g. -o max_tokens=256)"
            raise typer.BadParameter(msg)
        valid_text(pair)
    return pairs


def model_options(pairs: list[str] | None) -> dict[str, Any]:
    """``--option`` pairs as request fields; a value that parses as JSON is that JSON value."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, _, raw = pair.partition("=")
        try:
            options[key.strip()] = json.loads(raw)
        except ValueError:
            options[key.strip()] = raw
    return options


ModelOptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        metavar="KEY=VALUE",
        help="A model option as KEY=VALUE, sent with every request; repeatable. Values are "
        "JSON where they parse: -o max_tokens=256 -o temperature=0.2 -o tool_choice=auto.",
        callback=key_value,
        show_default=False,
    ),
]
MCP_CONFIG_ENV = "HARNESS_MCP_CONFIG"
ApprovalOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--approval",
        metavar="TOOL",
        help="A tool whose calls wait for your approval before they run (an MCP tool as "
        "server__tool, or a pattern such as 'deploy_*'); repeatable.",
        show_default=False,
    ),
]
MCPConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--mcp-config",
        metavar="FILE",
        help="A tools.json listing MCP servers whose tools the agent gets; it must lie outside "
        "the workspace (the agent can write the workspace's files).",
        callback=valid_path,
        show_default="$HARNESS_MCP_CONFIG, else none",
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Show the agent trace on stderr.")
]


STOPPING_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP)
"""Signals that stop a command the way Ctrl-C does: what ``timeout``, Docker, systemd and a
closing terminal send."""


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def one_line(text: str) -> str:
    """``text`` as one line: its line breaks and control characters shown escaped.

    A path or an id the user gave may hold them; the error stays the one line it is meant to be.
    """
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn a Harness error into one line on stderr and an exit code: the one place that does.

    2 for a configuration problem (the user can fix the command line or the setup), 1 for a
    failure while running.
    """
    try:
        yield
    except (ConfigError, WorkspaceError) as exc:
        err.print(
            f"[red]error:[/red] {escape(one_line(str(exc)))}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(2) from None
    except HarnessError as exc:
        message = one_line(f"{type(exc).__name__}: {exc}")
        err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


EXIT_PAUSED: Final = 3
"""The exit code of a command whose turn paused before tool calls that wait for approval."""


def replied(outcome: Ended) -> Msg:
    """A finished turn's reply; a paused one prints what it waits for and exits 3.

    The command line's one reading of a pause: not a failure (exit 1), the turn waits for a
    person, who decides with ``harness approvals`` and continues it.
    """
    if isinstance(outcome, Paused):
        print_pending(outcome.pending)
        raise typer.Exit(EXIT_PAUSED)
    return outcome.reply


def looked_in(workspace: Path | str, user: str | None) -> str:
    """Where a listing looked, for the line that says it found nothing.

    A newcomer who forgot ``--user`` learns what to pass instead of taking "nothing" for the
    truth.
    """
    who = f"user {user!r}" if user is not None else "the shared namespace (no --user given)"
    return f"{who} of the workspace {workspace}"


def print_pending(pending: Sequence[Mapping[str, Any]], *, sessions: bool = False) -> None:
    """The approvals a turn waits for, one per line, and how to decide them (on stdout).

    ``sessions``: they come from several sessions; each line names its own.
    """
    for request in pending:
        arguments = json.dumps(request.get("arguments"), ensure_ascii=False)
        whose = f" [session {request.get('session_id')}]" if sessions else ""
        whose += f" [subagent {request['subagent']}]" if request.get("subagent") else ""
        if request.get("task_id"):
            whose += f" [background task {request['task_id']}]"
        out.print(
            f"approval {request.get('id')}{whose}: {request.get('tool')}({arguments}) - "
            f"{request.get('description')} (decisions: {', '.join(request.get('decisions', []))})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    session = "its --session" if sessions else "the same --session"
    err.print(
        "the turn waits for approval; decide with `harness approvals approve ID` (or reject, "
        f"edit, respond) with the same --workspace and --user, and {session}",
        highlight=False,
        soft_wrap=True,
    )


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; turn a Harness error into one line and an exit code.

    SIGTERM and SIGHUP stop it as SIGINT does: the running call is cancelled, so it saves
    what it accepted and completed, and the process exits with 128 + the signal's number.
    """
    try:
        with one_line_errors():
            return asyncio.run(_stoppable(coro))
    except _Stopped as stopped:
        err.print(f"stopped by {stopped}; the session keeps every completed turn")
        raise typer.Exit(128 + stopped.signum) from None
    except KeyboardInterrupt:
        err.print("interrupted; the session keeps every completed turn")
        raise typer.Exit(130) from None
