"""``--engine`` on the command line: ``harness run`` on a real Temporal dev server, ``harness
worker``, and a clear line for every engine that cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli_runner import NO_MEMORIES, Cli, make_cli, read_session, write_script


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


def script(tmp_path: Path) -> Path:
    return write_script(
        tmp_path / "script.json",
        [
            NO_MEMORIES,
            {"match": "^count$", "tool_calls": [{"name": "list_files", "input": {"path": "."}}]},
            {"match": r"\[DIR\]", "text": "Counted the files."},
        ],
    )


def test_run_on_the_engine_runs_the_turn_and_keeps_the_session(
    cli: Cli, tmp_path: Path, temporal_address: str
) -> None:
    workspace = tmp_path / "ws"
    engine = f"temporal://{temporal_address}?task_queue=cli-{tmp_path.name}"
    result = cli.run(
        "run", "--engine", engine, "-w", workspace, "--model", f"scripted:{script(tmp_path)}",
        "--session", "s1", "count",
    )  # fmt: skip
    assert result.returncode == 0, result
    assert result.stdout == "Counted the files.\n"
    roles = [message["role"] for message in read_session(workspace, "s1")]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_a_turn_that_waits_on_the_engine_goes_on_with_approvals_approve(
    cli: Cli, tmp_path: Path, temporal_address: str
) -> None:
    workspace = tmp_path / "ws"
    engine = f"temporal://{temporal_address}?task_queue=cli-{tmp_path.name}"
    common: list[str | Path] = [
        "--engine", engine, "-w", workspace, "--model", f"scripted:{script(tmp_path)}",
        "--approval", "list_files",
    ]  # fmt: skip

    paused = cli.run("run", *common, "count")
    assert paused.returncode == 3, paused
    ident = paused.stdout.split()[1].rstrip(":")
    approved = cli.run("approvals", "approve", ident, *common)

    assert approved.returncode == 0, approved
    assert approved.stdout == "Counted the files.\n"
    roles = [message["role"] for message in read_session(workspace, "default")]
    assert roles == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize(
    ("engine", "said"),
    [
        ("http://127.0.0.1:7233", "is not a Temporal address"),
        ("temporal://127.0.0.1:7233?color=red", "unknown options ['color']"),
        ("temporal://127.0.0.1:1", "cannot reach the Temporal server at 127.0.0.1:1"),
    ],
)
def test_an_engine_that_cannot_be_used_is_one_line(
    cli: Cli, tmp_path: Path, engine: str, said: str
) -> None:
    result = cli.run(
        "run", "--engine", engine, "-w", tmp_path / "ws", "--model",
        f"scripted:{script(tmp_path)}", "count",
    )  # fmt: skip
    assert result.returncode != 0
    assert len(result.stderr_lines) == 1, result.stderr
    assert said in result.stderr


def test_a_worker_needs_an_engine_and_chat_does_not_take_one(cli: Cli, tmp_path: Path) -> None:
    worker = cli.run("worker", "-w", tmp_path / "ws")
    assert worker.returncode == 2
    assert "needs --engine" in worker.stderr
    chat = cli.run("chat", "--engine", "temporal://127.0.0.1:7233", "-w", tmp_path / "ws")
    assert chat.returncode == 2
    assert chat.stderr_lines == [
        "error: chat does not take --engine yet; use harness run or serve with --engine"
    ]
