"""Path escapes: every backend refuses them in every operation, and nothing outside leaks.

Each refused case runs all operations (read, write, edit, ls, glob, grep, upload, download,
delete, move from and to, exists, get, put, append) with one bad path and checks that each one
refuses it: tool operations with an ``invalid_path`` or ``permission_denied`` error, ``exists``
with False, storage operations by raising :class:`PathOutsideWorkspace`. Afterwards the whole
workspace (seen by the harness, ``ctx=None``) must be exactly as it was, and no answer may carry
a byte of another namespace's files.

Harmless look-alikes (``a..b``, ``%2e%2e``, ``/etc/passwd``, shell syntax in a name) must work,
and land inside the caller's namespace. Symbolic links are made on disk, so those cases run
against the local backend only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.context import RuntimeContext
from harness.errors import PathOutsideWorkspace, StorageError
from harness.filesystem import AbstractFilesystem, FsError, FsErrorCode, LocalFilesystem

ALICE = RuntimeContext(session_id="s-alice", user_id="alice")
NOUSER = RuntimeContext(session_id="s-shared")
CALLERS = {"alice": ALICE, "nouser": NOUSER}

SECRET = "TOP-SECRET-8f3a"
"""In every file the caller must not reach; no answer may contain it."""

SEEDS = {
    "secret.txt": f"shared {SECRET}\n",
    "x": f"shared x {SECRET}\n",
    "b": f"shared b {SECRET}\n",
    "etc/passwd": f"root:{SECRET}\n",
    "users/bob/secret.txt": f"bob {SECRET}\n",
    "users/bob/x": f"bob x {SECRET}\n",
    "users/alice/mine.txt": "alice's own\n",
}
"""Workspace files (harness paths) every test starts with."""

REFUSAL: frozenset[FsErrorCode] = frozenset(
    {FsErrorCode.INVALID_PATH, FsErrorCode.PERMISSION_DENIED}
)


@dataclass(frozen=True)
class Escape:
    path: str
    caller: str = "alice"


REFUSED = [
    Escape(".."),
    Escape("../x"),
    Escape("../../x"),
    Escape("../../../../../../../../etc/passwd"),
    Escape("a/../../b"),
    Escape("a/../b"),
    Escape("./../x"),
    Escape("/../x"),
    Escape("/.."),
    Escape("x/.."),
    Escape("a/./../../x"),
    Escape("....//..//x"),
    Escape("~"),
    Escape("~/x"),
    Escape("~root"),
    Escape("~root/.ssh/authorized_keys"),
    Escape("~bob/secret.txt"),
    Escape("..\\..\\x"),
    Escape("a\\..\\..\\b"),
    Escape("\\..\\x"),
    Escape("x\x00y"),
    Escape("\x00"),
    Escape("mine.txt\x00.png"),
    Escape("../bob/secret.txt"),
    Escape("../../users/bob/secret.txt"),
    Escape("/../bob/secret.txt"),
    Escape("..\\bob\\secret.txt"),
    Escape("../alice/../bob/secret.txt"),
    Escape("users/bob/secret.txt", "nouser"),
    Escape("users", "nouser"),
    Escape("/users/bob/secret.txt", "nouser"),
    Escape("users\\bob\\secret.txt", "nouser"),
    Escape("./users/bob", "nouser"),
    Escape("users/", "nouser"),
    Escape("//users//bob//x", "nouser"),
    Escape("users/alice/mine.txt", "nouser"),
]

HARMLESS = {
    "%2e%2e/x": "%2e%2e/x",
    "%2e%2e%2fx": "%2e%2e%2fx",
    "..%2f..%2fsecret.txt": "..%2f..%2fsecret.txt",
    "a..b": "a..b",
    ".../x": ".../x",
    "..foo": "..foo",
    "foo..": "foo..",
    "/etc/passwd": "etc/passwd",
    "//etc//shadow": "etc/shadow",
    "/./y": "y",
    "C:\\Windows\\win.ini": "C:/Windows/win.ini",
    "a/~/b": "a/~/b",
    "/~root/x": "~root/x",
    "$HOME/x": "$HOME/x",
    "$(touch injected)": "$(touch injected)",
    "`touch injected2`": "`touch injected2`",
    "x; touch injected3": "x; touch injected3",
    "-rf": "-rf",
    'it\'s "quoted"': 'it\'s "quoted"',
}
"""Paths that look dangerous but name something inside the namespace: path → where it lands."""

PATTERN_ESCAPES = ["../*", "../../**", "~/*", "..\\*", "**/../../*", "/../**", "../bob/*"]


def _case_id(case: Escape) -> str:
    return f"{case.caller}:{case.path!r}"


# -- helpers ---------------------------------------------------------------------------------


async def seed(fs: AbstractFilesystem) -> None:
    for path, content in SEEDS.items():
        await fs.put(path, content.encode(), None)


async def snapshot(fs: AbstractFilesystem) -> dict[str, bytes]:
    """Every file of the workspace and its bytes, as the harness sees them (each namespace by
    its own path: a walk of the shared root does not enter ``users/``)."""
    namespaces = await fs.ls("users", None)
    assert namespaces.error is None, namespaces.error
    files = {}
    for top in ["/", *(entry.path for entry in namespaces.entries if entry.is_dir)]:
        listing = await fs.glob("**", top, None)
        assert listing.error is None, listing.error
        for entry in listing.entries:
            got = await fs.get(entry.path, None)
            assert got is not None, entry.path
            files[entry.path] = got[0]
    return files


class Audit:
    """Collects what went wrong across the operations of one case."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def refused(self, operation: str, error: FsError | None) -> None:
        if error is None:
            self.problems.append(f"{operation}: not refused")
        elif error.code not in REFUSAL:
            self.problems.append(f"{operation}: refused with {error.code}, not a path refusal")
        elif not error.message:
            self.problems.append(f"{operation}: refused without a message")

    def clean(self, operation: str, payload: object) -> None:
        if SECRET in repr(payload):
            self.problems.append(f"{operation}: leaked {payload!r}")

    async def raises(self, operation: str, call: object) -> None:
        try:
            result = await call  # type: ignore[misc]
        except PathOutsideWorkspace as exc:
            if not str(exc):
                self.problems.append(f"{operation}: PathOutsideWorkspace without a message")
            return
        self.problems.append(f"{operation}: did not raise, returned {result!r}")


async def run_every_operation(fs: AbstractFilesystem, path: str, ctx: RuntimeContext) -> list[str]:
    """Try ``path`` in every operation; the problems found (empty: all refused)."""
    audit = Audit()
    read = await fs.read(path, ctx=ctx)
    audit.refused("read", read.error)
    audit.clean("read", read.data)
    audit.refused("write", (await fs.write(path, "pwned", ctx)).error)
    audit.refused("edit", (await fs.edit(path, "bob", "pwned", ctx=ctx)).error)
    listing = await fs.ls(path, ctx)
    audit.refused("ls", listing.error)
    audit.clean("ls", listing.entries)
    glob = await fs.glob("**", path, ctx)
    audit.refused("glob", glob.error)
    audit.clean("glob", glob.entries)
    grep = await fs.grep(SECRET, path, ctx=ctx)
    audit.refused("grep", grep.error)
    audit.clean("grep", grep.matches)
    audit.refused("upload", (await fs.upload([(path, b"pwned")], ctx))[0].error)
    [download] = await fs.download([path], ctx)
    audit.refused("download", download.error)
    audit.clean("download", download.content)
    audit.refused("delete", (await fs.delete(path, ctx)).error)
    audit.refused("move from", (await fs.move(path, "moved.txt", ctx)).error)
    audit.refused("move to", (await fs.move("mine.txt", path, ctx)).error)
    if await fs.exists(path, ctx):
        audit.problems.append("exists: True")
    await audit.raises("get", fs.get(path, ctx))
    await audit.raises("put", fs.put(path, b"pwned", ctx))
    await audit.raises("put if missing", fs.put(path, b"pwned", ctx, if_version=""))
    await audit.raises("append", fs.append(path, b"pwned", ctx))
    return audit.problems


# -- every backend ---------------------------------------------------------------------------


def test_there_are_enough_escape_cases() -> None:
    assert len({(case.path, case.caller) for case in REFUSED}) >= 30


@pytest.mark.parametrize("case", REFUSED, ids=_case_id)
async def test_an_escape_is_refused_by_every_operation(
    fs: AbstractFilesystem, case: Escape
) -> None:
    await seed(fs)
    if case.caller == "nouser":
        await fs.put("mine.txt", b"shared own\n", NOUSER)
    before = await snapshot(fs)
    problems = await run_every_operation(fs, case.path, CALLERS[case.caller])
    assert problems == []
    assert await snapshot(fs) == before


@pytest.mark.parametrize(("path", "lands_at"), list(HARMLESS.items()))
async def test_a_harmless_look_alike_stays_in_the_namespace(
    fs: AbstractFilesystem, path: str, lands_at: str
) -> None:
    await seed(fs)
    before = await snapshot(fs)
    missing = await fs.read(path, ctx=ALICE)
    assert missing.error is not None
    assert missing.error.code is FsErrorCode.FILE_NOT_FOUND  # not the host's file
    written = await fs.write(path, "harmless\n", ALICE)
    assert written.error is None, written.error
    assert written.path == lands_at
    read = await fs.read(path, ctx=ALICE)
    assert read.data is not None, read.error
    assert read.data.content == "harmless\n"
    assert await snapshot(fs) == {**before, f"users/alice/{lands_at}": b"harmless\n"}
    assert (await fs.delete(path, ALICE)).error is None
    assert await snapshot(fs) == before


@pytest.mark.parametrize("pattern", PATTERN_ESCAPES)
async def test_glob_and_grep_patterns_cannot_climb_out(
    fs: AbstractFilesystem, pattern: str
) -> None:
    await seed(fs)
    glob = await fs.glob(pattern, "/", ALICE)
    assert glob.error is not None or glob.entries == [], glob
    if glob.error is not None:
        assert glob.error.code in REFUSAL
    grep = await fs.grep(SECRET, "/", glob=pattern, ctx=ALICE)
    assert grep.matches == []
    assert SECRET not in repr(glob)


@pytest.mark.parametrize("name", ["n" * 300, "d/" + "n" * 300 + "/x.md", "é" * 200, "a/" * 2100])
async def test_a_very_long_name_gets_a_clear_answer(fs: AbstractFilesystem, name: str) -> None:
    await seed(fs)
    before = await snapshot(fs)
    written = await fs.write(name, "long\n", ALICE)
    if written.error is None:  # a backend without the OS's name limit: it must land inside
        after = await snapshot(fs)
        assert set(after) - set(before) == {f"users/alice/{written.path}"}
        assert (await fs.delete(name, ALICE)).error is None
    else:
        assert written.error.code is FsErrorCode.INVALID_PATH
        assert 0 < len(written.error.message) < 500
        read = await fs.read(name, ctx=ALICE)
        assert read.error is not None
        assert read.error.code in (FsErrorCode.INVALID_PATH, FsErrorCode.FILE_NOT_FOUND)
        with pytest.raises((PathOutsideWorkspace, StorageError)):
            await fs.put(name, b"long", ALICE)
    assert await snapshot(fs) == before


# -- symbolic links (local backend: they are made on disk) -------------------------------


@pytest.fixture
async def linked(tmp_path: Path) -> tuple[LocalFilesystem, Path]:
    """A local workspace whose alice namespace holds links leading out, and the outside dir."""
    outside = tmp_path / "outside"
    root = tmp_path / "ws"
    fs = LocalFilesystem(root)
    await seed(fs)

    def make_links() -> None:
        outside.mkdir()
        (outside / "secret.txt").write_text(f"outside {SECRET}\n")
        ns = root / "users" / "alice"
        (ns / "out").symlink_to(outside, target_is_directory=True)
        (ns / "rel_out").symlink_to(Path("..", "..", "..", "outside"))
        (ns / "passwd").symlink_to("/etc/passwd")
        (ns / "secret_link").symlink_to(outside / "secret.txt")
        (ns / "tobob").symlink_to(Path("..", "bob"))
        (ns / "chain1").symlink_to("chain2")
        (ns / "chain2").symlink_to(outside)
        (ns / "loop1").symlink_to("loop2")
        (ns / "loop2").symlink_to("loop1")
        (ns / "dangling_out").symlink_to(outside / "created.txt")
        (ns / "sub").mkdir()
        (ns / "sub" / "up_and_out").symlink_to(Path("..", "..", "..", "..", "outside"))
        (root / "toalice").symlink_to(Path("users", "alice"))
        (root / "users" / "alice" / "ok_link").symlink_to("mine.txt")

    await asyncio.to_thread(make_links)
    return fs, outside


def _tree(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


SYMLINK_ESCAPES = [
    Escape("out"),
    Escape("out/secret.txt"),
    Escape("out/new.txt"),
    Escape("/out/secret.txt"),
    Escape("rel_out/secret.txt"),
    Escape("passwd"),
    Escape("secret_link"),
    Escape("tobob/secret.txt"),
    Escape("tobob"),
    Escape("chain1/secret.txt"),
    Escape("loop1"),
    Escape("loop1/x"),
    Escape("dangling_out"),
    Escape("sub/up_and_out/secret.txt"),
    Escape("toalice/mine.txt", "nouser"),
    Escape("toalice", "nouser"),
]


@pytest.mark.parametrize("case", SYMLINK_ESCAPES, ids=_case_id)
async def test_a_symlink_leading_out_is_refused_by_every_operation(
    linked: tuple[LocalFilesystem, Path], case: Escape
) -> None:
    fs, outside = linked
    host_passwd = await asyncio.to_thread(Path("/etc/passwd").read_bytes)
    outside_before = await asyncio.to_thread(_tree, outside)
    before = await snapshot(fs)
    problems = await run_every_operation(fs, case.path, CALLERS[case.caller])
    assert problems == []
    assert await snapshot(fs) == before
    assert await asyncio.to_thread(_tree, outside) == outside_before
    assert not await asyncio.to_thread((outside / "created.txt").exists)
    read = await fs.read(case.path, ctx=CALLERS[case.caller])
    assert read.data is None
    assert host_passwd[:20] not in repr(read).encode()


async def test_listings_do_not_follow_links_out(linked: tuple[LocalFilesystem, Path]) -> None:
    fs, _ = linked
    shown = [entry.path for entry in (await fs.ls("/", ALICE)).entries]
    assert shown == ["mine.txt", "ok_link", "sub"]
    globbed = [entry.path for entry in (await fs.glob("**", "/", ALICE)).entries]
    assert globbed == ["mine.txt", "ok_link"]
    assert (await fs.grep(SECRET, "/", ctx=ALICE)).matches == []
    assert (await fs.grep("root:", "/", ctx=ALICE)).matches == []
    nouser_ls = [entry.path for entry in (await fs.ls("/", NOUSER)).entries]
    assert "toalice" not in nouser_ls
    assert "users" not in nouser_ls
    assert (await fs.grep("alice's own", "/", ctx=NOUSER)).matches == []


async def test_a_link_that_stays_inside_works(linked: tuple[LocalFilesystem, Path]) -> None:
    fs, _ = linked
    read = await fs.read("ok_link", ctx=ALICE)
    assert read.data is not None
    assert read.data.content == "alice's own\n"
    got = await fs.get("users/alice/ok_link", None)  # the harness, inside alice's namespace
    assert got is not None
    assert got[0] == b"alice's own\n"
    with pytest.raises(PathOutsideWorkspace):  # but a shared path never leads into a user's
        await fs.get("toalice/mine.txt", None)
