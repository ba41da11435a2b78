from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.errors import PathOutsideWorkspace, WorkspaceError
from harness.filesystem.local import LocalFilesystem
from harness.workspace import WorkspaceManager, init_workspace
from harness.workspace.manager import atomic_write


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


async def test_the_backend_is_the_only_storage(workspace: Path, tmp_path: Path) -> None:
    # Every read and write goes to the backend; the local directory is only the index's home.
    elsewhere = tmp_path / "elsewhere"
    (workspace / "AGENTS.md").write_text("local, ignored")
    manager = WorkspaceManager(workspace, LocalFilesystem(elsewhere))
    assert await manager.read_text("AGENTS.md") == ""
    await manager.write_text("AGENTS.md", "remote")
    await manager.append_text("memory/today.md", "- a fact\n", user_id="u")
    assert (elsewhere / "AGENTS.md").read_text() == "remote"
    assert (elsewhere / "users" / "u" / "memory" / "today.md").read_text() == "- a fact\n"
    assert (workspace / "AGENTS.md").read_text() == "local, ignored"
    assert await manager.read_text("AGENTS.md", user_id="u") == "remote"
    assert not manager.is_local


async def test_a_change_on_disk_is_read_at_once(workspace: Path) -> None:
    path = workspace / "AGENTS.md"
    path.write_text("one")
    manager = WorkspaceManager(workspace)
    assert manager.is_local
    assert await manager.read_text("AGENTS.md") == "one"
    path.write_text("two")
    assert await manager.read_text("AGENTS.md") == "two"


async def test_update_text_loses_no_concurrent_update(workspace: Path) -> None:
    manager = WorkspaceManager(workspace)

    def add_line(n: int) -> Callable[[str], str]:
        return lambda text: text + f"{n}\n"

    await asyncio.gather(*(manager.update_text("counter.txt", add_line(n)) for n in range(30)))
    lines = (workspace / "counter.txt").read_text().splitlines()
    assert sorted(int(line) for line in lines) == list(range(30))


async def test_updates_in_one_process_take_turns_instead_of_retrying(workspace: Path) -> None:
    """Fifty concurrent updates of one file each run their transform once: no lost CAS race."""
    manager = WorkspaceManager(workspace)
    runs = 0

    def add_line(n: int) -> Callable[[str], str]:
        def transform(text: str) -> str:
            nonlocal runs
            runs += 1
            return text + f"{n}\n"

        return transform

    await asyncio.gather(
        *(manager.update_text("index.json", add_line(n), user_id="u") for n in range(50))
    )
    lines = (workspace / "users" / "u" / "index.json").read_text().splitlines()
    assert sorted(int(line) for line in lines) == list(range(50))
    assert runs == 50
    assert len(manager._updating) == 0  # the locks go with their last user


async def test_replace_text_refuses_when_the_file_changed(workspace: Path) -> None:
    manager = WorkspaceManager(workspace)
    assert await manager.replace_text("MEMORY.md", "v1", expected="")
    assert not await manager.replace_text("MEMORY.md", "v2", expected="")
    assert await manager.replace_text("MEMORY.md", "v2", expected="v1")
    assert (workspace / "MEMORY.md").read_text() == "v2"


async def test_read_refuses_escaping_paths(workspace: Path) -> None:
    with pytest.raises(PathOutsideWorkspace):
        await WorkspaceManager(workspace).read_text("../outside.md")


async def test_list_files_merges_user_and_shared(workspace: Path) -> None:
    (workspace / "knowledge" / "sub").mkdir(parents=True)
    (workspace / "knowledge" / "a.md").write_text("a")
    (workspace / "knowledge" / "sub" / "b.md").write_text("b")
    (workspace / "users" / "u" / "knowledge").mkdir(parents=True)
    (workspace / "users" / "u" / "knowledge" / "mine.md").write_text("m")
    (workspace / "users" / "u" / "knowledge" / "a.md").write_text("u's a")
    manager = WorkspaceManager(workspace)
    assert await manager.list_files("knowledge", user_id="u") == [
        "knowledge/a.md",
        "knowledge/mine.md",
        "knowledge/sub/b.md",
    ]
    assert await manager.list_files("knowledge") == ["knowledge/a.md", "knowledge/sub/b.md"]
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


async def test_only_writes_to_prompt_files_count_and_in_their_namespace(workspace: Path) -> None:
    manager = WorkspaceManager(workspace)
    manager.watch("notes/TEAM.md")
    await manager.write_text("agents/bot/context/s/messages.jsonl", "{}\n", "ann")
    await manager.update_text("agents/bot/sessions/sessions.json", lambda _: "{}", "ann")
    await manager.append_text("memory/2026-01-02.md", "- a fact\n", "ann")
    await manager.write_text("large_tool_results/bot/r1", "big")
    assert (manager.generation_of("ann"), manager.generation_of(None)) == (0, 0)
    await manager.update_text("MEMORY.md", lambda _: "- tea\n", "ann")
    assert (manager.generation_of("ann"), manager.generation_of("bob")) == (1, 0)
    assert manager.generation_of(None) == 0
    await manager.write_text("knowledge/guide.md", "text")  # shared: every user reads it
    await manager.write_text("notes/TEAM.md", "team", "bob")
    assert (manager.generation_of("ann"), manager.generation_of("bob")) == (2, 2)
    await manager.move("knowledge/guide.md", "archive/guide.md")
    assert manager.generation_of(None) == 2
    assert manager.generation == 4  # every namespace
