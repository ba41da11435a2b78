"""Bad input to the `harness` command: one "error:" line on stderr, the right exit code."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest
from _cli_runner import (
    NO_MEMORIES,
    TRACE_EVENTS,
    Cli,
    Result,
    agent_requests,
    make_cli,
    read_session,
    turns_of,
    write_script,
)

from harness.memory import MemoryIndex


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


def assert_one_error_line(result: Result, code: int, *needles: str) -> str:
    """Exit ``code``, nothing on stdout, one stderr line "error: ..." naming ``needles``."""
    assert result.returncode == code, result
    assert result.stdout == "", result
    assert len(result.stderr.splitlines()) == 1, result
    line = result.stderr.splitlines()[0]
    assert line.startswith("error: "), result
    for needle in needles:
        assert needle in line, result
    return line


@dataclass(frozen=True)
class Case:
    """A configuration error: the command line, the environment, what the message must name."""

    args: Callable[[Path], list[str | Path]]
    needles: Callable[[Path], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    stdin: str = ""


def _script(tmp: Path) -> str:
    return f"scripted:{write_script(tmp / 'ok.json', [{'text': 'unused'}])}"


def _bad_json(tmp: Path) -> Path:
    path = tmp / "bad.json"
    path.write_text('{"turns": [', encoding="utf-8")
    return path


def _bad_turn(tmp: Path) -> Path:
    return write_script(tmp / "bad-turn.json", [{"text": "x", "bogus": True}])


def _a_file(tmp: Path) -> Path:
    path = tmp / "not-a-dir"
    path.write_text("I am a file\n", encoding="utf-8")
    return path


NOT_UTF8: Final = "\udcff\udcfe"
"""Bytes 0xff 0xfe as the interpreter decodes them from argv; passed on, they are bytes again."""


def _fifo(tmp: Path) -> Path:
    path = tmp / "keys.fifo"
    os.mkfifo(path)
    return path


def _not_utf8_file(tmp: Path) -> Path:
    path = tmp / "keys.bin"
    path.write_bytes(b"\xff\xfe alice sha256:00\n")
    return path


def _not_utf8_id(command: tuple[str, ...], option: str) -> Case:
    """An id option given bytes that are not UTF-8 (``run`` gets a model, to get that far)."""

    def args(t: Path) -> list[str | Path]:
        model = ["-m", _script(t)] if command[0] == "run" else []
        return [*command, "-w", t / "ws", *model, option, NOT_UTF8]

    return Case(
        args=args,
        needles=lambda t: [f"Invalid value for '{option}'", "is not valid UTF-8", "locale"],
    )


def _empty_agent(command: tuple[str, ...]) -> Case:
    return Case(
        args=lambda t: [*command, "-w", t / "ws", "--agent", ""],
        needles=lambda t: ["Invalid value for '--agent'", "must not be empty"],
    )


def _empty_session(command: tuple[str, ...]) -> Case:
    return Case(
        args=lambda t: [*command, "", "-w", t / "ws"],
        needles=lambda t: ["Invalid value for 'session'", "must not be empty"],
    )


def _small_window(size: str) -> Case:
    return Case(
        args=lambda t: ["run", "-w", t / "ws", "-m", _script(t), "--context-window", size, "hi"],
        needles=lambda t: ["'--context-window'", f"{size} is too small", "at least 256 tokens"],
    )


CONFIG_ERRORS = {
    "no model": Case(
        args=lambda t: ["run", "-w", t / "ws", "hello"],
        needles=lambda t: ["no model configured", "--model", "HARNESS_MODEL"],
    ),
    "no model in chat": Case(
        args=lambda t: ["chat", "-w", t / "ws"],
        needles=lambda t: ["no model configured", "--model", "HARNESS_MODEL"],
        stdin="hello\n",
    ),
    "unknown model spec": Case(
        args=lambda t: ["run", "-w", t / "ws", "--model", "gpt9:turbo", "hello"],
        needles=lambda t: ["unknown model spec", "'gpt9:turbo'"],
    ),
    "unknown model spec from env": Case(
        args=lambda t: ["run", "-w", t / "ws", "hello"],
        needles=lambda t: ["unknown model spec", "'nonsense'"],
        env={"HARNESS_MODEL": "nonsense"},
    ),
    "openai without key": Case(
        args=lambda t: ["run", "-w", t / "ws", "--model", "openai:x", "hello"],
        needles=lambda t: ["OPENAI_API_KEY"],
        env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    ),
    "anthropic without key": Case(
        args=lambda t: ["run", "-w", t / "ws", "--model", "anthropic:x", "hello"],
        needles=lambda t: ["ANTHROPIC_API_KEY"],
    ),
    "scripted file missing": Case(
        args=lambda t: ["run", "-w", t / "ws", "--model", f"scripted:{t / 'nope.json'}", "hello"],
        needles=lambda t: [str(t / "nope.json")],
    ),
    "script is not JSON": Case(
        args=lambda t: ["run", "-w", t / "ws", "--model", f"scripted:{_bad_json(t)}", "hello"],
        needles=lambda t: ["invalid model script", str(t / "bad.json")],
    ),
    "script turn has an unknown field": Case(
        args=lambda t: ["run", "-w", t / "ws", "--model", f"scripted:{_bad_turn(t)}", "hello"],
        needles=lambda t: ["invalid model script", str(t / "bad-turn.json"), "turns.0.bogus"],
    ),
    "workspace is a regular file": Case(
        args=lambda t: ["run", "-w", _a_file(t), "--model", _script(t), "hello"],
        needles=lambda t: [str(t / "not-a-dir"), "not a directory"],
    ),
    "init into a regular file": Case(
        args=lambda t: ["init", _a_file(t)],
        needles=lambda t: [str(t / "not-a-dir"), "not a directory"],
    ),
    "workspace under a regular file": Case(
        args=lambda t: ["run", "-w", _a_file(t) / "ws", "--model", _script(t), "hello"],
        needles=lambda t: ["cannot create workspace", str(t / "not-a-dir" / "ws")],
    ),
    **{
        f"empty --agent of {' '.join(command)}": _empty_agent(command)
        for command in (
            ("sessions", "show", "s1"),
            ("trace", "s1"),
            ("tasks", "list"),
            ("tasks", "show", "task_1"),
            ("tasks", "cancel", "task_1"),
        )
    },
    **{
        f"empty session of {' '.join(command)}": _empty_session(command)
        for command in (
            ("sessions", "show"),
            ("trace",),
        )
    },
    **{f"context window of {size}": _small_window(size) for size in ("1", "2", "3", "255")},
    "context window from the environment": Case(
        args=lambda t: ["run", "-w", t / "ws", "-m", _script(t), "hello"],
        needles=lambda t: ["HARNESS_CONTEXT_WINDOW='3'", "at least 256"],
        env={"HARNESS_CONTEXT_WINDOW": "3"},
    ),
    "store URL that does not parse": Case(
        args=lambda t: ["run", "-w", t / "ws", "-m", _script(t), "--store", "redis://[::1", "hi"],
        needles=lambda t: ["'redis://[::1'", "Invalid IPv6 URL", "redis://host:port/db"],
    ),
    "store URL with a database that is not a number": Case(
        args=lambda t: ["run", "-w", t / "ws", "-m", _script(t), "--store", "redis://h/abc", "hi"],
        needles=lambda t: ["'redis://h/abc'", "the database 'abc' is not a number"],
    ),
    **{
        f"non-UTF-8 {option} of {' '.join(command)}": _not_utf8_id(command, option)
        for command, option in (
            (("run", "hi"), "--session"),
            (("run", "hi"), "--user"),
            (("trace", "s1"), "--agent"),
            (("sessions", "show", "s1"), "--agent"),
            (("tasks", "list"), "--session"),
            (("tasks", "show", "task_1"), "--user"),
        )
    },
    "non-UTF-8 session of trace": Case(
        args=lambda t: ["trace", "-w", t / "ws", "--", NOT_UTF8],
        needles=lambda t: ["Invalid value for 'session'", "is not valid UTF-8"],
    ),
    "blank session": Case(
        args=lambda t: ["run", "-w", t / "ws", "-m", _script(t), "-s", " ", "hi"],
        needles=lambda t: ["Invalid value for '--session'", "must not be blank"],
    ),
    "workspace whose name is 100,000 characters": Case(
        args=lambda t: ["run", "-w", t / ("x" * 100_000), "-m", _script(t), "hi"],
        needles=lambda t: ["cannot use the workspace", "(100,0", "File name too long"],
    ),
    "workspace whose path is not UTF-8": Case(
        args=lambda t: ["sessions", "show", "s1", "-w", t / NOT_UTF8],
        needles=lambda t: ["the workspace path", "is not valid UTF-8", "--workspace DIR"],
    ),
    "workspace in the home of an unknown user": Case(
        args=lambda t: ["memory", "index", "-w", "~no-such-user-here/ws"],
        needles=lambda t: ["'~no-such-user-here/ws'", "home of an unknown user"],
    ),
    "demo in a regular file": Case(
        args=lambda t: ["demo", "-w", _a_file(t)],
        needles=lambda t: [str(t / "not-a-dir"), "not a directory"],
    ),
    "serve with a missing model script": Case(
        args=lambda t: ["serve", "-w", t / "ws", "-m", f"scripted:{t / 'nope.json'}"],
        needles=lambda t: ["cannot read model script", str(t / "nope.json")],
    ),
    "serve without a model": Case(
        args=lambda t: ["serve", "-w", t / "ws", "--port", "0"],
        needles=lambda t: ["no model configured"],
    ),
    "serve with a key file that is not UTF-8": Case(
        args=lambda t: ["serve", "-w", t / "ws", "-m", _script(t), "--keys", _not_utf8_file(t)],
        needles=lambda t: [str(t / "keys.bin"), "is not UTF-8 text", "harness keys add"],
    ),
    "serve with a FIFO as key file": Case(
        args=lambda t: ["serve", "-w", t / "ws", "-m", _script(t), "--keys", _fifo(t)],
        needles=lambda t: [str(t / "keys.fifo"), "is not a regular file"],
    ),
    "keys add with a long bad user": Case(
        args=lambda t: ["keys", "add", "u" * 300, "--file", t / "keys.txt"],
        needles=lambda t: ["is not a user id", "at most 128"],
    ),
    "trace of a user whose id has a line break": Case(
        args=lambda t: ["trace", "s1", "-w", t / "ws", "-u", "a\nb"],
        needles=lambda t: ["of user 'a\\nb'", "no trace of session 's1'"],
    ),
    "store URL with a bad port": Case(
        args=lambda t: ["sessions", "show", "s1", "-w", t / "ws", "--store", "redis://h:x/0"],
        needles=lambda t: ["'redis://h:x/0'", "Port could not be cast"],
    ),
}


@dataclass(frozen=True)
class Outcome:
    tmp: Path
    result: Result


@pytest.fixture(scope="module")
def config_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every case of CONFIG_ERRORS, each in its own directory, run once for the module."""
    prepared: dict[str, tuple[Cli, Path, list[str | Path]]] = {}
    for name, case in CONFIG_ERRORS.items():
        tmp = tmp_path_factory.mktemp("config-error")
        prepared[name] = (make_cli(tmp), tmp, case.args(tmp))

    def run(name: str) -> Outcome:
        cli, tmp, args = prepared[name]
        case = CONFIG_ERRORS[name]
        try:
            return Outcome(tmp, cli.run(*args, env=case.env, stdin=case.stdin, timeout=30))
        except subprocess.TimeoutExpired:  # a server that started, a file read that blocks
            return Outcome(tmp, Result(tuple(map(str, args)), -1, "", "timed out after 30 s\n"))

    return {name: run(name) for name in prepared}


@pytest.mark.parametrize("name", CONFIG_ERRORS)
def test_configuration_error_exits_2_with_one_line(
    config_errors: dict[str, Outcome], name: str
) -> None:
    outcome = config_errors[name]

    assert_one_error_line(outcome.result, 2, *CONFIG_ERRORS[name].needles(outcome.tmp))
    # Nothing was half-done: no conversation, memory or index was saved anywhere.
    assert not list(outcome.tmp.rglob("messages.jsonl"))
    assert not list(outcome.tmp.rglob("*.log.jsonl"))
    assert not list(outcome.tmp.rglob("memory_index.db"))


def test_unwritable_workspace_exits_2(cli: Cli, tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", [{"text": "unused"}])
    if os.geteuid() == 0:
        # Permission bits do not stop root: use a workspace that cannot be created at all.
        blocker = tmp_path / "blocker"
        blocker.write_text("", encoding="utf-8")
        workspace = blocker / "ws"
        needles = ["cannot create workspace", str(workspace)]
    else:
        workspace = tmp_path / "read-only"
        workspace.mkdir(mode=0o500)
        needles = [str(workspace), "not readable and writable"]
    try:
        result = cli.run("run", "-w", workspace, "-m", f"scripted:{script}", "hello")
    finally:
        if workspace.is_dir():
            workspace.chmod(0o700)  # let pytest clean it up

    assert_one_error_line(result, 2, *needles)


def test_model_failure_exits_1_and_keeps_the_accepted_turn(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [NO_MEMORIES, {"match": "^never$", "text": "unreachable"}],
        log="requests.jsonl",
    )
    workspace = tmp_path / "ws"

    result = cli.run("run", "-s", "f1", "-w", workspace, "-m", f"scripted:{script}", "hello there")

    line = assert_one_error_line(result, 1, "'hello there'")
    assert line.startswith("error: ScriptExhaustedError: ")
    assert not any(event in result.stderr for event in (*TRACE_EVENTS, "Error session="))
    assert turns_of(read_session(workspace, "f1")) == [("user", "hello there")]
    assert len(agent_requests(tmp_path / "requests.jsonl")) == 1


def test_usage_error_exits_2_without_running(cli: Cli, tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", [{"text": "unused"}], log="requests.jsonl")

    result = cli.run(
        "run", "-w", tmp_path / "ws", "-m", f"scripted:{script}", "--no-such-option", "q"
    )

    assert result.returncode == 2, result
    assert result.stdout == ""
    assert "--no-such-option" in result.stderr
    assert not (tmp_path / "requests.jsonl").exists()
    assert not (tmp_path / "ws").exists()
    assert not (tmp_path / "memory_index.db").exists()


@pytest.mark.parametrize("option", ["--session", "--user"])
def test_empty_id_is_a_usage_error(cli: Cli, tmp_path: Path, option: str) -> None:
    script = write_script(tmp_path / "script.json", [{"text": "unused"}], log="requests.jsonl")

    result = cli.run("run", "-w", tmp_path / "ws", "-m", f"scripted:{script}", option, "", "q")

    assert result.returncode == 2, result
    assert result.stdout == ""
    assert f"Invalid value for '{option}'" in result.stderr
    assert "must not be empty" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "requests.jsonl").exists()
    assert not (tmp_path / "ws").exists()


def test_a_failure_logged_in_the_background_is_one_line_not_a_traceback(
    cli: Cli, tmp_path: Path
) -> None:
    # The memory work after the call cannot open an index that is not a database; the library
    # logs that with its traceback, which the command line writes as one line.
    (tmp_path / "memory_index.db").write_bytes(b"\xff" * 4096)
    script = write_script(tmp_path / "script.json", [NO_MEMORIES, {"text": "fine", "repeat": True}])

    result = cli.run("run", "-w", tmp_path / "ws", "-m", f"scripted:{script}", "hello")

    assert (result.returncode, result.stdout) == (0, "fine\n"), result
    assert "Traceback" not in result.stderr, result
    assert len(result.stderr.split("\n")) == len(result.stderr_lines) + 1, result
    assert any(
        line.startswith("ERROR ") and "StorageError: the memory index" in line
        for line in result.stderr_lines
    ), result


MEMORY_FACT: Final = "- Anna lives in Berlin."


def _drop_a_table(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("DROP TABLE memory_lines")
        conn.commit()


def _unusable_index(tmp: Path, state: str) -> None:
    db = tmp / "memory_index.db"
    if state == "not a database":
        db.write_bytes(b"\xff" * 4096)
    elif state == "another program's tables":
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute("CREATE TABLE memory_files (name TEXT)")
            conn.commit()
    else:  # this workspace's own index, damaged
        MemoryIndex(tmp, workspace=tmp / "ws").open().close()
        _drop_a_table(db)


@pytest.mark.parametrize(
    "state", ["not a database", "another program's tables", "this workspace's, damaged"]
)
def test_rebuild_replaces_an_index_file_that_cannot_be_used(
    cli: Cli, tmp_path: Path, state: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text(f"# Memory\n\n{MEMORY_FACT}\n", encoding="utf-8")
    _unusable_index(tmp_path, state)

    refused = cli.run("memory", "index", "-w", workspace)
    rebuilt = cli.run("memory", "index", "-w", workspace, "--rebuild")
    found = cli.run("memory", "search", "Berlin", "-w", workspace, "--json")

    assert_one_error_line(refused, 1, "unusable", str(tmp_path / "memory_index.db"))
    assert rebuilt.returncode == 0, rebuilt
    assert rebuilt.stdout.startswith("Indexed 1 files (0 unchanged, 0 removed)"), rebuilt
    index = tmp_path / "memory_index.db"
    assert rebuilt.stderr_lines == [
        f"WARNING harness.cli.memory: replacing the unusable memory index {index}"
    ], rebuilt
    assert found.returncode == 0, found
    assert [(hit["path"], hit["content"]) for hit in json.loads(found.stdout)] == [
        ("MEMORY.md", MEMORY_FACT)
    ]


@pytest.mark.parametrize("damaged", [False, True], ids=["usable", "damaged"])
def test_rebuild_never_takes_the_index_of_another_workspace(
    cli: Cli, tmp_path: Path, damaged: bool
) -> None:
    # docs/security.md, "One index, one workspace": the index is that workspace's, damaged or
    # not, and --rebuild in a neighbour must not take it away: the neighbour rebuilds its own.
    other = tmp_path / "other"
    db = tmp_path / "memory_index.db"
    MemoryIndex(tmp_path, workspace=other).open().close()
    if damaged:
        _drop_a_table(db)

    result = cli.run("memory", "index", "-w", tmp_path / "ws", "--rebuild")

    assert result.returncode == 0, result
    assert (tmp_path / ".ws.memory_index.db").is_file()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        query = "SELECT value FROM memory_meta WHERE key = 'workspace'"
        assert conn.execute(query).fetchall() == [(str(other),)]
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert ("memory_lines" in tables) is not damaged
