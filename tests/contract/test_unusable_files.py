"""Something that is not a usable file, where a file belongs, costs one answer and no thread.

A FIFO made where ``MEMORY.md`` belongs used to hold a worker thread forever in ``open`` (a
handful of them starved every other user), and a sparse file of 600 MB was read whole into
memory. Now every file is opened without waiting and must be a regular one, and every read has
a limit: each operation of every kind answers at once, with an error that says what is there.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.context import RuntimeContext
from harness.errors import StorageError, UnusableFile
from harness.filesystem import LocalFilesystem
from harness.tools import FilesystemTools
from harness.workspace import WorkspaceManager

ALICE = RuntimeContext(user_id="alice", session_id="s")
SPARSE = 600 * 1024 * 1024


def _make(kind: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "sparse":
        with path.open("wb") as handle:
            handle.truncate(SPARSE)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()


Operation = Callable[[LocalFilesystem, FilesystemTools, str], Awaitable[Any]]

_STORAGE: dict[str, Operation] = {
    "get": lambda fs, _, p: fs.get(f"users/alice/{p}"),
    "append": lambda fs, _, p: fs.append(f"users/alice/{p}", b"x\n"),
    "put": lambda fs, _, p: fs.put(f"users/alice/{p}", b"x\n"),
}
_TOOLS: dict[str, Operation] = {
    "read_file": lambda _, tools, p: tools.read_file(p, ALICE),
    "edit_file": lambda _, tools, p: tools.edit_file(p, "a", "b", ALICE),
    "grep_files": lambda _, tools, p: tools.grep_files("x", ALICE),
    "glob_files": lambda _, tools, p: tools.glob_files("**", ALICE),
    "list_files": lambda _, tools, p: tools.list_files(ctx=ALICE),
}


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["fifo", "directory", "sparse", "socket"]),
    where=st.sampled_from(["MEMORY.md", "memory/2026-01-01.md", ".MEMORY.md.lock"]),
    operation=st.sampled_from(sorted({**_STORAGE, **_TOOLS})),
)
async def test_every_operation_answers_at_once(
    tmp_path_factory: pytest.TempPathFactory, kind: str, where: str, operation: str
) -> None:
    root = tmp_path_factory.mktemp("unusable") / "ws"
    _make(kind, root / "users" / "alice" / where)
    fs = LocalFilesystem(root)
    tools = FilesystemTools(fs)
    target = "MEMORY.md" if where.endswith(".lock") else where  # a lock file is in the way
    run = {**_STORAGE, **_TOOLS}[operation]
    try:
        async with asyncio.timeout(30):  # a thread stuck in open() would never answer
            answer = await run(fs, tools, target)
    except UnusableFile:
        assert operation in _STORAGE
    except StorageError:  # put onto a directory's place, say: refused, not stuck
        assert operation in _STORAGE
    else:
        if isinstance(answer, str):
            assert "Traceback" not in answer
    await fs.aclose()


async def test_a_fifo_is_not_read_by_the_text_readers(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _make("fifo", root / "users" / "alice" / "MEMORY.md")
    workspace = WorkspaceManager(root)
    async with asyncio.timeout(30):
        assert await workspace.read_own("MEMORY.md", "alice") is None
    assert "FIFO" in workspace.unusable_in("alice")["MEMORY.md"]


async def test_a_sparse_file_is_refused_unread(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _make("sparse", root / "users" / "alice" / "MEMORY.md")
    fs = LocalFilesystem(root)
    with pytest.raises(UnusableFile, match="over the limit"):
        await fs.get("users/alice/MEMORY.md")
    answer = await FilesystemTools(fs).read_file("MEMORY.md", ALICE)
    assert answer.startswith("Error:")
    assert "over the limit" in answer
