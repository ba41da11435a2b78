"""Run the ``harness`` command with an isolated environment, in this process or in a real one.

Shared by the end-to-end tests: a :class:`Cli` runs the command with ``HOME`` pointing at a
temporary directory and without the variables that would let the developer's own model, keys
or workspace leak in; the helpers write scripted-model files and read what the CLI left on disk.

A run happens in this process by default (:func:`run_in_process`): it calls what the console
script calls, :func:`harness.cli.main.main`, with the run's argv, environment, working
directory and stdio swapped in, and puts back afterwards what a real process would have lost at
its exit. That saves the interpreter's start and the imports (about 2 s a run on two cores,
hundreds of runs a suite). ``process=True`` (or a ``prefix``) starts the installed console script
instead, for a test whose point is the process boundary itself: a signal, how the process exits,
the interpreter's own decoding of argv, an import hidden from a new interpreter, a crash.

Memory is on by default: after every call the agent's model is also asked, as the memory model,
for new memories (and now and then to consolidate them). Scripts therefore start with
:data:`NO_MEMORIES` (or a flush turn of their own), and :func:`split_requests` tells the agent's
requests from the memory model's.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar
from unittest import mock

T = TypeVar("T")

HARNESS: Final = Path(sys.executable).parent / "harness"
"""The console script installed next to the interpreter running the tests."""

REMOVED_ENV: Final = (
    "HARNESS_WORKSPACE",
    "HARNESS_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    # Output must look the same on every machine: no forced colours, no inherited width.
    "COLUMNS",
    "LINES",
    "FORCE_COLOR",
    "NO_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "PYTHONDEVMODE",
)

BASE_ENV: Final = {k: v for k, v in os.environ.items() if k not in REMOVED_ENV}
"""The environment the commands inherit, taken once at import in the main thread: reading
``os.environ`` from the worker threads that run commands side by side races with pytest
rewriting ``PYTEST_CURRENT_TEST`` and can raise ``KeyError``."""

TIMEOUT_S: Final = 60.0

TRACE_EVENTS: Final = ("PreCall", "PreReasoning", "PostReasoning", "PostCall")

FLUSH_PROMPT: Final = "Extract NEW memories"
"""Text of the memory flush's request (its last message), which no agent request holds."""

CONSOLIDATION_PROMPT: Final = "New daily log entries to merge"
"""Text of the consolidation's request (its last message)."""

NO_MEMORIES: Final[Mapping[str, Any]] = {"match": FLUSH_PROMPT, "text": "NO_REPLY", "repeat": True}
"""A script turn answering every memory flush with "nothing new"; put it first in a script so
that the agent's turns are not spent on the flush (memory is on by default)."""


@dataclass(frozen=True)
class Result:
    """What one run of the command did."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def __str__(self) -> str:  # shown by pytest when an assertion about a result fails
        return (
            f"harness {' '.join(self.args)} -> {self.returncode}\n"
            f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}"
        )


@dataclass(frozen=True)
class Cli:
    """Runs ``harness`` with ``HOME`` at ``home`` and the working directory at ``cwd``."""

    home: Path
    cwd: Path

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(BASE_ENV)
        env["HOME"] = str(self.home)
        env["PYTHONWARNINGS"] = "error"  # a warning in the command is a failure, as in pytest
        env.update(extra or {})
        return env

    def run(
        self,
        *args: str | Path,
        env: Mapping[str, str] | None = None,
        stdin: str = "",
        timeout: float = TIMEOUT_S,
        prefix: Sequence[str] = (),
        process: bool = False,
    ) -> Result:
        """Run ``harness *args``, in this process unless ``process`` or a ``prefix`` is given.

        ``prefix`` is a command that runs a real process of it (``unshare --net --``). A run
        that outlasts ``timeout`` raises :class:`subprocess.TimeoutExpired` either way.
        """
        argv = tuple(str(arg) for arg in args)
        if not process and not prefix:
            return run_in_process(argv, self.env(env), self.cwd, stdin=stdin, timeout=timeout)
        completed = subprocess.run(
            [*prefix, str(HARNESS), *argv],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env(env),
            cwd=self.cwd,
            timeout=timeout,
            check=False,
        )
        return Result(argv, completed.returncode, completed.stdout, completed.stderr)


# -- a run in this process ---------------------------------------------------------------------


class ServerStarted(Exception):
    """``harness serve`` reached ``uvicorn.run`` in a run in this process (which starts none)."""


def _no_server(*args: object, **kwargs: object) -> None:
    raise ServerStarted("uvicorn.run was reached: a server runs only in a real process")


def run_in_process(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    *,
    stdin: str = "",
    timeout: float = TIMEOUT_S,
) -> Result:
    """``harness ARGV`` as the console script runs it, in this process: exit code, stdout, stderr.

    The run sees exactly ``env`` as its environment, ``cwd`` as its working directory and
    ``stdin`` as its input; its stdout and stderr are pipes as a real process's are (not a
    terminal, UTF-8, stderr escaping what it cannot encode). An exception that escapes the
    command is printed as the interpreter would, and the exit code is 1. Runs happen one at a
    time on the main thread: the command installs signal handlers and changes process-wide
    state, which only the main thread may and which two runs at once would share.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "a run in this process must be on the main thread; run side by side with process=True"
        )
    from harness.cli.main import main

    out, err = io.BytesIO(), io.BytesIO()
    code = 0
    with _process_state(argv, env, cwd, stdin, out, err), _time_limit(argv, timeout):
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if isinstance(exc.code, str):  # as the interpreter does with a message
                sys.stderr.write(exc.code + "\n")
        except subprocess.TimeoutExpired:
            raise
        except Exception:
            sys.stderr.write(traceback.format_exc())
            code = 1
    return Result(tuple(argv), code, _text_of(out), _text_of(err))


def _text_of(data: io.BytesIO) -> str:
    """What ``subprocess.run(text=True)`` makes of a pipe's bytes: decoded, newlines unified."""
    text = data.getvalue().decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def _process_state(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    stdin: str,
    out: io.BytesIO,
    err: io.BytesIO,
) -> Iterator[None]:
    """Swap in a run's process state; then put back what a real process would lose at its exit.

    That is: argv, the environment (and tempfile's directory, chosen from it), the working
    directory, stdio (and the command's Rich consoles, made anew as a new process would make
    them), the signal handlers and exit hook
    of a stop, the loggers' set-up, and the chat's input thread, which is let reach the end of
    its input before stdin is put back.
    """
    from harness.cli import _common

    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    source = io.BytesIO(stdin.encode("utf-8", "surrogateescape"))
    stdin_file = io.TextIOWrapper(source, encoding="utf-8", errors="strict")
    handlers = {signum: signal.getsignal(signum) for signum in _common.STOPPING_SIGNALS}
    loggers = _logger_states()
    threads_before = set(threading.enumerate())
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    with contextlib.ExitStack() as stack:
        for wrapper in (stdin_file, stdout, stderr):  # last: the buffers stay open to be read
            stack.callback(wrapper.detach)
        stack.enter_context(mock.patch.object(sys, "argv", [str(HARNESS), *argv]))
        stack.enter_context(mock.patch.object(sys, "stdin", stdin_file))
        stack.enter_context(mock.patch.object(sys, "stdout", stdout))
        stack.enter_context(mock.patch.object(sys, "stderr", stderr))
        stack.enter_context(mock.patch("uvicorn.run", _no_server))
        # tempfile keeps the directory it chose first; a new process chooses by its TMPDIR.
        stack.enter_context(mock.patch.object(tempfile, "tempdir", None))
        main_module = sys.modules["__main__"]
        if getattr(main_module, "__package__", None) not in (None, ""):
            # Click names the program after __main__; under `python -m pytest` that would be
            # "python -m pytest". A console script's __main__ has no package.
            script = types.ModuleType("__main__")
            stack.enter_context(mock.patch.dict(sys.modules, {"__main__": script}))
        os.environ.clear()
        os.environ.update(env)
        # Rich reads a terminal's size from the process's descriptors when COLUMNS is unset;
        # a real process's pipes have none, and Rich then takes 80 columns.
        os.environ.setdefault("COLUMNS", "80")
        _fresh_consoles(stack)
        os.chdir(cwd)
        try:
            yield
        finally:
            os.chdir(saved_cwd)
            _let_input_threads_finish(threads_before)
            os.environ.clear()
            os.environ.update(saved_env)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            atexit.unregister(_common._ignore_stops_at_exit)
            _restore_loggers(loggers)


def _fresh_consoles(stack: contextlib.ExitStack) -> None:
    """New Rich consoles for the run, in every module that holds the command's two.

    A console reads the environment (colour, width) when it is made: the ones made at import
    saw this test process's, not the run's. Typer's help consoles do so too, from constants it
    reads at its import: they are set as the run's environment would have set them.
    """
    from rich.console import Console
    from typer import rich_utils

    fresh = {"out": Console(), "err": Console(stderr=True)}
    for name, module in list(sys.modules.items()):
        if name != "harness" and not name.startswith("harness."):
            continue
        for attr, console in fresh.items():
            # Not only the consoles ``output`` made at import: a module first imported during
            # an earlier run kept that run's console, made for that run's environment.
            if isinstance(getattr(module, attr, None), Console):
                stack.enter_context(mock.patch.object(module, attr, console))
    colours = ("GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS")
    force = True if any(os.environ.get(name) for name in colours) else None
    if os.environ.get("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    width = os.environ.get("TERMINAL_WIDTH")
    stack.enter_context(mock.patch.object(rich_utils, "FORCE_TERMINAL", force))
    stack.enter_context(mock.patch.object(rich_utils, "MAX_WIDTH", int(width) if width else None))


_LoggerState = tuple[logging.Logger, list[logging.Handler], int, bool, bool]


def _logger_states() -> list[_LoggerState]:
    """The set-up of the harness's loggers, which the command changes (``setup_logging``)."""
    names = ["harness", *(n for n in logging.root.manager.loggerDict if n.startswith("harness."))]
    states: list[_LoggerState] = []
    for name in names:
        log = logging.getLogger(name)
        states.append((log, list(log.handlers), log.level, log.propagate, log.disabled))
    return states


def _restore_loggers(states: list[_LoggerState]) -> None:
    known = {log.name for log, *_ in states}
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("harness.") and name not in known:  # made by the run: as new
            log = logging.getLogger(name)
            log.handlers.clear()
            log.setLevel(logging.NOTSET)
            log.propagate = True
    for log, handlers, level, propagate, disabled in states:
        log.handlers[:] = handlers
        log.setLevel(level)
        log.propagate = propagate
        log.disabled = disabled


INPUT_THREAD: Final = "harness-chat-input"
"""The name of ``harness chat``'s reader thread (``harness.cli.main._Lines``)."""


def _let_input_threads_finish(before: set[threading.Thread]) -> None:
    """Wait for the chat's reader thread of this run to reach the end of its (finite) input.

    It reads ``sys.stdin`` line by line until the end; put back too early, stdin would be this
    process's own, and the thread would read (or wait on) that. In a real process it dies with
    the process.
    """
    for thread in set(threading.enumerate()) - before:
        if thread.name == INPUT_THREAD:
            thread.join(timeout=TIMEOUT_S)


@contextlib.contextmanager
def _time_limit(argv: Sequence[str], seconds: float) -> Iterator[None]:
    """Raise :class:`subprocess.TimeoutExpired` in the main thread after ``seconds``.

    As ``subprocess.run(timeout=...)`` does for a real process: a run that hangs (a server that
    started, a file read that blocks) fails its test instead of the whole suite.
    """

    def expired(signum: int, frame: object) -> None:
        raise subprocess.TimeoutExpired([str(HARNESS), *argv], seconds)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class InOrder(concurrent.futures.Executor):
    """An executor that runs each call at once, on the calling thread: a test's scenarios of
    runs in this process, which happen on the main thread one at a time.

    The future it returns is already done, holding the call's result or its exception.
    """

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future


def make_cli(root: Path) -> Cli:
    """A :class:`Cli` whose home and working directory are fresh directories under ``root``."""
    home, cwd = root / "home", root / "cwd"
    home.mkdir(parents=True)
    cwd.mkdir(parents=True)
    return Cli(home=home, cwd=cwd)


def write_script(path: Path, turns: Sequence[Mapping[str, Any]], *, log: str | None = None) -> Path:
    """Write a scripted-model file (see ``harness.models.scripted``); returns its path."""
    script: dict[str, Any] = {"turns": list(turns)}
    if log is not None:
        script["log"] = log
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def read_requests(log: Path) -> list[list[dict[str, Any]]]:
    """Every request the scripted model received, in order: each a list of message dicts."""
    return read_jsonl(log)


def last_text(request: Sequence[Mapping[str, Any]]) -> str:
    """The text of a request's last message: what a scripted turn's ``match`` is searched in."""
    return text_of(request[-1])


@dataclass(frozen=True)
class Requests:
    """A request log split by who asked: the agent, the memory flush, the consolidation."""

    agent: list[list[dict[str, Any]]]
    flush: list[list[dict[str, Any]]]
    consolidation: list[list[dict[str, Any]]]


def split_requests(log: Path) -> Requests:
    """The requests of ``log`` by who made them, each list in order.

    The memory model's requests are told apart by their prompts (:data:`FLUSH_PROMPT`,
    :data:`CONSOLIDATION_PROMPT`), so the agent's own requests can be checked exactly. A log that
    does not exist holds no request.
    """
    split = Requests(agent=[], flush=[], consolidation=[])
    for request in read_requests(log) if log.exists() else []:
        text = last_text(request)
        if FLUSH_PROMPT in text:
            split.flush.append(request)
        elif CONSOLIDATION_PROMPT in text:
            split.consolidation.append(request)
        else:
            split.agent.append(request)
    return split


def agent_requests(log: Path) -> list[list[dict[str, Any]]]:
    """The requests the agent itself made (the memory model's left out), in order."""
    return split_requests(log).agent


def session_file(
    workspace: Path, session: str, *, user: str | None = None, agent: str = "harness"
) -> Path:
    base = workspace / "users" / user if user else workspace
    return base / "agents" / agent / "context" / session / "messages.jsonl"


def read_session(
    workspace: Path, session: str, *, user: str | None = None, agent: str = "harness"
) -> list[dict[str, Any]]:
    return read_jsonl(session_file(workspace, session, user=user, agent=agent))


def text_of(message: Mapping[str, Any]) -> str:
    """The text blocks of a serialized message, joined."""
    return "".join(block["text"] for block in message["content"] if block["type"] == "text")


def turns_of(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of each message, the system prompt reduced to its role."""
    return [(m["role"], "" if m["role"] == "system" else text_of(m)) for m in messages]


def memory_dir(workspace: Path, *, user: str | None = None) -> Path:
    """The daily logs' directory of the shared namespace or of ``user``'s."""
    return (workspace / "users" / user if user else workspace) / "memory"


def daily_logs(workspace: Path, *, user: str | None = None) -> list[Path]:
    """The markdown files directly in a namespace's ``memory/`` (daily logs), by name."""
    return sorted(memory_dir(workspace, user=user).glob("*.md"))


def sessions_dir(workspace: Path, *, user: str | None = None, agent: str = "harness") -> Path:
    """Where an agent's session transcripts are kept in a namespace."""
    base = workspace / "users" / user if user else workspace
    return base / "agents" / agent / "sessions"


def visible_files(directory: Path) -> list[str]:
    """Names of the files in ``directory`` that are not hidden (lock files are), sorted."""
    return sorted(p.name for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def squash(text: str) -> str:
    """``text`` with every run of whitespace (including console line breaks) made one space."""
    return " ".join(text.split())
