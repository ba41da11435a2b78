"""A second workspace in the parent directory of another is refused when a command starts.

The memory index sits beside a workspace (``<parent>/memory_index.db``) and belongs to the
first workspace that used it. A second workspace in the same parent used to be accepted, and
then every flush, index and search of it failed in the log; now every command refuses it at
once, with one line that names both workspaces and what to do, before it makes anything.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app


@pytest.fixture
def model(tmp_path: Path) -> str:
    turns = [
        {"match": "Extract NEW memories", "text": "- The user likes tea. [m1]", "repeat": True},
        {"text": "Noted.", "repeat": True},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": turns}))
    return f"scripted:{script}"


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


def test_a_second_workspace_beside_the_first_is_refused_at_once(tmp_path: Path, model: str) -> None:
    parent = tmp_path / "projects"
    first, second = parent / "first", parent / "second"
    code, _, stderr = invoke("run", "I like tea", "-w", first, "--model", model)
    assert code == 0, stderr
    assert (parent / "memory_index.db").is_file()

    commands: list[list[str | Path]] = [
        ["run", "I like tea", "--model", model, "-w", second],
        ["chat", "--model", model, "-w", second],
        ["serve", "--port", "1", "--model", model, "-w", second],
        ["memory", "search", "tea", "-w", second],
        ["init", second],
    ]
    for command in commands:
        code, stdout, stderr = invoke(*command)

        assert code == 2, (command, stdout, stderr)
        lines = stderr.splitlines()
        assert len(lines) == 1, (command, stdout, stderr)
        line = lines[0]
        assert line.startswith(f"error: the workspace {second} shares its parent directory"), line
        assert f"with the workspace {first}" in line
        assert f"--workspace {second / 'workspace'}" in line
        assert not second.exists()  # refused before anything was made

    # The first one goes on, and the way out the line names works.
    code, stdout, _ = invoke("memory", "search", "tea", "-w", first, "--json")
    assert code == 0
    assert "likes tea" in stdout
    moved = second / "workspace"
    code, _, stderr = invoke("run", "I like tea", "-w", moved, "--model", model)
    assert code == 0, stderr
    assert "WARNING" not in stderr


def test_a_symlink_to_the_first_workspace_is_named_as_the_same_one(
    tmp_path: Path, model: str
) -> None:
    parent = tmp_path / "projects"
    first = parent / "first"
    assert invoke("run", "I like tea", "-w", first, "--model", model)[0] == 0
    alias = parent / "alias"
    alias.symlink_to(first)

    code, _, stderr = invoke("run", "I like tea", "-w", alias, "--model", model)

    assert code == 2
    assert f"is the workspace {first} under another path" in stderr
    assert f"pass --workspace {first}" in stderr


def test_a_workspace_whose_index_is_unreadable_is_left_to_memory_index(
    tmp_path: Path, model: str
) -> None:
    root = tmp_path / "projects" / "ws"
    root.parent.mkdir()
    (root.parent / "memory_index.db").write_text("not a database")

    code, _, stderr = invoke("memory", "index", "--rebuild", "-w", root)

    assert code == 0, stderr
    assert invoke("run", "I like tea", "-w", root, "--model", model)[0] == 0
