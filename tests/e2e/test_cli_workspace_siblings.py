"""Workspaces side by side in one directory each run, each with its own memory index.

The memory index sits beside a workspace: ``<parent>/memory_index.db`` for the first workspace
of a directory (where every index used to be), ``<parent>/.<name>.memory_index.db`` for each
other one. A second workspace in the same parent was once refused by every command ("move it
into a directory of its own"), although agents kept side by side in one folder are the
ordinary layout; now each has its own index and neither ever searches the other's.
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
from harness.memory.index import INDEX_FILE, MemoryIndex, index_file


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


def test_workspaces_side_by_side_each_run_with_an_index_of_their_own(
    tmp_path: Path, model: str
) -> None:
    parent = tmp_path / "projects"
    first, second = parent / "first", parent / "second"
    assert invoke("init", first)[0] == 0
    code, stdout, stderr = invoke("init", second)
    assert code == 0, stderr
    for root in (first, second):
        code, _, stderr = invoke("run", f"I like tea in {root.name}", "-w", root, "--model", model)
        assert code == 0, stderr
        assert "index" not in stderr  # no index refused, in the log or otherwise
    assert (parent / INDEX_FILE).is_file()  # the first one's, where it always was
    assert (parent / f".second.{INDEX_FILE}").is_file()

    for root in (first, second):
        code, stdout, stderr = invoke("memory", "search", "tea", "-w", root, "--json")
        assert code == 0, stderr
        assert "likes tea" in stdout
        assert str(parent / ("first" if root == second else "second")) not in stdout


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
def test_however_a_neighbour_is_spelled_it_never_opens_the_first_ones_index(
    names: list[str], data: st.DataObject
) -> None:
    """The class of paths that reach the directory of another workspace's index, drawn.

    However the second workspace is spelled (absolute, relative, through ``..`` or a link in
    the parent), it is accepted and its index is a file of its own that the first's rows never
    reach; the first keeps ``memory_index.db``.
    """
    with tempfile.TemporaryDirectory() as top:
        parent = Path(top) / "projects"
        first, second = parent / names[0], parent / names[1]
        first.mkdir(parents=True)
        (parent / "elsewhere").mkdir()
        (Path(top) / "link").symlink_to(parent)
        with MemoryIndex(parent, workspace=first) as index:
            index.index_from_string("memory/a.md", "- the first one's secret")

        def spelled(target: Path) -> Path:
            how = data.draw(st.sampled_from(["absolute", "relative", "dotdot", "link"]))
            if how == "relative":
                return Path(os.path.relpath(target, Path.cwd()))
            if how == "dotdot":
                return parent / "elsewhere" / ".." / target.name
            if how == "link":
                return Path(top) / "link" / target.name
            return target

        root = checked_workspace(spelled(second)).root
        with MemoryIndex(root.parent, workspace=root) as index:
            assert index.path.name == f".{names[1]}.{INDEX_FILE}"
            assert index.search("secret") == []
        assert index_file(first) == parent / INDEX_FILE


def test_two_workspaces_that_open_at_once_never_share_a_file(tmp_path: Path) -> None:
    """Both saw no index and chose the shared file; the one that claims it second takes its
    own instead of failing at every search."""
    first, second = tmp_path / "first", tmp_path / "second"
    racing = [MemoryIndex(tmp_path, workspace=root) for root in (first, second)]
    assert [index.path for index in racing] == [tmp_path / INDEX_FILE] * 2
    for index in racing:
        index.open()
    assert [index.path for index in racing] == [
        tmp_path / INDEX_FILE,
        tmp_path / f".second.{INDEX_FILE}",
    ]
    for index in racing:
        index.close()
    assert index_file(second) == tmp_path / f".second.{INDEX_FILE}"
