"""CompositeFilesystem: prefix routing, merged listings and searches, namespaces, commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.context import RuntimeContext
from harness.filesystem import (
    CompositeFilesystem,
    LocalFilesystem,
    LocalShell,
    ShellCompositeFilesystem,
    ShellFilesystem,
)

ALICE = RuntimeContext(session_id="s", user_id="alice")


@pytest.fixture
def parts(tmp_path: Path) -> tuple[CompositeFilesystem, Path, Path, Path]:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    fs = CompositeFilesystem(
        LocalFilesystem(a),
        {"memory/": LocalFilesystem(b), "/memory/archive": LocalFilesystem(c)},
    )
    return fs, a, b, c


async def test_paths_go_to_the_longest_route(
    parts: tuple[CompositeFilesystem, Path, Path, Path],
) -> None:
    fs, a, b, c = parts
    for path in ("notes.md", "memory/day.md", "memory/archive/old.md", "memoryless.md"):
        result = await fs.write(path, path, ctx=ALICE)
        assert (result.path, result.error) == (path, None)
    assert (a / "users/alice/notes.md").read_text() == "notes.md"
    assert (a / "users/alice/memoryless.md").exists()
    assert (b / "users/alice/day.md").read_text() == "memory/day.md"
    assert (c / "users/alice/old.md").read_text() == "memory/archive/old.md"
    assert not (a / "users/alice/memory").exists()
    read = await fs.read("/memory/archive/old.md", ctx=ALICE)
    assert read.data is not None
    assert "memory/archive/old.md" in read.data.content


async def test_root_listing_merges_routes(
    parts: tuple[CompositeFilesystem, Path, Path, Path],
) -> None:
    fs, _, _, _ = parts
    await fs.write("notes.md", "x", ctx=ALICE)
    await fs.write("memory/day.md", "x", ctx=ALICE)
    for root in ("/", ".", ""):
        listing = await fs.ls(root, ctx=ALICE)
        assert [(e.path, e.is_dir) for e in listing.entries] == [
            ("memory", True),
            ("notes.md", False),
        ]
    inside = await fs.ls("memory", ctx=ALICE)
    assert [(e.path, e.is_dir) for e in inside.entries] == [
        ("memory/archive", True),
        ("memory/day.md", False),
    ]


async def test_a_route_shadows_the_default(
    parts: tuple[CompositeFilesystem, Path, Path, Path],
) -> None:
    fs, a, _, _ = parts
    (a / "users/alice/memory").mkdir(parents=True)
    (a / "users/alice/memory/hidden.md").write_text("needle")
    assert not await fs.exists("memory/hidden.md", ctx=ALICE)
    assert (await fs.glob("**/*.md", ctx=ALICE)).entries == []
    assert (await fs.grep("needle", ctx=ALICE)).matches == []


async def test_glob_and_grep_over_the_root_include_routes(
    parts: tuple[CompositeFilesystem, Path, Path, Path],
) -> None:
    fs, _, _, _ = parts
    await fs.write("top.md", "needle top", ctx=ALICE)
    await fs.write("memory/day.md", "needle day", ctx=ALICE)
    await fs.write("memory/archive/old.md", "needle old", ctx=ALICE)
    await fs.write("memory/archive/old.txt", "needle txt", ctx=ALICE)
    found = await fs.glob("**/*.md", ctx=ALICE)
    assert [e.path for e in found.entries] == [
        "memory/archive/old.md",
        "memory/day.md",
        "top.md",
    ]
    assert [e.path for e in (await fs.glob("*.md", ctx=ALICE)).entries] == ["top.md"]
    assert [e.path for e in (await fs.glob("memory/*.md", ctx=ALICE)).entries] == ["memory/day.md"]
    assert [e.path for e in (await fs.glob("*.md", "memory", ctx=ALICE)).entries] == [
        "memory/day.md"
    ]
    matches = await fs.grep("needle", ctx=ALICE)
    assert [(m.path, m.line, m.text) for m in matches.matches] == [
        ("memory/archive/old.md", 1, "needle old"),
        ("memory/archive/old.txt", 1, "needle txt"),
        ("memory/day.md", 1, "needle day"),
        ("top.md", 1, "needle top"),
    ]
    by_name = await fs.grep("needle", "/", glob="*.txt", ctx=ALICE)
    assert [m.path for m in by_name.matches] == ["memory/archive/old.txt"]
    by_path = await fs.grep("needle", "/", glob="memory/*.md", ctx=ALICE)
    assert [m.path for m in by_path.matches] == ["memory/day.md"]
    in_route = await fs.grep("needle", "memory/archive", ctx=ALICE)
    assert [m.path for m in in_route.matches] == [
        "memory/archive/old.md",
        "memory/archive/old.txt",
    ]


async def test_storage_operations_are_routed(
    parts: tuple[CompositeFilesystem, Path, Path, Path],
) -> None:
    fs, _, b, _ = parts
    version = await fs.put("memory/log.md", b"one\n", ctx=ALICE)
    assert version is not None
    await fs.append("memory/log.md", b"two\n", ctx=ALICE)
    assert (b / "users/alice/log.md").read_bytes() == b"one\ntwo\n"
    got = await fs.get("memory/log.md", ctx=ALICE)
    assert got is not None
    assert got[0] == b"one\ntwo\n"
    assert await fs.put("memory/log.md", b"x", ctx=ALICE, if_version=version) is None
    assert await fs.put("memory/log.md", b"x", ctx=ALICE, if_version=got[1]) is not None
    edited = await fs.edit("memory/log.md", "x", "y", ctx=ALICE)
    assert (edited.path, edited.occurrences) == ("memory/log.md", 1)
    deleted = await fs.delete("memory/log.md", ctx=ALICE)
    assert deleted.error is None
    assert not (b / "users/alice/log.md").exists()


async def test_upload_download_keep_order_across_backends(
    parts: tuple[CompositeFilesystem, Path, Path, Path],
) -> None:
    fs, a, b, _ = parts
    uploaded = await fs.upload(
        [("memory/1.bin", b"1"), ("2.bin", b"2"), ("memory/3.bin", b"3")], ctx=ALICE
    )
    assert [(r.path, r.error) for r in uploaded] == [
        ("memory/1.bin", None),
        ("2.bin", None),
        ("memory/3.bin", None),
    ]
    assert (a / "users/alice/2.bin").read_bytes() == b"2"
    assert (b / "users/alice/3.bin").read_bytes() == b"3"
    downloaded = await fs.download(["2.bin", "memory/3.bin", "memory/1.bin"], ctx=ALICE)
    assert [(r.path, r.content) for r in downloaded] == [
        ("2.bin", b"2"),
        ("memory/3.bin", b"3"),
        ("memory/1.bin", b"1"),
    ]


async def test_move_across_backends(parts: tuple[CompositeFilesystem, Path, Path, Path]) -> None:
    fs, a, b, _ = parts
    await fs.write("draft.md", "text", ctx=ALICE)
    moved = await fs.move("draft.md", "memory/final.md", ctx=ALICE)
    assert (moved.path, moved.error) == ("memory/final.md", None)
    assert not (a / "users/alice/draft.md").exists()
    assert (b / "users/alice/final.md").read_text() == "text"
    within = await fs.move("memory/final.md", "memory/kept.md", ctx=ALICE)
    assert within.path == "memory/kept.md"
    assert (b / "users/alice/kept.md").exists()


async def test_the_whole_workspace_view_routes_inside_each_namespace(
    parts: tuple[CompositeFilesystem, Path, Path, Path],
) -> None:
    fs, _, b, _ = parts
    await fs.write("memory/day.md", "alice's", ctx=ALICE)
    got = await fs.get("users/alice/memory/day.md")  # the harness's own view (ctx=None)
    assert got is not None
    assert got[0] == b"alice's"
    await fs.put("users/bob/memory/day.md", b"bob's")
    assert (b / "users/bob/day.md").read_bytes() == b"bob's"
    assert (await fs.glob("**/day.md")).entries == []  # the shared root holds no user's files
    for user in ("alice", "bob"):
        found = await fs.glob("**/day.md", f"users/{user}")
        assert [e.path for e in found.entries] == [f"users/{user}/memory/day.md"]
    listing = await fs.ls("users/alice")
    assert [e.path for e in listing.entries] == ["users/alice/memory"]
    inside = await fs.ls("memory")
    # the shared memory/ holds only the nested route; the users' memories are not listed there
    assert [e.path for e in inside.entries] == ["memory/archive"]


async def test_bad_paths_are_refused_as_the_default_refuses_them(
    parts: tuple[CompositeFilesystem, Path, Path, Path],
) -> None:
    fs, _, _, _ = parts
    for path in ("../x", "memory/../../x", "~/x"):
        result = await fs.write(path, "x", ctx=ALICE)
        assert result.error is not None, path


async def test_execute_goes_to_a_shell_default(tmp_path: Path) -> None:
    plain = CompositeFilesystem(
        LocalFilesystem(tmp_path / "a"), {"memory": LocalFilesystem(tmp_path / "b")}
    )
    assert not isinstance(plain, ShellFilesystem)
    shell = CompositeFilesystem(
        LocalShell(tmp_path / "s"), {"memory": LocalFilesystem(tmp_path / "b")}
    )
    assert isinstance(shell, ShellCompositeFilesystem)
    assert isinstance(shell, ShellFilesystem)
    result = await shell.execute("echo hi > f.txt && echo ok", ctx=ALICE)
    assert result.output == "ok"
    assert (tmp_path / "s" / "users" / "alice" / "f.txt").exists()


def test_bad_routes_are_refused(tmp_path: Path) -> None:
    default = LocalFilesystem(tmp_path)
    with pytest.raises(ValueError, match="root"):
        CompositeFilesystem(default, {"/": LocalFilesystem(tmp_path / "b")})
    with pytest.raises(ValueError, match="twice"):
        CompositeFilesystem(
            default, {"memory": LocalFilesystem(tmp_path), "/memory/": LocalFilesystem(tmp_path)}
        )
    with pytest.raises(ValueError, match="inside the workspace"):
        CompositeFilesystem(default, {"../x": LocalFilesystem(tmp_path)})
    with pytest.raises(TypeError):
        CompositeFilesystem(default, {"x": object()})  # type: ignore[dict-item]
