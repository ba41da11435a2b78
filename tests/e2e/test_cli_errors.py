"""Bad input to the `harness` command: one "error:" line on stderr, the right exit code."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

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
    """Every case of CONFIG_ERRORS, each in its own directory, run side by side for speed."""
    prepared: dict[str, tuple[Cli, Path, list[str | Path]]] = {}
    for name, case in CONFIG_ERRORS.items():
        tmp = tmp_path_factory.mktemp("config-error")
        prepared[name] = (make_cli(tmp), tmp, case.args(tmp))

    def run(name: str) -> Outcome:
        cli, tmp, args = prepared[name]
        case = CONFIG_ERRORS[name]
        return Outcome(tmp, cli.run(*args, env=case.env, stdin=case.stdin))

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(prepared, pool.map(run, prepared), strict=True))


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
