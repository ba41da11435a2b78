from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given as hypothesis_given
from hypothesis import strategies as st

from harness.errors import PathOutsideWorkspace
from harness.workspace import normalize, resolve_inside


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("AGENTS.md", "AGENTS.md"),
        ("/AGENTS.md", "AGENTS.md"),
        ("  /memory//2026-01-01.md", "memory/2026-01-01.md"),
        ("memory\\notes.md", "memory/notes.md"),
        ("./a/./b.md", "a/b.md"),
        ("some..dir/note.txt", "some..dir/note.txt"),
        ("/", ""),
        ("", ""),
        (".", ""),
    ],
)
def test_normalize_keeps_paths_inside(given: str, expected: str) -> None:
    assert normalize(given) == expected


@hypothesis_given(st.text(alphabet="ab./\\ ~\x00é", max_size=24))
def test_normalize_gives_what_a_pure_posix_path_of_the_parts_gives(path: str) -> None:
    """The string join must keep the meaning PurePosixPath gave normalized paths."""
    try:
        found = normalize(path)
    except PathOutsideWorkspace:
        return
    parts = [p for p in path.replace("\\", "/").strip().split("/") if p not in ("", ".")]
    assert found == (str(PurePosixPath(*parts)) if parts else "")


@pytest.mark.parametrize(
    "escaping",
    ["../secret.txt", "/../etc/passwd", "a/../../b", "..\\windows-escape.txt", "~/x", "~root/x"],
)
def test_normalize_rejects_escapes(escaping: str) -> None:
    with pytest.raises(PathOutsideWorkspace) as info:
        normalize(escaping)
    assert repr(escaping) in str(info.value)


def test_resolve_inside_maps_under_root(workspace: Path) -> None:
    assert resolve_inside(workspace, "/etc/passwd") == workspace.resolve() / "etc" / "passwd"
    assert resolve_inside(workspace, "/") == workspace.resolve()


def test_resolve_inside_refuses_symlink_out(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, workspace / "link")
    with pytest.raises(PathOutsideWorkspace, match="symbolic link"):
        resolve_inside(workspace, "link/file.txt")


def test_resolve_inside_allows_symlink_within(workspace: Path) -> None:
    (workspace / "real").mkdir()
    os.symlink(workspace / "real", workspace / "alias")
    assert resolve_inside(workspace, "alias/x.md") == workspace.resolve() / "real" / "x.md"
