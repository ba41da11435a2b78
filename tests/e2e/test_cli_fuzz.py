"""Hostile values for every option of every ``harness`` command: a clear line, never a traceback.

The commands and their parameters are read from the Typer app, so a command or an option added
later is fuzzed without a change here (a new command gets the workspace ``ws`` and the scripted
model when it takes them, and ``x`` for its required arguments; :data:`SETUPS` says more where a
command needs it). Every example runs in a fresh directory holding what the hostile values name:
a valid model script, a plain file, a directory, a file that is not UTF-8, one that is not JSON,
an API key file, and a search index beside the workspace that is missing, garbage, another
program's SQLite database, a directory, or another workspace's.

The property: the command exits 0, 1 or 2; no Python traceback is printed; and a failure is at
most :data:`MAX_ERROR_LINES` lines on stderr, the last one ``error: ...``, with at most that
many lines on stdout.

The examples run in this process, through :func:`harness.cli.main.main` (what the console
script calls), which saves the interpreter's start (~0.7 s) each time. Then every parameter of
every command gets non-UTF-8 bytes, as a real process's ``sys.argv`` holds them (the interpreter
decodes argv with ``surrogateescape``) and with stdout and stderr that encode what is printed as
a real process's pipes would; for one parameter of each command a real process holds that
premise. A NUL cannot be passed in a real argv (the kernel ends each argument at the first NUL),
so NUL values are tried in this process only.

``HARNESS_FUZZ_EXAMPLES`` raises the number of examples per command (default 20) for a longer
search.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import logging
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from unittest import mock

import pytest
import typer.main
from _cli_runner import HARNESS, NO_MEMORIES, REMOVED_ENV
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import _common
from harness.cli.main import app, main
from harness.memory import MemoryIndex

MAX_ERROR_LINES: Final = 3
"""A failure's message: one line, and room for a warning logged on the way."""

TRACEBACK: Final = "Traceback (most recent call last)"

CLEAR_FAILURES: Final = ("error: ", "MEMORY.md unchanged: refused: ")
"""How a failure's last line starts: an error, or consolidation refusing the model's answer
(docs/cli.md, harness memory consolidate)."""

LOG_LINE: Final = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")
"""A log record as the command line writes it (``harness.cli._output``)."""

EXAMPLES: Final = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "20"))

HUGE: Final = "x" * 100_000

# Variables that would point a command at the developer's model, keys, store or workspace.
HOSTILE_FREE_ENV: Final = (
    *REMOVED_ENV,
    "HARNESS_STORE",
    "HARNESS_API_KEYS",
    "HARNESS_MCP_CONFIG",
    "HARNESS_CONTEXT_WINDOW",
    "HARNESS_SERVE_OPTIONS",
)


# -- the commands, from the app --------------------------------------------------------------


def _commands() -> dict[str, Any]:
    """Every leaf command of the app by its path (``"memory index"``), from the Typer app."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found[" ".join(path)] = command
            return
        for name, sub in subcommands.items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


COMMANDS: Final = _commands()


# -- hostile values ----------------------------------------------------------------------------

SURROGATES: Final = "\udcff\udcfe"
"""Non-UTF-8 bytes (0xff 0xfe) as the interpreter decodes them from argv (surrogateescape)."""

_TEXTS: Final = (
    "",
    " ",
    "\t\n",
    "\n",
    HUGE,
    "a\x00b",
    SURROGATES,
    f"ok{SURROGATES}",
    "..",
    "../../etc",
    "/",
    "%2E%2E",
    "-",
    "--x",
    "[red]markup[/red]",
    "[/x]",  # a closing tag that opens nothing: what Rich refuses when it reads markup
    "\x1b[31mred",
    "ü€😀",
    "\u202eevil",
    "a=b",
    "-1",
)

TEXT: Final = st.one_of(
    st.sampled_from(_TEXTS),
    # any code points, lone surrogates included (what a non-UTF-8 argv decodes to)
    st.text(st.characters(exclude_categories=()), max_size=12),
)

_PATHS: Final = (
    "",
    ".",
    "missing",
    "missing/deeper/file.json",
    "afile",
    "afile/below",
    "adir",
    "binary.bin",
    "bad.json",
    HUGE,
    "adir/" + HUGE,
    "d" * 300,  # one name over the 255 bytes a name may have
    "/".join(["p" * 200] * 30),  # names that fit, a path over PATH_MAX
    "a\x00b",
    SURROGATES,
    "adir/" + SURROGATES,
    "~",
    "/dev/null",
)

PATH: Final = st.one_of(
    st.sampled_from(_PATHS),
    # relative and inside the example's directory: commands create what they are given
    st.text(st.characters(exclude_categories=()), max_size=8).filter(
        lambda path: not path.startswith("/") and ".." not in path
    ),
)

INT: Final = st.one_of(
    st.sampled_from(["-1", "0", "-" + "9" * 30, "9" * 30, "1e3", "", "x", "nan", " 7"]),
    st.integers().map(str),
)

FLOAT: Final = st.one_of(
    st.sampled_from(["-1", "-0", "nan", "inf", "-inf", "1e309", "", "x", "1_0"]),
    st.floats().map(repr),
)

FAILING_MODELS: Final = (
    "scripted:missing.json",
    "scripted:adir",
    "scripted:afile",
    "scripted:binary.bin",
    "scripted:bad.json",
    "scripted:",
    f"scripted:{HUGE}",
    "scripted:a\x00b",
    f"scripted:{SURROGATES}",
    "local:missing.gguf",
    "local:afile",
    "openai:x",  # no OPENAI_API_KEY
    "anthropic:x",
    "nonsense",
    "",
    " ",
    SURROGATES,
    HUGE,
)
"""Model specs that no command can start a model from (none reaches the network)."""

MODEL: Final = st.one_of(st.sampled_from(("scripted:script.json", *FAILING_MODELS)), TEXT)

STORE: Final = st.sampled_from(
    [
        "",
        "redis://[::1",
        "redis://h:x/0",
        "redis://h/abc",
        "memory://",
        "file:///tmp",
        f"redis://{HUGE}",
        "a\x00b",
        SURROGATES,
        HUGE,
    ]
)
"""Store URLs that are refused before any connection: a valid one would reach the network."""

MODEL_OPTION: Final = st.one_of(
    st.sampled_from(
        ["max_tokens=-1", "temperature=nan", "=1", "k=", "x", f"k={SURROGATES}", f"{HUGE}=1"]
    ),
    TEXT,
)

_BY_NAME: Final[Mapping[str, st.SearchStrategy[str]]] = {
    "model": MODEL,
    "store": STORE,
    "option": MODEL_OPTION,
}


def _kind(param: Any) -> Any:
    """The type of a parameter's values: ``Path`` for ``list[Path]`` or ``Path | None``."""
    annotation = param.type_descriptor.annotation
    return getattr(annotation, "__args__", (annotation,))[0]


def _values(param: Any) -> st.SearchStrategy[str]:
    """Hostile values for one parameter, by its name or else by its type."""
    if param.name in _BY_NAME:
        return _BY_NAME[param.name]
    kind = _kind(param)
    if kind is Path:
        return PATH
    if kind is int:
        return INT
    if kind is float:
        return FLOAT
    return TEXT


# -- how each command is fuzzed ---------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What a command is given besides the hostile values.

    ``base`` holds, by parameter name, values that let the command go as far as it can (a
    workspace, a working scripted model), so that a hostile value elsewhere is met deep inside
    it, not only at parsing. ``only`` limits a parameter to the values given, for commands that
    would otherwise start something that does not end.
    """

    base: Mapping[str, str] = field(default_factory=dict)
    only: Mapping[str, Sequence[str]] = field(default_factory=dict)
    stdin: st.SearchStrategy[str] = field(default_factory=lambda: st.just(""))


SETUPS: Final[Mapping[str, Setup]] = {
    "run": Setup(base={"prompt": "hello"}),
    # chat reads its turns from stdin; the end of input ends it.
    "chat": Setup(stdin=st.one_of(st.just(""), TEXT.map(lambda line: line + "\n"))),
    # With a directory it can use, the tour runs to its end (seconds, with a sandbox step):
    # test_cli_chat_init_demo.py runs it. Here it gets only workspaces it cannot use.
    "demo": Setup(
        only={
            "workspace": (
                "afile",
                "afile/below",
                HUGE,
                "adir/" + HUGE,
                "d" * 300,
                "a\x00b",
                SURROGATES,
                "/dev/null",
            )
        }
    ),
    # A server does not end: serve always gets a model it cannot start, and must say so before
    # it listens (in this process, uvicorn.run is replaced by a failure).
    "serve": Setup(only={"model": FAILING_MODELS}),
    "keys add": Setup(base={"user": "ada", "file": "keys.txt"}),
    "memory search": Setup(base={"query": "berlin"}),
    "memory restore": Setup(base={"version": "1"}),
    "trace": Setup(base={"session": "s1"}),
    "sessions show": Setup(base={"session": "s1"}),
    "tasks show": Setup(base={"task_id": "task_1"}),
    "tasks cancel": Setup(base={"task_id": "task_1"}),
}


Value = str | list[str] | bool
"""A parameter's value: one string, several (a repeatable option), or a flag given or not."""


def params_of(path: str) -> list[Any]:
    """The parameters a user can give the command at ``path``."""
    return [p for p in COMMANDS[path].params if p.expose_value and not p.hidden]


def working_values(path: str) -> dict[str, Value]:
    """The values the command at ``path`` is given where no hostile one replaces them.

    A workspace ``ws`` and the working scripted model wherever the command takes them, ``x``
    for a required parameter, then what its :class:`Setup` says.
    """
    setup = SETUPS.get(path, Setup())
    values: dict[str, Value] = {}
    for param in params_of(path):
        if param.name == "workspace":
            values["workspace"] = "ws"
        elif param.name == "model":
            values["model"] = "scripted:script.json"
        elif param.required:
            values[param.name] = "x"
    values.update(setup.base)
    values.update({name: choices[0] for name, choices in setup.only.items()})
    return values


def argv_of(path: str, values: Mapping[str, Value]) -> tuple[str, ...]:
    """The command line of ``path`` with ``values``; arguments after ``--``, so that a value
    starting with ``-`` still reaches the argument rather than being read as an option."""
    argv = [*path.split()]
    positionals: list[str] = []
    for param in params_of(path):
        value = values.get(param.name)
        if value is None or value is False:
            continue
        if param.param_type_name == "argument":
            assert isinstance(value, str)
            positionals.append(value)
        elif value is True:
            argv.append(param.opts[0])
        else:
            for one in [value] if isinstance(value, str) else value:
                argv += [param.opts[0], one]
    if positionals:
        argv += ["--", *positionals]
    return tuple(argv)


@dataclass(frozen=True)
class Invocation:
    """One run: the command line, what stdin holds, and what is at the index's place."""

    argv: tuple[str, ...]
    stdin: str = ""
    index: str = "none"

    def __repr__(self) -> str:  # hypothesis prints it for a failing example; keep it short
        shown = [a if len(a) < 80 else f"{a[:20]}...({len(a)} chars)" for a in self.argv]
        return f"Invocation(argv={shown!r}, stdin={self.stdin[:80]!r}, index={self.index!r})"


INDEX_STATES: Final = ("none", "garbage", "foreign schema", "directory", "other workspace")
"""What is at ``memory_index.db`` beside the workspace when the command starts."""


@st.composite
def invocations(draw: st.DrawFn, path: str) -> Invocation:
    """One call of the command at ``path``: its working values, one to three made hostile."""
    setup = SETUPS.get(path, Setup())
    values = working_values(path)
    params = params_of(path)
    hostile = draw(st.sets(st.sampled_from([p.name for p in params]), min_size=1, max_size=3))
    for param in params:
        if param.name not in hostile:
            continue
        if getattr(param, "is_flag", False):
            values[param.name] = True
            continue
        only = setup.only.get(param.name)
        strategy = st.sampled_from(only) if only else _values(param)
        if param.multiple:
            values[param.name] = draw(st.lists(strategy, min_size=1, max_size=2))
        else:
            values[param.name] = draw(strategy)
    # The index is missing about half the time: the other states stop most commands early.
    index = draw(st.one_of(st.just("none"), st.sampled_from(INDEX_STATES)))
    return Invocation(argv_of(path, values), draw(setup.stdin), index)


# -- a directory for each example -------------------------------------------------------------

SCRIPT: Final = {"turns": [NO_MEMORIES, {"text": "fine", "repeat": True}]}


def prepare(root: Path, index: str) -> None:
    """The files hostile values name, the workspace ``ws``, and the index state ``index``."""
    (root / "script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    (root / "afile").write_text("I am a file\n", encoding="utf-8")
    (root / "adir").mkdir()
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00\x80 not UTF-8\n")
    (root / "bad.json").write_text('{"turns": [', encoding="utf-8")
    (root / "keys.txt").write_text("", encoding="utf-8")
    # A workspace with memory, so that the commands that index it have files to index.
    (root / "ws" / "memory").mkdir(parents=True)
    memory = "# Memory\n\n- Ada lives in Berlin [/x] (the tag is text).\n"
    (root / "ws" / "MEMORY.md").write_text(memory, "utf-8")
    (root / "ws" / "memory" / "2026-01-02.md").write_text("- Ada likes tea.\n", "utf-8")
    db = root / "memory_index.db"
    if index == "garbage":
        db.write_bytes(b"\xffnot a database" * 100)
    elif index == "foreign schema":
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute("CREATE TABLE memory_files (name TEXT)")
            conn.commit()
    elif index == "directory":
        db.mkdir()
    elif index == "other workspace":
        MemoryIndex(root, workspace=root / "other").open().close()


# -- running a command in this process --------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one run of the command did: its exit code and output, or what escaped ``main()``."""

    invocation: Invocation
    code: object
    stdout: str
    stderr: str
    escaped: str | None = None

    def __str__(self) -> str:  # shown by pytest when the property fails
        def cut(text: str) -> str:
            return text if len(text) < 4000 else f"{text[:2000]}\n...\n{text[-2000:]}"

        escaped = f"--- escaped main() ---\n{self.escaped}" if self.escaped else ""
        return (
            f"{self.invocation!r} -> {self.code!r}\n--- stdout ---\n{cut(self.stdout)}"
            f"--- stderr ---\n{cut(self.stderr)}{escaped}"
        )


class ServerStarted(Exception):
    """``harness serve`` got as far as starting uvicorn, with a model it cannot start."""


def _no_server(*args: object, **kwargs: object) -> None:
    raise ServerStarted("uvicorn.run was reached: serve did not refuse its options first")


def _logger_state(name: str) -> tuple[logging.Logger, list[logging.Handler], int, bool]:
    log = logging.getLogger(name)
    return log, list(log.handlers), log.level, log.propagate


@contextlib.contextmanager
def _process_state(root: Path) -> Iterator[None]:
    """Work in ``root``; then put back what a command changes that a real process would lose
    at its exit: the signal handlers and exit hook of a stop, the loggers, the environment."""
    handlers = {signum: signal.getsignal(signum) for signum in _common.STOPPING_SIGNALS}
    loggers = [_logger_state(name) for name in ("harness", "harness.trace", "harness.serve")]
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with mock.patch.dict(os.environ):
            yield
    finally:
        os.chdir(cwd)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        atexit.unregister(_common._ignore_stops_at_exit)
        for log, saved, level, propagate in loggers:
            log.handlers[:] = saved
            log.setLevel(level)
            log.propagate = propagate


def run_in_process(invocation: Invocation, root: Path) -> Outcome:
    """``harness ARGV`` as the console script runs it, with this process's stdio swapped.

    stdin and stdout are strict, as under a UTF-8 locale such as en_US.UTF-8 (other bytes
    read, or a lone surrogate printed, are an error there); stderr replaces what it cannot
    encode, as Python's own always does.
    """
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    data = io.BytesIO(invocation.stdin.encode("utf-8", "surrogateescape"))
    stdin = io.TextIOWrapper(data, encoding="utf-8", errors="strict")
    code: object = None
    escaped = None
    with (
        _process_state(root),
        mock.patch.object(sys, "argv", ["harness", *invocation.argv]),
        mock.patch.object(sys, "stdin", stdin),
        mock.patch.object(sys, "stdout", stdout),
        mock.patch.object(sys, "stderr", stderr),
        mock.patch("uvicorn.run", _no_server),
    ):
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        except BaseException:
            escaped = traceback.format_exc()
    return Outcome(invocation, code, _decoded(out.getvalue()), _decoded(err.getvalue()), escaped)


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def check(outcome: Outcome) -> None:
    """The property: a known exit code, no traceback, and a failure said in a line or so."""
    assert outcome.escaped is None, outcome
    assert outcome.code in (0, 1, 2), outcome
    assert TRACEBACK not in outcome.stdout + outcome.stderr, outcome
    if outcome.code == 0:
        return
    # Lines as a terminal shows them: str.splitlines would also break at \x1e or \x85, which
    # a hostile value may hold. With --verbose, the trace's log lines come on top.
    verbose = "--verbose" in outcome.invocation.argv
    errors = [
        line
        for line in outcome.stderr.split("\n")
        if line.strip() and not (verbose and LOG_LINE.match(line))
    ]
    assert 1 <= len(errors) <= MAX_ERROR_LINES, outcome
    assert errors[-1].startswith(CLEAR_FAILURES), outcome
    assert outcome.stdout.count("\n") <= MAX_ERROR_LINES, outcome


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in HOSTILE_FREE_ENV:
        monkeypatch.delenv(name, raising=False)


@contextlib.contextmanager
def example_dir(scratch: Path, index: str) -> Iterator[Path]:
    """A fresh directory for one example (hypothesis runs many in one test), removed after."""
    root = Path(tempfile.mkdtemp(dir=scratch))
    try:
        prepare(root, index)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_hostile_values_get_a_clear_line_never_a_traceback(
    path: str, scratch: Path, clean_env: None
) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(invocations(path))
    def fuzz(invocation: Invocation) -> None:
        with example_dir(scratch, invocation.index) as root:
            check(run_in_process(invocation, root))

    fuzz()


def test_every_command_is_fuzzed() -> None:
    # The list comes from the app; this only guards against enumerating nothing.
    assert {"run", "chat", "serve", "memory index", "keys add", "tasks cancel"} <= set(COMMANDS)
    assert set(SETUPS) <= set(COMMANDS), "a setup names a command the app does not have"


# -- non-UTF-8 bytes through a real process ---------------------------------------------------

SUBPROCESS_TIMEOUT_S: Final = 60.0


def _non_utf8_cases() -> list[tuple[str, str]]:
    """(command, parameter) for every parameter that takes text or a path.

    Numbers are left out: bytes that are not UTF-8 are no number, whatever the interpreter
    makes of them, and the examples above try numbers that are not numbers.
    """
    return [
        (path, param.name)
        for path in sorted(COMMANDS)
        for param in params_of(path)
        if not getattr(param, "is_flag", False) and _kind(param) not in (int, float)
    ]


NON_UTF8_CASES: Final = _non_utf8_cases()


def _with_bytes(path: str, name: str) -> tuple[str, ...]:
    """The command line of ``path`` with 0xff 0xfe in parameter ``name``'s value."""
    values = working_values(path)
    only = SETUPS.get(path, Setup()).only.get(name)
    if only:  # a value this command may have, made non-UTF-8 where it stays one of them
        values[name] = next((v for v in only if SURROGATES in v), only[0])
    elif name == "model":
        values[name] = f"scripted:{SURROGATES}"
    else:
        values[name] = f"ok{SURROGATES}"
    return argv_of(path, values)


REAL_PROCESS_CASES: Final = [
    next(case for case in NON_UTF8_CASES if case[0] == path)
    for path in sorted({path for path, _ in NON_UTF8_CASES})
]
"""The first such parameter of each command, which also runs in a real process."""


@pytest.fixture(scope="module")
def non_utf8_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Outcome]:
    """Every case of NON_UTF8_CASES run in this process, as the console script runs it.

    An argv of bytes reaches a real process's ``sys.argv`` as :func:`os.fsdecode` makes them
    (``surrogateescape``), which is what :func:`_with_bytes` puts in; the real process's pipes
    are what :func:`run_in_process` gives. The real-process test below holds that premise for a
    parameter of every command.
    """
    home = tmp_path_factory.mktemp("home")

    def run(case: tuple[str, str]) -> Outcome:
        root = tmp_path_factory.mktemp("bytes")
        prepare(root, "none")
        with mock.patch.dict(os.environ, {"HOME": str(home)}):
            for name in HOSTILE_FREE_ENV:
                os.environ.pop(name, None)
            return run_in_process(Invocation(_with_bytes(*case)), root)

    return {case: run(case) for case in NON_UTF8_CASES}


@pytest.mark.parametrize(("path", "name"), NON_UTF8_CASES)
def test_non_utf8_bytes_in_argv_get_a_clear_line(
    non_utf8_outcomes: dict[tuple[str, str], Outcome], path: str, name: str
) -> None:
    check(non_utf8_outcomes[path, name])


@pytest.fixture(scope="module")
def non_utf8_real_outcomes(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, str], Outcome]:
    """Every case of REAL_PROCESS_CASES run as a real ``harness`` process, two at a time."""
    env = {k: v for k, v in os.environ.items() if k not in HOSTILE_FREE_ENV}
    env["HOME"] = str(tmp_path_factory.mktemp("home"))
    env["PYTHONWARNINGS"] = "error"

    def run(case: tuple[str, str]) -> Outcome:
        root = tmp_path_factory.mktemp("bytes")
        prepare(root, "none")
        invocation = Invocation(_with_bytes(*case))
        try:
            done = subprocess.run(
                # os.fsencode turns each surrogate back into the byte it stands for
                [os.fsencode(HARNESS), *map(os.fsencode, invocation.argv)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=env,
                cwd=root,
                timeout=SUBPROCESS_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            return Outcome(
                invocation, "timeout", _decoded(exc.stdout or b""), _decoded(exc.stderr or b"")
            )
        return Outcome(invocation, done.returncode, _decoded(done.stdout), _decoded(done.stderr))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(REAL_PROCESS_CASES, pool.map(run, REAL_PROCESS_CASES), strict=True))


@pytest.mark.parametrize(("path", "name"), REAL_PROCESS_CASES)
def test_non_utf8_bytes_in_a_real_argv_get_a_clear_line(
    non_utf8_real_outcomes: dict[tuple[str, str], Outcome],
    non_utf8_outcomes: dict[tuple[str, str], Outcome],
    path: str,
    name: str,
) -> None:
    real = non_utf8_real_outcomes[path, name]
    check(real)
    # The run in this process stood for this one: it ended the same way.
    assert real.code == non_utf8_outcomes[path, name].code, (real, non_utf8_outcomes[path, name])


# -- what the fuzz found, as plain tests ------------------------------------------------------


def _real_run(
    tmp: Path, *argv: str, stdin: bytes = b"", env: Mapping[str, str] | None = None
) -> Outcome:
    """``harness ARGV`` in a real process, in ``tmp`` (prepared as for the examples)."""
    prepare(tmp, "none")
    environ = {k: v for k, v in os.environ.items() if k not in HOSTILE_FREE_ENV}
    environ.update({"HOME": str(tmp), "PYTHONWARNINGS": "error", **(env or {})})
    done = subprocess.run(
        [os.fsencode(HARNESS), *map(os.fsencode, argv)],
        input=stdin,
        capture_output=True,
        env=environ,
        cwd=tmp,
        timeout=SUBPROCESS_TIMEOUT_S,
        check=False,
    )
    return Outcome(Invocation(argv), done.returncode, _decoded(done.stdout), _decoded(done.stderr))


def test_memory_that_reads_as_markup_is_shown_as_it_is(tmp_path: Path) -> None:
    # A table cell given as a str is read as Rich markup: "[/x]" in a memory was a traceback.
    result = _real_run(tmp_path, "memory", "search", "berlin", "-w", "ws")

    check(result)
    assert result.code == 0, result
    assert "Berlin [/x] (the tag is text)" in result.stdout, result


def test_chat_takes_a_session_that_reads_as_markup(tmp_path: Path) -> None:
    result = _real_run(
        tmp_path, "chat", "-w", "ws", "-m", "scripted:script.json", "-s", "[/x]", stdin=b"hi\n"
    )

    check(result)
    assert result.code == 0, result
    assert "Chatting in session [/x]" in result.stderr, result
    assert result.stdout.strip() == "fine", result


def test_chat_refuses_a_line_that_is_not_utf8_and_goes_on(tmp_path: Path) -> None:
    # Under a strict UTF-8 locale (en_US.UTF-8: Python's stdin is strict there), reading such a
    # line raised inside input(); PYTHONIOENCODING makes the C.UTF-8 of a test machine strict.
    result = _real_run(
        tmp_path,
        "chat",
        "-w",
        "ws",
        "-m",
        "scripted:script.json",
        stdin=b"caf\xe9\nhello\n",
        env={"PYTHONIOENCODING": "utf-8:strict"},
    )

    check(result)
    assert result.code == 0, result
    assert "error: that line is not valid UTF-8; type it again" in result.stderr, result
    assert result.stdout.strip() == "fine", result  # the next line got its answer
