from __future__ import annotations

import os
from pathlib import Path

import pytest

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
