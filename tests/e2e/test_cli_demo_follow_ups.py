"""The commands `harness demo` prints to try next name the tour's workspace, and work as copied.

Copied without ``--workspace``, a command silently creates and reads ``./.harness/workspace``
and finds nothing of the tour: each printed command must carry the tour's workspace, quoted for
the shell, and run as printed, it must reach the tour's sessions, tasks, trace and index.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app

OWN_WORKSPACE = ("harness init", "harness chat --model openai:<model>")
"""The tour's last line: how to start a workspace of one's own, the default one on purpose."""

PLACEHOLDERS = frozenset({"TOOL", "PROMPT", "ID"})
"""Words of a printed command that the reader fills in: such a command is shown, not run."""


def printed_commands(output: str) -> list[str]:
    """Every ``harness ...`` command the tour printed in backticks."""
    return re.findall(r"`(harness [^`]+)`", output)


def tour(root: Path) -> str:
    result = CliRunner().invoke(app, ["demo", "--workspace", str(root)])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_printed_command_carries_the_tours_workspace_and_reaches_its_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "the tour's place" / "workspace"  # a space and a quote: shell-quoted
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # where a command without --workspace would make its own

    commands = printed_commands(tour(root))

    tried = [c for c in commands if c not in OWN_WORKSPACE]
    assert len(tried) >= 8, commands
    assert sorted(set(commands) - set(tried)) == sorted(OWN_WORKSPACE)
    for command in tried:
        assert f"--workspace {shlex.quote(str(root))}" in command, command
        argv = shlex.split(command)
        assert argv[argv.index("--workspace") + 1] == str(root), command
    seen: dict[str, str] = {}
    for command in tried:
        argv = shlex.split(command)[1:]
        if PLACEHOLDERS & set(argv):
            continue
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, f"{command}\n{result.output}"
        seen[" ".join(argv[:2])] = result.stdout
    # Each ran against the tour's workspace: it found what the tour left there.
    assert "Session tour of agent guide for user ada:" in seen["sessions show"]
    assert "No compactions." not in seen["sessions show"]
    assert "completed" in seen["tasks list"]
    assert "totals: ok, 3 steps" in seen["trace skills"]
    assert "unchanged" in seen["memory index"]  # the tour's files, already in its index
    assert "approvals list" in seen
    assert not (elsewhere / ".harness").exists()


def test_in_the_default_workspace_the_commands_need_no_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    commands = printed_commands(tour(tmp_path / ".harness" / "workspace"))

    assert "harness sessions show tour --user ada --agent guide" in commands
    assert not [c for c in commands if "--workspace" in c]


def test_a_second_tour_in_the_same_place_is_refused_and_touches_nothing(tmp_path: Path) -> None:
    root = tmp_path / "tour" / "workspace"
    tour(root)
    agents = root / "AGENTS.md"
    agents.write_text("# My own rules\n", encoding="utf-8")  # now the user's workspace
    before = sorted(path.relative_to(root) for path in root.rglob("*"))

    result = CliRunner().invoke(app, ["demo", "--workspace", str(root)])

    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: the workspace {root} already holds files"), line
    assert "pass a new or empty directory with --workspace" in line
    assert agents.read_text(encoding="utf-8") == "# My own rules\n"
    assert sorted(path.relative_to(root) for path in root.rglob("*")) == before
    # An empty directory is a new one.
    empty = tmp_path / "empty" / "workspace"
    empty.mkdir(parents=True)
    assert CliRunner().invoke(app, ["demo", "--workspace", str(empty)]).exit_code == 0
