"""No tool reaches outside the caller's namespace, whatever path it is given.

Every escaping path goes through every tool (execute included) and must come back as an
``Error: ...`` text, with no host or other-user content in it and not one byte changed anywhere
on disk (the workspace included). Host-absolute paths are the workspace's own (a leading ``/`` is
the namespace root), so they must not show host files and may only write inside the namespace.
Users cannot read, list, search, glob or change each other's files through any tool.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from _required import unavailable
from harness import RuntimeContext
from harness.filesystem.sandbox import SandboxFilesystem
from harness.filesystem.shell import LocalShell
from harness.tools import FilesystemTools

ALICE = RuntimeContext(session_id="s1", user_id="alice")
BOB = RuntimeContext(session_id="s1", user_id="bob")
SHARED = RuntimeContext(session_id="s1")

OUTSIDE_SECRET = "OUTSIDE-SECRET-7f3a"
BOB_SECRET = "BOB-SECRET-91c2"
HOST_MARKERS = ("root:x:0:0", "root:*:0:0")
PLANTED = "PLANTED-BY-TOOL"

ToolCall = Callable[[FilesystemTools, str, RuntimeContext], Awaitable[str]]


async def _read(t: FilesystemTools, p: str, ctx: RuntimeContext) -> str:
    return await t.read_file(p, ctx)


async def _write(t: FilesystemTools, p: str, ctx: RuntimeContext) -> str:
    return await t.write_file(p, PLANTED, ctx)


async def _edit(t: FilesystemTools, p: str, ctx: RuntimeContext) -> str:
    return await t.edit_file(p, "SECRET", PLANTED, ctx, replace_all=True)


async def _grep(t: FilesystemTools, p: str, ctx: RuntimeContext) -> str:
    return await t.grep_files("SECRET", ctx, path=p)


async def _glob(t: FilesystemTools, p: str, ctx: RuntimeContext) -> str:
    return await t.glob_files("**/*", ctx, path=p)


async def _list(t: FilesystemTools, p: str, ctx: RuntimeContext) -> str:
    return await t.list_files(ctx, path=p)


async def _execute(t: FilesystemTools, p: str, ctx: RuntimeContext) -> str:
    return await t.execute(
        f"echo {PLANTED} > planted.txt; cat secret.txt passwd", ctx, working_directory=p
    )


TOOLS: dict[str, ToolCall] = {
    "read_file": _read,
    "write_file": _write,
    "edit_file": _edit,
    "grep_files": _grep,
    "glob_files": _glob,
    "list_files": _list,
    "execute": _execute,
}

# (who, path): every one must be refused by every tool.
ESCAPES: list[tuple[str, str]] = [
    ("alice", ".."),
    ("alice", "../"),
    ("alice", "../x"),
    ("alice", "a/../../x"),
    ("alice", "a/./../../x"),
    ("alice", "a/../b"),
    ("alice", "./../outside/secret.txt"),
    ("alice", "/../../../outside/secret.txt"),
    ("alice", "../../../etc/passwd"),
    ("alice", "../../../../../../../../etc/passwd"),
    ("alice", "  ../x"),
    ("alice", "~"),
    ("alice", "~/secret.txt"),
    ("alice", "~root/.ssh/id_rsa"),
    ("alice", "a\x00b"),
    ("alice", "notes.md\x00.txt"),
    ("alice", "\x00"),
    ("alice", "x" * 300),
    ("alice", "dir/" + "y" * 300 + "/z"),
    ("alice", "é" * 200),
    ("alice", "..\\x"),
    ("alice", "a\\..\\..\\x"),
    ("alice", "\\..\\..\\..\\etc\\passwd"),
    ("alice", "../bob/secret.txt"),
    ("alice", "../bob"),
    ("alice", "../../users/bob/secret.txt"),
    ("alice", "..\\bob\\secret.txt"),
    ("alice", "link_out"),
    ("alice", "link_out/secret.txt"),
    ("alice", "link_file"),
    ("alice", "link_bob"),
    ("alice", "link_bob/secret.txt"),
    ("alice", "link_root/users/bob"),
    ("alice", "sub/link_up/secret.txt"),
    ("shared", "users"),
    ("shared", "users/bob/secret.txt"),
    ("shared", "/users/bob/secret.txt"),
    ("shared", "./users/bob"),
    ("shared", "users\\bob\\secret.txt"),
    ("shared", "users/alice"),
    ("shared", "shared_link_out/secret.txt"),
    ("shared", "../outside/secret.txt"),
]

# Host-absolute paths: the namespace's own files, never the host's.
ABSOLUTE = [
    "/etc/passwd",
    "/etc",
    "/proc/self/environ",
    "/root",
    "//etc//passwd",
    "C:\\Windows\\win.ini",
]

CONTEXTS = {"alice": ALICE, "shared": SHARED}


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` with its bytes (files) or link target (links) or "dir"."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[key] = f"link -> {os.readlink(path)}"
            elif path.is_dir():
                found[key] = "dir"
            else:
                found[key] = path.read_bytes()
    return found


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A workspace with bob's secret, a secret outside it, and links leading out."""
    workspace = tmp_path / "workspace"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{OUTSIDE_SECRET}\n")
    (outside / "passwd").write_text(f"{OUTSIDE_SECRET}\n")
    bob = workspace / "users" / "bob"
    bob.mkdir(parents=True)
    (bob / "secret.txt").write_text(f"{BOB_SECRET}\n")
    alice = workspace / "users" / "alice"
    (alice / "sub").mkdir(parents=True)
    (alice / "notes.md").write_text("alice notes SECRET-free\n")
    (alice / "link_out").symlink_to(outside)
    (alice / "link_file").symlink_to(outside / "secret.txt")
    (alice / "link_bob").symlink_to(Path("..") / "bob")
    (alice / "link_root").symlink_to(workspace)
    (alice / "sub" / "link_up").symlink_to(Path("..") / ".." / "bob")
    (workspace / "shared_link_out").symlink_to(outside)
    (workspace / "AGENTS.md").write_text("shared persona\n")
    return workspace


def _assert_no_leak(out: str) -> None:
    assert OUTSIDE_SECRET not in out
    assert BOB_SECRET not in out
    for marker in HOST_MARKERS:
        assert marker not in out


@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize(("who", "path"), ESCAPES)
async def test_every_tool_refuses_every_escape(world: Path, tool: str, who: str, path: str) -> None:
    tools = FilesystemTools(LocalShell(world))
    before = _snapshot(world.parent)
    out = await TOOLS[tool](tools, path, CONTEXTS[who])
    assert out.startswith("Error: "), out
    _assert_no_leak(out)
    assert _snapshot(world.parent) == before


@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize("path", ABSOLUTE)
async def test_absolute_paths_stay_in_the_namespace(world: Path, tool: str, path: str) -> None:
    tools = FilesystemTools(LocalShell(world))
    before = _snapshot(world.parent)
    out = await TOOLS[tool](tools, path, ALICE)
    _assert_no_leak(out)
    if tool == "execute":
        assert out.startswith("Error: "), out  # a working directory must be relative
    after = _snapshot(world.parent)
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    # Only a write may change anything, and only inside alice's namespace.
    assert all(key.startswith("workspace/users/alice/") for key in changed), changed
    if tool != "write_file":
        assert not changed, changed


@pytest.mark.parametrize(
    "pattern",
    ["../*", "../../outside/*", "../**", "/../*", "~/*", "..\\*", "**/../../*", "a/../../*"],
)
async def test_glob_patterns_cannot_climb_out(world: Path, pattern: str) -> None:
    tools = FilesystemTools(LocalShell(world))
    for ctx in (ALICE, SHARED):
        out = await tools.glob_files(pattern, ctx)
        assert out.startswith("Error: "), out
        out = await tools.grep_files("SECRET", ctx, glob=pattern)
        assert out.startswith("Error: "), out
    absolute = await tools.glob_files("/etc/*", ALICE)
    assert absolute == "No matching files found"


async def test_links_leading_out_are_not_listed_searched_or_globbed(world: Path) -> None:
    tools = FilesystemTools(LocalShell(world))
    listing = await tools.list_files(ALICE)
    assert "link_out" not in listing
    assert "link_file" not in listing
    for out in (
        listing,
        await tools.grep_files("SECRET", ALICE),
        await tools.glob_files("**/*", ALICE),
        await tools.grep_files("SECRET", SHARED),
        await tools.glob_files("**/*", SHARED),
        await tools.list_files(SHARED),
    ):
        _assert_no_leak(out)
    assert "users" not in await tools.list_files(SHARED)


async def test_users_cannot_reach_each_other_by_any_tool(world: Path) -> None:
    tools = FilesystemTools(LocalShell(world))
    bob_file = world / "users" / "bob" / "secret.txt"
    # Bob sees his own file; alice sees nothing of it.
    assert await tools.read_file("secret.txt", BOB) == f"1\t{BOB_SECRET}"
    for out in (
        await tools.read_file("secret.txt", ALICE),
        await tools.read_file("users/bob/secret.txt", ALICE),
        await tools.list_files(ALICE),
        await tools.list_files(ALICE, path="users"),
        await tools.grep_files(BOB_SECRET, ALICE),
        await tools.grep_files(BOB_SECRET, ALICE, path="/"),
        await tools.glob_files("**/secret.txt", ALICE),
        await tools.glob_files("**/*", ALICE, path="/"),
        await tools.edit_file("secret.txt", BOB_SECRET, PLANTED, ALICE),
        await tools.execute("cat secret.txt; ls", ALICE),
    ):
        _assert_no_leak(out)
    assert (await tools.read_file("secret.txt", ALICE)).startswith("Error: ")
    assert (await tools.edit_file("secret.txt", BOB_SECRET, PLANTED, ALICE)).startswith("Error: ")
    assert await tools.grep_files(BOB_SECRET, ALICE) == "No matches found"
    assert await tools.glob_files("**/secret.txt", ALICE) == "No matching files found"
    assert "users" not in await tools.list_files(ALICE)
    assert (await tools.execute("cat secret.txt", ALICE)).startswith("Exit code: 1\n")
    # Alice's write of the same name is her own file; bob's is untouched.
    assert await tools.write_file("secret.txt", PLANTED, ALICE) == "Written to secret.txt"
    assert (world / "users" / "alice" / "secret.txt").read_text() == PLANTED
    assert bob_file.read_text() == f"{BOB_SECRET}\n"
    assert await tools.read_file("secret.txt", BOB) == f"1\t{BOB_SECRET}"
    # Alice's edits change only her copy.
    assert await tools.edit_file("secret.txt", PLANTED, "mine", ALICE) == (
        "Edited secret.txt (1 replacement(s))"
    )
    assert bob_file.read_text() == f"{BOB_SECRET}\n"


async def test_a_sandboxed_command_cannot_see_another_user(world: Path) -> None:
    if shutil.which("bwrap") is None:
        unavailable("bubblewrap (bwrap) is not installed")
    fs = SandboxFilesystem(world)
    problem = await fs.check()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the bubblewrap sandbox does not work in CI: {problem}")
        print(f"skipping: the bubblewrap sandbox does not work here: {problem}")
        pytest.skip(f"the bubblewrap sandbox does not work here: {problem}")
    tools = FilesystemTools(fs)
    bob_file = world / "users" / "bob" / "secret.txt"
    out = await tools.execute(
        "cat ../bob/secret.txt /workspace/../bob/secret.txt link_bob/secret.txt "
        "link_out/secret.txt; ls -a .. /; rm -f ../bob/secret.txt; "
        f"echo {PLANTED} > ../planted.txt",
        ALICE,
    )
    assert out.startswith("Exit code: ")
    _assert_no_leak(out)
    assert bob_file.read_text() == f"{BOB_SECRET}\n"
    assert not (world / "users" / "planted.txt").exists()
    assert await tools.execute("cat secret.txt", BOB) == f"Exit code: 0\n\n{BOB_SECRET}"
