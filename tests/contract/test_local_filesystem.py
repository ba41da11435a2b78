"""What only the local backend does: where files land on disk, its limits, links, locks."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.context import RuntimeContext
from harness.errors import StorageError
from harness.filesystem import FsErrorCode, IsolationScope, LocalFilesystem
from harness.workspace import WorkspaceManager

ALICE = RuntimeContext(session_id="s1", user_id="alice")
NOUSER = RuntimeContext(session_id="s1")


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


async def files(root: Path) -> dict[str, bytes]:
    return await asyncio.to_thread(_files, root)


async def test_files_land_in_the_callers_namespace_on_disk(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path / "ws")
    await fs.write("/notes/a.md", "alice", ALICE)
    await fs.write("notes/a.md", "shared", NOUSER)
    await fs.upload([("users/bob/b.md", b"harness")], None)
    await fs.put("memory/2026-01-02.md", b"day", ALICE)
    await fs.append("log.jsonl", b"{}\n", RuntimeContext(user_id="a b/c"))
    assert await files(tmp_path / "ws") == {
        "notes/a.md": b"shared",
        "users/a%20b%2Fc/log.jsonl": b"{}\n",
        "users/alice/memory/2026-01-02.md": b"day",
        "users/alice/notes/a.md": b"alice",
        "users/bob/b.md": b"harness",
    }


@pytest.mark.parametrize(
    ("scope", "ctx", "lands_at"),
    [
        (
            IsolationScope.SESSION,
            RuntimeContext(session_id="s/1", user_id="alice"),
            "sessions/s%2F1/f",
        ),
        (IsolationScope.SESSION, RuntimeContext(user_id="alice"), "f"),
        (
            IsolationScope.AGENT,
            RuntimeContext(session_id="s1", user_id="alice", agent="bot"),
            "agents/bot/files/f",
        ),
        (IsolationScope.GLOBAL, ALICE, "f"),
        (IsolationScope.USER, ALICE, "users/alice/f"),
        (IsolationScope.USER, None, "f"),
    ],
)
async def test_the_scope_picks_the_namespace(
    tmp_path: Path, scope: IsolationScope, ctx: RuntimeContext | None, lands_at: str
) -> None:
    fs = LocalFilesystem(tmp_path, scope=scope)
    assert fs.scope is scope
    await fs.write("f", "x", ctx)
    assert await files(tmp_path) == {lands_at: b"x"}


async def test_a_root_with_a_tilde_is_under_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    fs = LocalFilesystem("~/ws")
    assert fs.root == tmp_path / "ws"
    await fs.write("a", "a", None)
    assert await files(tmp_path / "ws") == {"a": b"a"}


def test_bad_configuration_is_refused_with_the_field_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_file_bytes must be positive, got 0"):
        LocalFilesystem(tmp_path, max_file_bytes=0)
    with pytest.raises(TypeError, match="max_file_bytes must be an int"):
        LocalFilesystem(tmp_path, max_file_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="root must be a directory path"):
        LocalFilesystem("")
    with pytest.raises(ValueError, match="'bogus' is not a valid IsolationScope"):
        LocalFilesystem(tmp_path, scope="bogus")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["pic.png", "PIC.PNG", "doc.pdf", "a.zip", "lib.so"])
async def test_binary_extensions_read_as_base64_whatever_their_bytes(
    tmp_path: Path, name: str
) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.upload([(name, b"plain ascii")], ALICE)
    result = await fs.read(name, ctx=ALICE)
    assert result.data is not None
    assert result.data.encoding == "base64"
    assert base64.b64decode(result.data.content) == b"plain ascii"
    assert (await fs.grep("plain", ctx=ALICE)).matches == []
    assert (await fs.edit(name, "plain", "x", ctx=ALICE)).error is not None


async def test_an_svg_or_a_text_file_is_text(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.upload([("a.svg", b"<svg/>"), ("pdf.txt", b"text")], ALICE)
    for name in ("a.svg", "pdf.txt"):
        result = await fs.read(name, ctx=ALICE)
        assert result.data is not None
        assert result.data.encoding == "utf-8"


async def test_files_over_the_limit_are_not_read_edited_or_searched(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path, max_file_bytes=100)
    await fs.write("exact.txt", "x" * 99 + "\n", ALICE)
    await fs.write("big.txt", "x" * 100 + "\n", ALICE)
    assert (await fs.read("exact.txt", ctx=ALICE)).error is None
    for result in (
        (await fs.read("big.txt", ctx=ALICE)).error,
        (await fs.edit("big.txt", "x", "y", replace_all=True, ctx=ALICE)).error,
    ):
        assert result is not None
        assert result.code is FsErrorCode.TOO_LARGE
        assert "101 bytes" in result.message
        assert "100" in result.message
    assert [m.path for m in (await fs.grep("xxx", ctx=ALICE)).matches] == ["exact.txt"]
    # downloads and storage reads are for the harness, not the model's context: no limit
    assert (await fs.download(["big.txt"], ALICE))[0].content == b"x" * 100 + b"\n"
    assert await fs.get("big.txt", ALICE) is not None


async def test_a_link_out_is_permission_denied_and_a_loop_invalid(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path / "ws")
    await fs.write("mine.txt", "mine", ALICE)
    ns = tmp_path / "ws" / "users" / "alice"

    def links() -> None:
        (tmp_path / "outside.txt").write_text("outside")
        (ns / "out").symlink_to(tmp_path / "outside.txt")
        (ns / "loop").symlink_to("loop")

    await asyncio.to_thread(links)
    out = await fs.read("out", ctx=ALICE)
    assert out.error is not None
    assert out.error.code is FsErrorCode.PERMISSION_DENIED
    assert "symbolic link" in out.error.message
    loop = await fs.read("loop", ctx=ALICE)
    assert loop.error is not None
    assert loop.error.code is FsErrorCode.INVALID_PATH
    assert "loop" in loop.error.message


async def test_deleting_a_link_deletes_the_link_not_its_target(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.write("target.txt", "kept", ALICE)
    await asyncio.to_thread((tmp_path / "users/alice/link").symlink_to, "target.txt")
    link = await fs.read("link", ctx=ALICE)
    assert link.data is not None
    assert link.data.content == "kept"
    assert (await fs.delete("link", ALICE)).error is None
    assert not await asyncio.to_thread(os.path.lexists, tmp_path / "users/alice/link")
    assert await files(tmp_path) == {"users/alice/target.txt": b"kept"}


async def test_a_name_over_240_bytes_is_an_invalid_path(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    result = await fs.write("é" * 120 + "a", "x", ALICE)  # 241 bytes
    assert result.error is not None
    assert result.error.code is FsErrorCode.INVALID_PATH
    assert "241 bytes" in result.error.message
    assert "limited to 240" in result.error.message
    assert (await fs.write("é" * 120, "x", ALICE)).error is None  # 240 bytes: room for a temp
    assert (await fs.edit("é" * 120, "x", "y", ctx=ALICE)).error is None


async def test_lock_and_temporary_files_are_hidden(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.write("d/a.md", "needle", ALICE)
    await fs.put("d/b.md", b"needle", ALICE, if_version="")
    await asyncio.to_thread(
        (tmp_path / "users/alice/d/.b.md.k2j4h5g6.tmp").write_text, "needle, in flight"
    )
    on_disk = sorted(p.name for p in (tmp_path / "users/alice/d").iterdir())
    assert on_disk == [".a.md.lock", ".b.md.k2j4h5g6.tmp", ".b.md.lock", "a.md", "b.md"]
    assert [e.path for e in (await fs.ls("d", ALICE)).entries] == ["d/a.md", "d/b.md"]
    assert [e.path for e in (await fs.glob("**", ctx=ALICE)).entries] == ["d/a.md", "d/b.md"]
    assert [m.path for m in (await fs.grep("needle", ctx=ALICE)).matches] == ["d/a.md", "d/b.md"]


async def test_the_version_is_the_content_sha256(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    version = await fs.put("f", b"content", ALICE)
    assert version == hashlib.sha256(b"content").hexdigest()
    assert await fs.put("g", b"content", ALICE) == version
    await fs.write("h", "", ALICE)
    got = await fs.get("h", ALICE)
    assert got == (b"", hashlib.sha256(b"").hexdigest())


async def test_two_instances_on_one_root_share_compare_and_set(tmp_path: Path) -> None:
    first, second = LocalFilesystem(tmp_path), LocalFilesystem(tmp_path)
    version = await first.put("f", b"0", ALICE)
    results = await asyncio.gather(
        first.put("f", b"first", ALICE, if_version=version),
        second.put("f", b"second", ALICE, if_version=version),
    )
    assert sum(result is not None for result in results) == 1


_WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from harness.context import RuntimeContext
    from harness.filesystem import MISSING, LocalFilesystem

    async def main() -> None:
        fs = LocalFilesystem(sys.argv[1])
        ctx = RuntimeContext(user_id="alice")
        for i in range(20):
            await fs.append("log.txt", f"{sys.argv[2]}-{i}\\n".encode(), ctx)
            while True:
                got = await fs.get("n", ctx)
                value, version = (int(got[0]), got[1]) if got else (0, MISSING)
                if await fs.put("n", str(value + 1).encode(), ctx, if_version=version):
                    break

    asyncio.run(main())
    """
)


async def test_processes_sharing_a_root_lose_no_append_and_no_update(tmp_path: Path) -> None:
    async def worker(name: str) -> int:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WORKER, str(tmp_path), name, stderr=subprocess.PIPE
        )
        _, stderr = await process.communicate()
        assert process.returncode == 0, stderr.decode()
        return process.returncode

    await asyncio.gather(*(worker(f"w{n}") for n in range(3)))
    fs = LocalFilesystem(tmp_path)
    counter = await fs.get("n", ALICE)
    assert counter is not None
    assert counter[0] == b"60"
    log = await fs.get("log.txt", ALICE)
    assert log is not None
    expected = sorted(f"w{n}-{i}\n".encode() for n in range(3) for i in range(20))
    assert sorted(log[0].splitlines(keepends=True)) == expected


async def test_edit_keeps_the_file_mode_and_crlf(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.write("run.sh", "#!/bin/sh\r\necho one\r\n", ALICE)
    script = tmp_path / "users/alice/run.sh"
    await asyncio.to_thread(script.chmod, 0o755)
    result = await fs.edit("run.sh", "#!/bin/sh\necho one", "#!/bin/sh\necho two", ctx=ALICE)
    assert result.error is None
    assert await asyncio.to_thread(script.read_bytes) == b"#!/bin/sh\r\necho two\r\n"
    assert (await asyncio.to_thread(script.stat)).st_mode & 0o777 == 0o755


async def test_edit_of_a_binary_file_is_unsupported(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.upload([("blob", b"\xff\xfeabc")], ALICE)
    result = await fs.edit("blob", "abc", "def", ctx=ALICE)
    assert result.error is not None
    assert result.error.code is FsErrorCode.UNSUPPORTED
    assert (await fs.download(["blob"], ALICE))[0].content == b"\xff\xfeabc"


async def test_edit_of_an_empty_old_string_is_refused(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.write("a.txt", "abc", ALICE)
    result = await fs.edit("a.txt", "", "x", ctx=ALICE)
    assert result.error is not None
    assert result.error.code is FsErrorCode.NO_MATCH
    assert "empty" in result.error.message


async def test_a_negative_offset_is_a_programming_error(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    with pytest.raises(ValueError, match="must not be negative, got -1 and None"):
        await fs.read("a", offset=-1, ctx=ALICE)


async def test_storage_ops_on_a_directory_raise_storage_error(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.write("d/x", "x", ALICE)
    with pytest.raises(StorageError, match=r"cannot read 'd': it is a directory"):
        await fs.get("d", ALICE)
    with pytest.raises(StorageError, match="is a directory"):
        await fs.put("d", b"x", ALICE)
    with pytest.raises(StorageError, match="is a directory"):
        await fs.append("/", b"x", ALICE)


async def test_workspace_manager_reads_what_the_backend_wrote(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.put("MEMORY.md", b"- fact\n", ALICE)
    await fs.append("memory/2026-01-02.md", b"- entry\n", ALICE)
    manager = WorkspaceManager(tmp_path)
    assert await manager.read_own("MEMORY.md", "alice") == "- fact\n"
    assert await manager.read_own("memory/2026-01-02.md", "alice") == "- entry\n"
    # and their locks are the same: the manager's compare-and-replace sees the backend's file
    assert await manager.replace_text("MEMORY.md", "- new\n", expected="- fact\n", user_id="alice")
    got = await fs.get("MEMORY.md", ALICE)
    assert got is not None
    assert got[0] == b"- new\n"


async def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path)
    await fs.write("a.txt", "a" * 100_000, ALICE)
    await fs.upload([("a.txt", b"b" * 100_000)], ALICE)
    await fs.edit("a.txt", "b" * 10, "c", ctx=ALICE)
    names = await asyncio.to_thread(os.listdir, tmp_path / "users/alice")
    assert sorted(names) == [".a.txt.lock", "a.txt"]
