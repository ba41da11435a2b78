"""The filesystem contract: what every backend in ``_backends.FACTORIES`` does, the same way.

Tool operations run as user ``alice`` unless a test is about someone else; their paths are
relative to alice's namespace (``users/alice/``), which ``ctx=None`` (the harness) sees whole.

A composite backend shows its route directories (``memory``) at the root even while they are
empty, as the original does; assertions about what the root shows therefore use
:func:`listing`, which leaves out directories with no file in them. Exact listings are checked
in subdirectories.
"""

from __future__ import annotations

import asyncio
import base64
import os

import pytest

from _backends import EXPECTED_BACKENDS, FACTORIES
from harness.context import RuntimeContext
from harness.errors import PathOutsideWorkspace, StorageError
from harness.filesystem import (
    MISSING,
    AbstractFilesystem,
    EditResult,
    FileData,
    FsErrorCode,
    GrepMatch,
    ListResult,
    ReadResult,
    WriteResult,
)

Ctx = RuntimeContext

# -- helpers ---------------------------------------------------------------------------------


def data_of(result: ReadResult) -> FileData:
    assert result.error is None, result.error
    assert result.data is not None
    return result.data


def paths(result: ListResult) -> list[str]:
    assert result.error is None, result.error
    return [entry.path for entry in result.entries]


def ok_write(result: WriteResult | EditResult) -> str:
    assert result.error is None, result.error
    return result.path


async def listing(fs: AbstractFilesystem, path: str, ctx: Ctx | None) -> list[str]:
    """What ``ls`` shows, without directories that hold no file (for the call)."""
    shown = []
    for entry in (await fs.ls(path, ctx)).entries:
        if entry.is_dir:
            inside = await fs.glob("**", entry.path, ctx)
            if inside.error is None and not inside.entries:
                continue
        shown.append(entry.path)
    return shown


async def text(fs: AbstractFilesystem, path: str, ctx: Ctx | None) -> str:
    data = data_of(await fs.read(path, ctx=ctx))
    assert data.encoding == "utf-8"
    return data.content


async def make(fs: AbstractFilesystem, ctx: Ctx | None, files: dict[str, str]) -> None:
    for path, content in files.items():
        ok_write(await fs.write(path, content, ctx))


def test_every_expected_backend_is_registered() -> None:
    missing = EXPECTED_BACKENDS - FACTORIES.keys()
    if missing and not os.environ.get("CI"):
        reason = f"backends not registered yet (their _backends_*.py is absent): {missing}"
        print(f"skipping: {reason}")
        pytest.skip(reason)
    assert missing == set()


# -- ls --------------------------------------------------------------------------------------


async def test_ls_lists_files_and_directories_sorted(fs: AbstractFilesystem, alice: Ctx) -> None:
    files = {"b.txt": "bb", "a.txt": "a", "d/c.txt": "c", "d/e/f.txt": "f"}
    await make(fs, alice, {f"p/{name}": content for name, content in files.items()})
    result = await fs.ls("p", alice)
    assert paths(result) == ["p/a.txt", "p/b.txt", "p/d"]
    assert [entry.is_dir for entry in result.entries] == [False, False, True]
    assert [entry.size for entry in result.entries[:2]] == [1, 2]
    assert await listing(fs, "/", alice) == ["p"]


async def test_ls_of_a_subdirectory_gives_namespace_relative_paths(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await make(fs, alice, {"d/c.txt": "c", "d/e/f.txt": "f", "top.txt": "t"})
    assert paths(await fs.ls("d", alice)) == ["d/c.txt", "d/e"]
    assert paths(await fs.ls("/d", alice)) == ["d/c.txt", "d/e"]
    assert paths(await fs.ls("d/e/", alice)) == ["d/e/f.txt"]


async def test_ls_of_a_missing_directory_is_empty(fs: AbstractFilesystem, alice: Ctx) -> None:
    assert await fs.ls("nowhere", alice) == ListResult()
    assert await fs.ls("a/b/c", alice) == ListResult()
    assert await listing(fs, "/", alice) == []


async def test_ls_of_a_file_is_not_a_directory(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a.txt": "a"})
    result = await fs.ls("a.txt", alice)
    assert result.entries == []
    assert result.error is not None
    assert result.error.code is FsErrorCode.NOT_A_DIRECTORY


# -- read ------------------------------------------------------------------------------------


async def test_read_returns_the_whole_file_and_its_line_count(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await make(fs, alice, {"notes.md": "one\ntwo\nthree\n"})
    data = data_of(await fs.read("notes.md", ctx=alice))
    assert data.content == "one\ntwo\nthree\n"
    assert data.encoding == "utf-8"
    assert data.total_lines == 3


async def test_read_selects_lines_by_offset_and_limit(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"ten.txt": "".join(f"line {i}\n" for i in range(10))})
    data = data_of(await fs.read("ten.txt", offset=2, limit=3, ctx=alice))
    assert data.content == "line 2\nline 3\nline 4\n"
    assert data.total_lines == 10
    assert data_of(await fs.read("ten.txt", offset=8, ctx=alice)).content == "line 8\nline 9\n"
    assert data_of(await fs.read("ten.txt", offset=9, limit=0, ctx=alice)).content == "line 9\n"
    assert data_of(await fs.read("ten.txt", offset=7, limit=50, ctx=alice)).content == (
        "line 7\nline 8\nline 9\n"
    )


async def test_read_of_a_last_line_without_newline(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a.txt": "a\nb"})
    data = data_of(await fs.read("a.txt", offset=1, ctx=alice))
    assert (data.content, data.total_lines) == ("b", 2)


async def test_read_keeps_crlf_line_endings(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"win.txt": "a\r\nb\r\n"})
    assert (await text(fs, "win.txt", alice)) == "a\r\nb\r\n"
    data = data_of(await fs.read("win.txt", offset=1, ctx=alice))
    assert (data.content, data.total_lines) == ("b\r\n", 2)


@pytest.mark.parametrize("offset", [3, 4, 100])
async def test_read_past_the_end_is_an_error(
    fs: AbstractFilesystem, alice: Ctx, offset: int
) -> None:
    await make(fs, alice, {"three.txt": "a\nb\nc\n"})
    result = await fs.read("three.txt", offset=offset, ctx=alice)
    assert result.data is None
    assert result.error is not None
    assert result.error.code is FsErrorCode.INVALID_PATH
    assert str(offset) in result.error.message


async def test_read_of_a_missing_file(fs: AbstractFilesystem, alice: Ctx) -> None:
    result = await fs.read("docs/missing.md", ctx=alice)
    assert result.data is None
    assert result.error is not None
    assert result.error.code is FsErrorCode.FILE_NOT_FOUND
    assert result.error.message == "File 'docs/missing.md' not found"


async def test_read_of_a_directory(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"d/x.txt": "x"})
    result = await fs.read("d", ctx=alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.IS_DIRECTORY


async def test_an_empty_file_reads_as_empty_text(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"d/empty.txt": ""})
    data = data_of(await fs.read("d/empty.txt", ctx=alice))
    assert (data.content, data.encoding, data.total_lines) == ("", "utf-8", 0)
    assert await fs.exists("d/empty.txt", alice)
    assert [(e.path, e.size) for e in (await fs.ls("d", alice)).entries] == [("d/empty.txt", 0)]
    assert paths(await fs.glob("**", ctx=alice)) == ["d/empty.txt"]


async def test_unicode_names_and_content_round_trip(fs: AbstractFilesystem, alice: Ctx) -> None:
    name = "notes/日本語 ü — ✓.md"
    content = "héllo wörld\n中文 🎉\n"
    assert ok_write(await fs.write(name, content, alice)) == name
    assert (await text(fs, name, alice)) == content
    assert paths(await fs.ls("notes", alice)) == [name]
    assert paths(await fs.glob("**/*.md", ctx=alice)) == [name]
    assert (await fs.grep("🎉", ctx=alice)).matches == [GrepMatch(name, 2, "中文 🎉")]
    assert (await fs.download([name], alice))[0].content == content.encode()


async def test_binary_content_round_trips_as_base64(fs: AbstractFilesystem, alice: Ctx) -> None:
    blob = bytes(range(256)) * 4
    [uploaded] = await fs.upload([("files/blob.dat", blob)], alice)
    assert uploaded.error is None
    data = data_of(await fs.read("files/blob.dat", ctx=alice))
    assert data.encoding == "base64"
    assert base64.b64decode(data.content) == blob
    assert (await fs.download(["files/blob.dat"], alice))[0].content == blob


async def test_invalid_utf8_is_binary(fs: AbstractFilesystem, alice: Ctx) -> None:
    raw = b"caf\xe9 \xff\xfe"
    await fs.upload([("latin1.txt", raw)], alice)
    data = data_of(await fs.read("latin1.txt", ctx=alice))
    assert data.encoding == "base64"
    assert base64.b64decode(data.content) == raw


async def test_a_one_megabyte_file(fs: AbstractFilesystem, alice: Ctx) -> None:
    line = "0123456789abcdef" * 4 + "\n"  # 65 bytes
    content = line * (1024 * 1024 // len(line) + 1)
    assert len(content) > 1024 * 1024
    ok_write(await fs.write("big.txt", content, alice))
    data = data_of(await fs.read("big.txt", ctx=alice))
    assert data.content == content
    assert data.total_lines == content.count("\n")
    tail = data_of(await fs.read("big.txt", offset=data.total_lines - 1, ctx=alice))
    assert tail.content == line
    assert (await fs.download(["big.txt"], alice))[0].content == content.encode()
    got = await fs.get("big.txt", alice)
    assert got is not None
    assert got[0] == content.encode()


# -- write -----------------------------------------------------------------------------------


async def test_write_creates_a_file_and_its_directories(fs: AbstractFilesystem, alice: Ctx) -> None:
    assert ok_write(await fs.write("/a/b/c/note.md", "hi", alice)) == "a/b/c/note.md"
    assert (await text(fs, "a/b/c/note.md", alice)) == "hi"
    assert await fs.exists("a/b/c", alice)
    assert paths(await fs.ls("a/b", alice)) == ["a/b/c"]


async def test_write_refuses_an_existing_file(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"notes/a.md": "original"})
    result = await fs.write("notes/a.md", "replacement", alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.ALREADY_EXISTS
    assert result.error.message == (
        "Cannot write to notes/a.md because it already exists. "
        "Read and then make an edit, or write to a new path."
    )
    assert (await text(fs, "notes/a.md", alice)) == "original"


async def test_write_refuses_a_directory(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"d/x.txt": "x"})
    result = await fs.write("d", "text", alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.IS_DIRECTORY
    assert paths(await fs.ls("d", alice)) == ["d/x.txt"]


async def test_write_below_a_file_is_not_a_directory(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a.txt": "a"})
    result = await fs.write("a.txt/b.txt", "b", alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.NOT_A_DIRECTORY
    assert (await text(fs, "a.txt", alice)) == "a"


async def test_two_racing_writes_create_the_file_once(fs: AbstractFilesystem, alice: Ctx) -> None:
    results = await asyncio.gather(*(fs.write("race.md", f"w{i}", alice) for i in range(8)))
    winners = [i for i, r in enumerate(results) if r.error is None]
    assert len(winners) == 1
    assert all(r.error.code is FsErrorCode.ALREADY_EXISTS for r in results if r.error)
    assert (await text(fs, "race.md", alice)) == f"w{winners[0]}"


# -- edit ------------------------------------------------------------------------------------


async def test_edit_replaces_one_exact_occurrence(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a.py": "def f():\n    return 1\n\nprint(f())\n"})
    result = await fs.edit("a.py", "    return 1\n", "    return 2\n", ctx=alice)
    assert (result.path, result.occurrences, result.error) == ("a.py", 1, None)
    assert (await text(fs, "a.py", alice)) == "def f():\n    return 2\n\nprint(f())\n"


async def test_edit_without_a_match(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a.txt": "alpha beta"})
    result = await fs.edit("a.txt", "gamma", "delta", ctx=alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.NO_MATCH
    assert result.error.message == "String not found in file: 'gamma'"
    assert (await text(fs, "a.txt", alice)) == "alpha beta"


async def test_edit_of_an_ambiguous_string(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a.txt": "x = 1\nx = 1\nx = 1\n"})
    result = await fs.edit("a.txt", "x = 1", "x = 2", ctx=alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.NOT_UNIQUE
    assert "replace_all" in result.error.message
    assert "3" in result.error.message
    assert (await text(fs, "a.txt", alice)) == "x = 1\nx = 1\nx = 1\n"


async def test_edit_replace_all(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a.txt": "x = 1\ny = 1\nx = 1\n"})
    result = await fs.edit("a.txt", "x = 1", "x = 2", replace_all=True, ctx=alice)
    assert (result.occurrences, result.error) == (2, None)
    assert (await text(fs, "a.txt", alice)) == "x = 2\ny = 1\nx = 2\n"


async def test_edit_of_a_missing_file_or_a_directory(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"d/x.txt": "x"})
    missing = await fs.edit("nope.txt", "a", "b", ctx=alice)
    assert missing.error is not None
    assert missing.error.code is FsErrorCode.FILE_NOT_FOUND
    directory = await fs.edit("d", "a", "b", ctx=alice)
    assert directory.error is not None
    assert directory.error.code is FsErrorCode.IS_DIRECTORY
    assert not await fs.exists("nope.txt", alice)


async def test_edit_normalizes_crlf_to_the_files_lf(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"unix.txt": "first\nsecond\nthird\n"})
    result = await fs.edit("unix.txt", "first\r\nsecond", "1st\r\n2nd", ctx=alice)
    assert result.error is None
    assert (await text(fs, "unix.txt", alice)) == "1st\n2nd\nthird\n"


async def test_edit_keeps_the_rest_of_a_unicode_file(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"u.md": "# Überschrift\n\n- 苹果\n- 香蕉\n"})
    ok_write(await fs.edit("u.md", "- 香蕉", "- 🍌", ctx=alice))
    assert (await text(fs, "u.md", alice)) == "# Überschrift\n\n- 苹果\n- 🍌\n"


# -- grep ------------------------------------------------------------------------------------


async def test_grep_is_literal_and_sorted(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(
        fs,
        alice,
        {
            "b.txt": "a.c\nabc\nx a.c y\n",
            "a.txt": "nothing\n(a.c[\n",
            "sub/c.txt": "a.c",
        },
    )
    result = await fs.grep("a.c", ctx=alice)
    assert result.error is None
    assert result.matches == [
        GrepMatch("a.txt", 2, "(a.c["),
        GrepMatch("b.txt", 1, "a.c"),
        GrepMatch("b.txt", 3, "x a.c y"),
        GrepMatch("sub/c.txt", 1, "a.c"),
    ]
    assert (await fs.grep("(a.c[", ctx=alice)).matches == [GrepMatch("a.txt", 2, "(a.c[")]


async def test_grep_under_a_path_and_with_a_glob(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(
        fs,
        alice,
        {
            "top.md": "needle\n",
            "sub/a.md": "needle\n",
            "sub/b.txt": "needle\n",
            "sub/d/e.md": "needle",
        },
    )
    under = await fs.grep("needle", "sub", ctx=alice)
    assert [m.path for m in under.matches] == ["sub/a.md", "sub/b.txt", "sub/d/e.md"]
    by_name = await fs.grep("needle", "/", glob="*.md", ctx=alice)
    assert [m.path for m in by_name.matches] == ["sub/a.md", "sub/d/e.md", "top.md"]
    one_file = await fs.grep("needle", "sub/b.txt", ctx=alice)
    assert one_file.matches == [GrepMatch("sub/b.txt", 1, "needle")]


async def test_grep_skips_binary_files_and_misses_quietly(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await fs.upload([("bin.dat", b"\xff\xfe needle \x00\x01")], alice)
    await make(fs, alice, {"t.txt": "needle"})
    assert [m.path for m in (await fs.grep("needle", ctx=alice)).matches] == ["t.txt"]
    assert (await fs.grep("absent", ctx=alice)).matches == []
    missing = await fs.grep("needle", "no/such/dir", ctx=alice)
    assert (missing.matches, missing.error) == ([], None)


# -- glob ------------------------------------------------------------------------------------


async def test_double_star_also_matches_at_the_search_root(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await make(fs, alice, {"x.md": "", "a/x.md": "", "a/b/x.md": "", "a/y.md": "", "x.txt": ""})
    assert paths(await fs.glob("**/x.md", ctx=alice)) == ["a/b/x.md", "a/x.md", "x.md"]
    assert paths(await fs.glob("**/*.md", ctx=alice)) == ["a/b/x.md", "a/x.md", "a/y.md", "x.md"]
    assert paths(await fs.glob("/**/x.md", ctx=alice)) == ["a/b/x.md", "a/x.md", "x.md"]


async def test_glob_star_stays_in_one_directory(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"x.md": "", "a/y.md": "", "a/b/z.md": "", "c.txt": ""})
    assert paths(await fs.glob("*.md", ctx=alice)) == ["x.md"]
    assert paths(await fs.glob("a/*.md", ctx=alice)) == ["a/y.md"]
    assert paths(await fs.glob("a/**", ctx=alice)) == ["a/b/z.md", "a/y.md"]
    assert paths(await fs.glob("?.txt", ctx=alice)) == ["c.txt"]


async def test_glob_returns_files_only(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a/b/c.txt": "ccc", "d.txt": "d"})
    result = await fs.glob("**", ctx=alice)
    assert paths(result) == ["a/b/c.txt", "d.txt"]
    assert not any(entry.is_dir for entry in result.entries)
    assert [entry.size for entry in result.entries] == [3, 1]


async def test_glob_under_a_path(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"docs/a.md": "", "docs/sub/b.md": "", "other/c.md": ""})
    assert paths(await fs.glob("*.md", "docs", ctx=alice)) == ["docs/a.md"]
    assert paths(await fs.glob("**/*.md", "/docs", ctx=alice)) == ["docs/a.md", "docs/sub/b.md"]
    assert paths(await fs.glob("**/*.md", "nowhere", ctx=alice)) == []
    assert paths(await fs.glob("*.rs", ctx=alice)) == []


# -- upload, download ------------------------------------------------------------------------


async def test_upload_overwrites_and_creates_directories(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await make(fs, alice, {"a.txt": "old"})
    results = await fs.upload(
        [("a.txt", b"new"), ("/deep/er/b.bin", b"\x00\x01"), ("e", b"")], alice
    )
    assert [(r.path, r.error) for r in results] == [
        ("a.txt", None),
        ("/deep/er/b.bin", None),
        ("e", None),
    ]
    downloaded = await fs.download(["a.txt", "deep/er/b.bin", "e"], alice)
    assert [r.content for r in downloaded] == [b"new", b"\x00\x01", b""]
    assert all(r.error is None for r in downloaded)


async def test_download_reports_each_failure(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"d/a.txt": "a"})
    results = await fs.download(["d/a.txt", "missing.txt", "d"], alice)
    assert [r.path for r in results] == ["d/a.txt", "missing.txt", "d"]
    assert results[0].content == b"a"
    assert results[0].error is None
    codes = [r.error.code if r.error else None for r in results]
    assert codes == [None, FsErrorCode.FILE_NOT_FOUND, FsErrorCode.IS_DIRECTORY]
    assert results[1].content is None


async def test_write_after_upload_still_refuses(fs: AbstractFilesystem, alice: Ctx) -> None:
    await fs.upload([("u.txt", b"uploaded")], alice)
    result = await fs.write("u.txt", "x", alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.ALREADY_EXISTS


# -- exists, delete, move --------------------------------------------------------------------


async def test_exists(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"d/e/f.txt": "f"})
    assert await fs.exists("d/e/f.txt", alice)
    assert await fs.exists("/d/e", alice)
    assert await fs.exists("d", alice)
    assert not await fs.exists("d/e/g.txt", alice)
    assert not await fs.exists("nothing", alice)


async def test_delete(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"a.txt": "a", "b.txt": "b"})
    assert ok_write(await fs.delete("a.txt", alice)) == "a.txt"
    assert not await fs.exists("a.txt", alice)
    assert await listing(fs, "/", alice) == ["b.txt"]
    assert (await fs.read("a.txt", ctx=alice)).error is not None
    assert (await fs.delete("a.txt", alice)).error is None  # already gone: fine
    assert (await fs.delete("never/was.txt", alice)).error is None


async def test_delete_of_a_directory_is_refused(fs: AbstractFilesystem, alice: Ctx) -> None:
    await make(fs, alice, {"d/a.txt": "a"})
    result = await fs.delete("d", alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.IS_DIRECTORY
    assert (await text(fs, "d/a.txt", alice)) == "a"


async def test_move_replaces_the_target_and_creates_its_directory(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await make(fs, alice, {"a.txt": "A", "b.txt": "B"})
    assert ok_write(await fs.move("a.txt", "new/dir/a.txt", alice)) == "new/dir/a.txt"
    assert not await fs.exists("a.txt", alice)
    assert (await text(fs, "new/dir/a.txt", alice)) == "A"
    ok_write(await fs.move("b.txt", "new/dir/a.txt", alice))
    assert (await text(fs, "new/dir/a.txt", alice)) == "B"
    assert paths(await fs.glob("**", ctx=alice)) == ["new/dir/a.txt"]


async def test_move_of_a_missing_file(fs: AbstractFilesystem, alice: Ctx) -> None:
    result = await fs.move("ghost.txt", "b.txt", alice)
    assert result.error is not None
    assert result.error.code is FsErrorCode.FILE_NOT_FOUND
    assert not await fs.exists("b.txt", alice)


# -- storage operations ----------------------------------------------------------------------


async def test_get_put_and_versions(fs: AbstractFilesystem, alice: Ctx) -> None:
    assert await fs.get("state.json", alice) is None
    v1 = await fs.put("state.json", b'{"n": 1}', alice)
    assert isinstance(v1, str)
    assert v1 != MISSING
    assert await fs.get("state.json", alice) == (b'{"n": 1}', v1)
    v2 = await fs.put("state.json", b'{"n": 2}', alice)
    assert v2 is not None
    assert v2 != v1
    assert await fs.get("state.json", alice) == (b'{"n": 2}', v2)


async def test_storage_and_tool_operations_see_the_same_files(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await fs.put("dir/from-put.md", "put ✓\n".encode(), alice)
    assert (await text(fs, "dir/from-put.md", alice)) == "put ✓\n"
    await make(fs, alice, {"dir/from-write.md": "write"})
    got = await fs.get("dir/from-write.md", alice)
    assert got is not None
    assert got[0] == b"write"
    assert paths(await fs.ls("dir", alice)) == ["dir/from-put.md", "dir/from-write.md"]


async def test_user_paths_live_under_users_in_the_workspace(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await fs.put("memory/today.md", b"alice's day", alice)
    got = await fs.get("users/alice/memory/today.md", None)
    assert got is not None
    assert got[0] == b"alice's day"
    await fs.put("users/alice/MEMORY.md", b"from the harness", None)
    assert (await text(fs, "MEMORY.md", alice)) == "from the harness"


async def test_put_if_missing(fs: AbstractFilesystem, alice: Ctx) -> None:
    first = await fs.put("claim", b"first", alice, if_version=MISSING)
    assert first is not None
    assert await fs.put("claim", b"second", alice, if_version=MISSING) is None
    assert await fs.get("claim", alice) == (b"first", first)


async def test_put_if_version(fs: AbstractFilesystem, alice: Ctx) -> None:
    v1 = await fs.put("doc", b"v1", alice)
    assert v1 is not None
    v2 = await fs.put("doc", b"v2", alice, if_version=v1)
    assert v2 is not None
    assert await fs.put("doc", b"stale", alice, if_version=v1) is None
    assert await fs.put("doc", b"stale", alice, if_version=MISSING) is None
    assert await fs.get("doc", alice) == (b"v2", v2)
    assert await fs.put("absent", b"x", alice, if_version=v2) is None
    assert await fs.get("absent", alice) is None


async def test_two_racing_compare_and_set_writers(fs: AbstractFilesystem, alice: Ctx) -> None:
    version = await fs.put("counter", b"0", alice)
    results = await asyncio.gather(
        fs.put("counter", b"from-a", alice, if_version=version),
        fs.put("counter", b"from-b", alice, if_version=version),
    )
    winners = [i for i, v in enumerate(results) if v is not None]
    assert len(winners) == 1
    got = await fs.get("counter", alice)
    assert got == ([b"from-a", b"from-b"][winners[0]], results[winners[0]])


async def test_compare_and_set_increments_lose_nothing(fs: AbstractFilesystem, alice: Ctx) -> None:
    async def increment() -> int:
        attempts = 0
        while True:
            attempts += 1
            current = await fs.get("n", alice)
            value, version = (int(current[0]), current[1]) if current else (0, MISSING)
            if await fs.put("n", str(value + 1).encode(), alice, if_version=version) is not None:
                return attempts

    attempts = await asyncio.gather(*(increment() for _ in range(20)))
    got = await fs.get("n", alice)
    assert got is not None
    assert got[0] == b"20"
    assert len(attempts) == 20


async def test_append_creates_and_extends(fs: AbstractFilesystem, alice: Ctx) -> None:
    await fs.append("log/events.jsonl", b'{"a": 1}\n', alice)
    await fs.append("log/events.jsonl", b'{"b": 2}\n', alice)
    got = await fs.get("log/events.jsonl", alice)
    assert got is not None
    assert got[0] == b'{"a": 1}\n{"b": 2}\n'
    assert (await text(fs, "log/events.jsonl", alice)) == '{"a": 1}\n{"b": 2}\n'


async def test_fifty_concurrent_appends_lose_nothing(fs: AbstractFilesystem, alice: Ctx) -> None:
    records = [f"record {i:02d} {'x' * (i * 131)}\n".encode() for i in range(50)]
    await asyncio.gather(*(fs.append("daily.md", record, alice) for record in records))
    got = await fs.get("daily.md", alice)
    assert got is not None
    lines = got[0].splitlines(keepends=True)
    assert sorted(lines) == sorted(records)


async def test_append_after_put_and_put_after_append(fs: AbstractFilesystem, alice: Ctx) -> None:
    await fs.put("f", b"base\n", alice)
    await fs.append("f", b"more\n", alice)
    got = await fs.get("f", alice)
    assert got is not None
    assert got[0] == b"base\nmore\n"
    assert await fs.put("f", b"reset\n", alice, if_version=got[1]) is not None
    got = await fs.get("f", alice)
    assert got is not None
    assert got[0] == b"reset\n"


async def test_get_many_reads_each_path_in_order(fs: AbstractFilesystem, alice: Ctx) -> None:
    await fs.put("s/a", b"one", alice)
    await fs.put("s/b", b"two", alice)
    got = await fs.get_many(["s/b", "s/missing", "s/a"], alice)
    assert [found[0] if found else None for found in got] == [b"two", None, b"one"]
    assert got[0] == await fs.get("s/b", alice)  # the same version as a get's


async def test_an_appender_write_appends_then_replaces_beside_it(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    appender = fs.appender("s/messages.jsonl", alice)
    try:
        await appender.write(b"1\n", replace={"state.json": b"{}"}, sync=False)
        await appender.write(b"2\n", replace={"state.json": b'{"n":2}'})
        await appender.write(replace={"messages.jsonl": b"new\n"})  # its own file
        await appender.write(b"3\n", release=True)
        await appender.write(b"4\n")  # a write after the release takes the file again
    finally:
        await appender.aclose()
    assert (await fs.get("s/messages.jsonl", alice) or (b"",))[0] == b"new\n3\n4\n"
    assert (await fs.get("s/state.json", alice) or (b"",))[0] == b'{"n":2}'
    with pytest.raises(ValueError, match="not the name of a file"):
        await appender.write(replace={"../escape": b"x"})


async def test_storage_ops_refuse_escapes(fs: AbstractFilesystem, alice: Ctx) -> None:
    with pytest.raises(PathOutsideWorkspace):
        await fs.get("../bob/x", alice)
    with pytest.raises(PathOutsideWorkspace):
        await fs.put("../../x", b"x", alice)
    with pytest.raises(PathOutsideWorkspace):
        await fs.append("~/x", b"x", alice)


async def test_storage_entries_list_a_directory_or_every_file_below_it(
    fs: AbstractFilesystem, alice: Ctx
) -> None:
    await make(fs, alice, {"d/a.md": "a\n", "d/sub/b.md": "bb\n", "d/sub/deep/c.md": "c\n"})

    direct = await fs.entries("d", alice)
    assert [(e.path, e.is_dir) for e in direct] == [("d/a.md", False), ("d/sub", True)]
    assert direct[0].size == 2
    every = await fs.entries("d", alice, recursive=True)
    assert [e.path for e in every] == ["d/a.md", "d/sub/b.md", "d/sub/deep/c.md"]
    assert not any(e.is_dir for e in every)
    assert await fs.entries("missing", alice) == []
    assert await fs.entries("d/a.md", alice, recursive=True) == []  # a file lists as empty


async def test_storage_remove_and_rename(fs: AbstractFilesystem, alice: Ctx) -> None:
    await fs.put("logs/2026-01-02.md", b"- note\n", alice)
    await fs.put("logs/keep.md", b"kept\n", alice)

    await fs.rename("logs/2026-01-02.md", "logs/archive/2026-01-02.md", alice)
    assert await fs.get("logs/2026-01-02.md", alice) is None
    moved = await fs.get("logs/archive/2026-01-02.md", alice)
    assert moved is not None
    assert moved[0] == b"- note\n"
    await fs.remove("logs/archive/2026-01-02.md", alice)
    await fs.remove("logs/archive/2026-01-02.md", alice)  # missing already: not an error
    assert await fs.get("logs/archive/2026-01-02.md", alice) is None
    with pytest.raises(StorageError, match="cannot move"):
        await fs.rename("logs/gone.md", "logs/other.md", alice)
    with pytest.raises(StorageError, match="cannot delete"):
        await fs.remove("logs", alice)  # a directory


# -- isolation -------------------------------------------------------------------------------


async def test_bob_cannot_see_alice_files_through_any_operation(
    fs: AbstractFilesystem, alice: Ctx, bob: Ctx
) -> None:
    await make(fs, alice, {"private.md": "alice secret\n", "d/deep.md": "alice secret\n"})
    await fs.put("state.json", b"alice state", alice)

    read = await fs.read("private.md", ctx=bob)
    assert read.error is not None
    assert read.error.code is FsErrorCode.FILE_NOT_FOUND
    assert await listing(fs, "/", bob) == []
    assert paths(await fs.ls("d", bob)) == []
    assert paths(await fs.glob("**", ctx=bob)) == []
    assert (await fs.grep("secret", ctx=bob)).matches == []
    assert not await fs.exists("private.md", bob)
    assert not await fs.exists("d", bob)
    [download] = await fs.download(["private.md"], bob)
    assert download.content is None
    assert download.error is not None
    assert await fs.get("state.json", bob) is None
    edit = await fs.edit("private.md", "alice", "bob", ctx=bob)
    assert edit.error is not None
    assert edit.error.code is FsErrorCode.FILE_NOT_FOUND
    move = await fs.move("private.md", "mine.md", bob)
    assert move.error is not None
    assert move.error.code is FsErrorCode.FILE_NOT_FOUND
    await fs.delete("private.md", bob)

    # bob's writes of the same names land in his own namespace
    ok_write(await fs.write("private.md", "bob's own", bob))
    await fs.upload([("d/deep.md", b"bob's upload")], bob)
    await fs.put("state.json", b"bob state", bob, if_version=MISSING)
    await fs.append("state.json", b"+", bob)

    assert (await text(fs, "private.md", alice)) == "alice secret\n"
    assert (await text(fs, "d/deep.md", alice)) == "alice secret\n"
    alice_state = await fs.get("state.json", alice)
    assert alice_state is not None
    assert alice_state[0] == b"alice state"
    assert (await text(fs, "private.md", bob)) == "bob's own"
    bob_state = await fs.get("users/bob/state.json", None)
    assert bob_state is not None
    assert bob_state[0] == b"bob state+"


async def test_bob_cannot_climb_into_alice(fs: AbstractFilesystem, alice: Ctx, bob: Ctx) -> None:
    await make(fs, alice, {"private.md": "alice secret"})
    for path in ("../alice/private.md", "/../alice/private.md", "../../users/alice/private.md"):
        result = await fs.read(path, ctx=bob)
        assert result.data is None, path
        assert result.error is not None, path
        assert result.error.code in (FsErrorCode.INVALID_PATH, FsErrorCode.PERMISSION_DENIED)
    assert paths(await fs.glob("**", ctx=bob)) == []


async def test_a_call_without_a_user_cannot_see_users(
    fs: AbstractFilesystem, alice: Ctx, nouser: Ctx
) -> None:
    await make(fs, alice, {"private.md": "alice secret\n"})
    await make(fs, nouser, {"shared.md": "shared\n"})

    assert await listing(fs, "/", nouser) == ["shared.md"]
    assert paths(await fs.glob("**", ctx=nouser)) == ["shared.md"]
    assert paths(await fs.glob("**/*.md", ctx=nouser)) == ["shared.md"]
    assert (await fs.grep("secret", ctx=nouser)).matches == []
    assert not await fs.exists("users", nouser)
    assert not await fs.exists("users/alice/private.md", nouser)
    refused = [
        (await fs.read("users/alice/private.md", ctx=nouser)).error,
        (await fs.ls("users", nouser)).error,
        (await fs.ls("/users/alice", nouser)).error,
        (await fs.write("users/alice/evil.md", "x", nouser)).error,
        (await fs.edit("users/alice/private.md", "alice", "x", ctx=nouser)).error,
        (await fs.delete("users/alice/private.md", nouser)).error,
        (await fs.move("users/alice/private.md", "stolen.md", nouser)).error,
        (await fs.upload([("users/alice/private.md", b"x")], nouser))[0].error,
        (await fs.download(["users/alice/private.md"], nouser))[0].error,
        (await fs.grep("secret", "users", ctx=nouser)).error,
        (await fs.glob("**", "users", ctx=nouser)).error,
    ]
    for error in refused:
        assert error is not None
        assert error.code in (FsErrorCode.INVALID_PATH, FsErrorCode.PERMISSION_DENIED)
    with pytest.raises(PathOutsideWorkspace):
        await fs.get("users/alice/private.md", nouser)
    with pytest.raises(PathOutsideWorkspace):
        await fs.put("users/alice/private.md", b"x", nouser)
    with pytest.raises(PathOutsideWorkspace):
        await fs.append("users/alice/private.md", b"x", nouser)
    assert (await text(fs, "private.md", alice)) == "alice secret\n"
    assert not await fs.exists("stolen.md", nouser)


async def test_the_harness_reaches_each_namespace_by_its_own_path(
    fs: AbstractFilesystem, alice: Ctx, bob: Ctx, nouser: Ctx
) -> None:
    """``ctx=None`` reaches every namespace, each through a path that names it.

    A walk of the shared root stays in the shared root (``users/`` is not part of it), so no
    operation of the harness on one namespace can run into another's files.
    """
    await make(fs, alice, {"a.md": "a"})
    await make(fs, bob, {"b.md": "b"})
    await make(fs, nouser, {"shared.md": "s"})
    assert paths(await fs.glob("**", ctx=None)) == ["shared.md"]
    assert paths(await fs.glob("**", "users/alice", ctx=None)) == ["users/alice/a.md"]
    assert paths(await fs.ls("users", None)) == ["users/alice", "users/bob"]
    assert (await text(fs, "users/bob/b.md", None)) == "b"


async def test_a_user_id_that_looks_like_a_path_stays_in_its_namespace(
    fs: AbstractFilesystem,
) -> None:
    evil = RuntimeContext(user_id="../alice")
    await make(fs, evil, {"x.md": "evil"})
    assert paths(await fs.ls("users", None)) == ["users/%2E%2E%2Falice"]
    assert (await text(fs, "users/%2E%2E%2Falice/x.md", None)) == "evil"
    assert not await fs.exists("users/alice/x.md", None)
