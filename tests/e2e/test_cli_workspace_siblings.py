"""A second workspace in the parent directory of another is refused when a command starts.

The memory index sits beside a workspace (``<parent>/memory_index.db``) and belongs to the
first workspace that used it. A second workspace in the same parent used to be accepted, and
then every flush, index and search of it failed in the log; now every command refuses it at
once, with one line that names both workspaces and what to do, before it makes anything.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from _cli_runner import CONSOLIDATION_PROMPT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli._common import checked_workspace
from harness.cli.main import app
from harness.errors import ConfigError
from harness.memory.index import MemoryIndex


@pytest.fixture
def model(tmp_path: Path) -> str:
    turns = [
        {"match": "Extract NEW memories", "text": "- The user likes tea. [m1]", "repeat": True},
        # Consolidation may run before a run exits: it merges what the flush wrote.
        {
            "match": CONSOLIDATION_PROMPT,
            "text": "# Memory\n\n- The user likes tea.",
            "repeat": True,
        },
        {"text": "Noted.", "repeat": True},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": turns}))
    return f"scripted:{script}"


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


def test_a_second_workspace_beside_the_first_is_refused_at_once(
    tmp_path: Path, model: str, redis_url: str
) -> None:
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
        # With a store the directory only anchors the workspace, but it still keeps the
        # worker's own memory index: two workers need two parent directories.
        ["run", "I like tea", "--model", model, "-w", second, "--store", redis_url],
        ["sessions", "list", "-w", second, "--store", redis_url],
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


# Names a workspace directory may have: printable, any script, never "." or "..".
_NAMES = st.text(
    st.characters(codec="utf-8", categories=("L", "N", "Zs"), include_characters="-_.~"),
    min_size=1,
    max_size=24,
).filter(lambda name: name.strip(".") != "" and name == name.strip())


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(_NAMES, min_size=2, max_size=2, unique=True), data=st.data())
def test_any_spelling_of_a_neighbour_is_refused_and_the_first_is_kept(
    names: list[str], data: st.DataObject
) -> None:
    """The class of paths that reach the index of another workspace, drawn.

    However the second workspace is spelled (absolute, relative, through ``..`` or a link in
    the parent), it is refused naming the first; the first's own spelling is accepted; any
    other spelling of the first is refused pointing at the one the index knows, which then
    works. Nothing is made for a refused workspace.
    """
    with tempfile.TemporaryDirectory() as top:
        parent = Path(top) / "projects"
        first, second = parent / names[0], parent / names[1]
        first.mkdir(parents=True)
        (parent / "elsewhere").mkdir()
        (Path(top) / "link").symlink_to(parent)
        MemoryIndex(parent, workspace=first).open().close()

        def spelled(target: Path) -> Path:
            how = data.draw(st.sampled_from(["absolute", "relative", "dotdot", "link"]))
            if how == "relative":
                return Path(os.path.relpath(target, Path.cwd()))
            if how == "dotdot":
                return parent / "elsewhere" / ".." / target.name
            if how == "link":
                return Path(top) / "link" / target.name
            return target

        with pytest.raises(ConfigError) as refused:
            checked_workspace(spelled(second))
        assert f"with the workspace {first}," in str(refused.value)
        assert not second.exists()

        assert checked_workspace(first).root == first
        alias = spelled(first)
        if alias.absolute() != first:
            with pytest.raises(ConfigError, match="under another path") as named:
                checked_workspace(alias)
            assert f"pass --workspace {first}" in str(named.value)
