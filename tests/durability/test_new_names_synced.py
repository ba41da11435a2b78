"""A durable write names what it created on the disk: its file and every directory it made.

A new file or directory reaches the disk with the directory that names it, and only when that
directory is synced (POSIX: an ``fsync`` of the file is not enough). So a session's first step
synced with ``session_fsync``, a ``put`` into new directories, an approval recorded in a new
ledger, an API key handed out, each said saved, could vanish whole in a power loss: the bytes
on the disk, the name pointing to them not. No power is cut here; the property is checked on
what the code asks of the kernel: every name an operation creates (a directory made, a file
created, a rename onto a name) is followed, before the operation returns, by an ``fsync`` of
the directory holding it.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.filesystem import LocalFilesystem
from harness.serve.keys import add_key
from harness.workspace import atomic_write
from harness.workspace.ledger import FileLedger

Identity = tuple[int, int]


class Journal:
    """What the code under test asks the kernel: names created, directories and files synced."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, Identity, str]] = []
        self.on = False
        real_open, real_mkdir, real_replace, real_fsync = os.open, os.mkdir, os.replace, os.fsync

        def opened(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
            new = bool(flags & os.O_CREAT) and not _exists(path, dir_fd) and _named(path)
            fd = real_open(path, flags, mode, dir_fd=dir_fd)
            if new:
                self._made(path, dir_fd)
            return fd

        def made(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
            real_mkdir(path, mode, dir_fd=dir_fd)
            self._made(path, dir_fd)

        def renamed(src: Any, dst: Any, *, src_dir_fd: Any = None, dst_dir_fd: Any = None) -> None:
            real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
            self._made(dst, dst_dir_fd)

        def synced(fd: int) -> None:
            real_fsync(fd)
            if self.on:
                self.events.append(("synced", _identity(os.fstat(fd)), ""))

        monkeypatch.setattr(os, "open", opened)
        monkeypatch.setattr(os, "mkdir", made)
        monkeypatch.setattr(os, "replace", renamed)
        monkeypatch.setattr(os, "fsync", synced)

    def _made(self, path: Any, dir_fd: int | None) -> None:
        if not self.on:
            return
        if dir_fd is None:
            where = Path(os.fsdecode(path)).absolute()
        else:
            where = Path(os.readlink(f"/proc/self/fd/{dir_fd}")) / os.fsdecode(path)
        self.events.append(("made", _identity(os.stat(where.parent)), str(where)))

    def unsynced(self) -> list[str]:
        """The names created that no later ``fsync`` of their directory put on the disk."""
        return [
            name
            for index, (kind, directory, name) in enumerate(self.events)
            if kind == "made" and ("synced", directory, "") not in self.events[index + 1 :]
        ]


def _identity(found: os.stat_result) -> Identity:
    return (found.st_dev, found.st_ino)


def _exists(path: Any, dir_fd: int | None) -> bool:
    try:
        os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _named(path: Any) -> bool:
    """Whether a name created matters: not a lock's sidecar, not a temporary file (renamed)."""
    name = Path(os.fsdecode(path)).name
    return not (name.startswith(".") and name.endswith((".lock", ".tmp")))


# -- every durable write of the local disk, on a path of any depth --------------------------------

Write = Callable[[Path, list[str]], Coroutine[Any, Any, None]]


async def _put(root: Path, parts: list[str]) -> None:
    await LocalFilesystem(root).put("/".join([*parts, "f.txt"]), b"saved")


async def _held_append_synced(root: Path, parts: list[str]) -> None:
    appender = LocalFilesystem(root).appender("/".join([*parts, "messages.jsonl"]))
    try:
        await appender.append(b"{}\n")
        await appender.sync()
    finally:
        await appender.aclose()


async def _held_write_with_state(root: Path, parts: list[str]) -> None:
    """A session's first step with ``session_fsync``: messages appended, state replaced, synced."""
    appender = LocalFilesystem(root).appender("/".join([*parts, "messages.jsonl"]))
    try:
        await appender.write(b"{}\n", replace={"state.json": b"{}"}, sync_append=True)
    finally:
        await appender.aclose()


async def _append_then_sync(root: Path, parts: list[str]) -> None:
    storage = LocalFilesystem(root)
    await storage.append("/".join([*parts, "log.jsonl"]), b"{}\n")
    await storage.sync("/".join([*parts, "log.jsonl"]))


async def _tool_write(root: Path, parts: list[str]) -> None:
    await LocalFilesystem(root).write("/".join([*parts, "notes.md"]), "saved")


async def _ledger_record(root: Path, parts: list[str]) -> None:
    ledger = FileLedger(root.joinpath(*parts), kind="approvals")
    await ledger.change("s", lambda records: [{"decision": "approve", "id": "1"}])


async def _operator_file(root: Path, parts: list[str]) -> None:
    await asyncio.to_thread(atomic_write, root.joinpath(*parts, "HEARTBEAT.md"), b"saved")


async def _key_added(root: Path, parts: list[str]) -> None:
    await asyncio.to_thread(add_key, root.joinpath(*parts, "keys"), "alice")


WRITES: list[Write] = [
    _put,
    _held_append_synced,
    _held_write_with_state,
    _append_then_sync,
    _tool_write,
    _ledger_record,
    _operator_file,
    _key_added,
]


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    write=st.sampled_from(WRITES),
    parts=st.lists(st.sampled_from(["a", "b", "users", "context"]), max_size=4),
    existing=st.integers(min_value=0, max_value=5),
)
def test_a_durable_write_names_everything_it_created_on_the_disk(
    monkeypatch: pytest.MonkeyPatch, write: Write, parts: list[str], existing: int
) -> None:
    journal = Journal(monkeypatch)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        # The root and the first ``existing - 1`` directories are there already (0: none is).
        if existing:
            root.joinpath(*parts[: existing - 1]).mkdir(parents=True)
        journal.on = True
        asyncio.run(write(root, parts))
        journal.on = False
        assert [kind for kind, *_ in journal.events].count("made") >= 1
        assert journal.unsynced() == []


def test_a_new_sessions_first_synced_step_names_its_file_and_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The case behind the class: ``session_fsync`` on a session nobody saved before."""
    from harness import HarnessAgent
    from harness.context import RuntimeContext
    from harness.models import ScriptedChatModel

    journal = Journal(monkeypatch)

    async def run() -> None:
        async with HarnessAgent(
            model=ScriptedChatModel([{"text": "done"}]),
            workspace=tmp_path / "ws",
            memory=None,
            session_fsync="step",
        ) as agent:
            journal.on = True
            await agent.call("hello", ctx=RuntimeContext(session_id="new", user_id="u1"))
            journal.on = False

    asyncio.run(run())
    (messages,) = (tmp_path / "ws").rglob("messages.jsonl")
    session = [str(p) for p in (messages, messages.parent / "state.json", *messages.parents)]
    made = [name for kind, _, name in journal.events if kind == "made"]
    assert str(messages) in made  # a new session,
    assert str(messages.parent) in made  # in a new directory
    assert [name for name in journal.unsynced() if name in session] == []
