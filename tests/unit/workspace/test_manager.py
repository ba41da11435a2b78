from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from harness.errors import PathOutsideWorkspace, WorkspaceError
from harness.workspace import WorkspaceManager, init_workspace
from harness.workspace.manager import atomic_write


class MemoryBackend:
    """A first read layer held in a dict, standing in for a remote or sandbox backend."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.reads: list[str] = []

    async def read_text(self, path: str) -> str | None:
        self.reads.append(path)
        return self.files.get(path)

    async def list_files(self, directory: str) -> list[str]:
        return [p for p in self.files if p.startswith(directory.rstrip("/") + "/")]


async def test_missing_file_reads_as_empty(workspace: Path) -> None:
    assert await WorkspaceManager(workspace).read_text("AGENTS.md") == ""


async def test_user_copy_wins_over_shared(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("shared")
    manager = WorkspaceManager(workspace)
    assert await manager.read_text("AGENTS.md", user_id="alice") == "shared"
    (workspace / "users" / "alice").mkdir(parents=True)
    (workspace / "users" / "alice" / "AGENTS.md").write_text("alice's own")
    assert await manager.read_text("AGENTS.md", user_id="alice") == "alice's own"
    assert await manager.read_text("AGENTS.md", user_id="bob") == "shared"
    assert await manager.read_text("AGENTS.md") == "shared"


async def test_backend_is_read_before_local_disk(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("local")
    (workspace / "MEMORY.md").write_text("local memory")
    backend = MemoryBackend({"AGENTS.md": "remote", "users/u/MEMORY.md": ""})
    manager = WorkspaceManager(workspace, backend)
    found = await manager.read_first(["AGENTS.md", "MEMORY.md"], user_id="u")
    assert found["AGENTS.md"].text == "remote"
    assert found["AGENTS.md"].path == "AGENTS.md"
    # an empty backend answer falls through to the next layer, as in the original
    assert found["MEMORY.md"].text == "local memory"
    assert backend.reads == ["users/u/AGENTS.md", "AGENTS.md", "users/u/MEMORY.md", "MEMORY.md"]


async def test_changed_file_is_read_again_unchanged_is_cached(workspace: Path) -> None:
    path = workspace / "AGENTS.md"
    path.write_text("one")
    manager = WorkspaceManager(workspace)
    assert await manager.read_text("AGENTS.md") == "one"
    stat = path.stat()
    # Same size and timestamps: the cached text is served, so an unchanged file is not re-read.
    path.write_text("two")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert await manager.read_text("AGENTS.md") == "one"
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert await manager.read_text("AGENTS.md") == "two"


async def test_reads_run_off_the_event_loop_thread(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "AGENTS.md").write_text("x")
    manager = WorkspaceManager(workspace)
    threads: list[int] = []
    original = manager._read_local

    def spy(*args: object, **kwargs: object) -> object:
        threads.append(threading.get_ident())
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manager, "_read_local", spy)
    await manager.read_text("AGENTS.md")
    assert threads
    assert threads[0] != threading.get_ident()


async def test_read_refuses_escaping_paths(workspace: Path) -> None:
    with pytest.raises(PathOutsideWorkspace):
        await WorkspaceManager(workspace).read_text("../outside.md")


async def test_list_files_merges_user_shared_and_backend(workspace: Path) -> None:
    (workspace / "knowledge" / "sub").mkdir(parents=True)
    (workspace / "knowledge" / "a.md").write_text("a")
    (workspace / "knowledge" / "sub" / "b.md").write_text("b")
    (workspace / "users" / "u" / "knowledge").mkdir(parents=True)
    (workspace / "users" / "u" / "knowledge" / "mine.md").write_text("m")
    backend = MemoryBackend({"knowledge/remote.md": "r"})
    manager = WorkspaceManager(workspace, backend)
    assert await manager.list_files("knowledge", user_id="u") == [
        "knowledge/a.md",
        "knowledge/mine.md",
        "knowledge/remote.md",
        "knowledge/sub/b.md",
    ]
    assert await manager.list_files("knowledge") == [
        "knowledge/a.md",
        "knowledge/remote.md",
        "knowledge/sub/b.md",
    ]
    assert await manager.list_files("nothing-here") == []


def test_check_creates_missing_workspace(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b"
    WorkspaceManager(root).check()
    assert root.is_dir()


def test_check_rejects_a_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(WorkspaceError, match="is not a directory"):
        WorkspaceManager(path).check()


def test_check_rejects_uncreatable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(WorkspaceError, match="cannot create workspace"):
        WorkspaceManager(tmp_path / "file" / "ws").check()


def test_init_workspace_creates_skeleton_once(workspace: Path) -> None:
    created = init_workspace(workspace)
    assert created == [
        "memory/",
        "skills/",
        "subagents/",
        "AGENTS.md",
        "MEMORY.md",
        "knowledge/KNOWLEDGE.md",
    ]
    (workspace / "AGENTS.md").write_text("mine")
    assert init_workspace(workspace) == []
    assert (workspace / "AGENTS.md").read_text() == "mine"
    assert "<!--" in (workspace / "MEMORY.md").read_text()


async def test_listing_while_another_writer_renames_temporary_files(workspace: Path) -> None:
    # atomic_write's temporary file vanishes between the listing and its stat: not an error.
    manager = WorkspaceManager(workspace)
    stop = threading.Event()

    def write_constantly() -> None:
        while not stop.is_set():
            atomic_write(workspace / "tasks" / "record.json", b"{}")

    writer = threading.Thread(target=write_constantly)
    writer.start()
    try:
        for _ in range(300):
            await manager.list_own("tasks")  # raised FileNotFoundError before
    finally:
        stop.set()
        writer.join()
    assert [info.path for info in await manager.list_own("tasks")] == ["tasks/record.json"]
