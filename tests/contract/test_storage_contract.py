"""The storage contract is enough on its own: a backend of its six methods and nothing else.

:class:`DictStorage` keeps files in a dict and implements only
:class:`~harness.filesystem.Storage` (no ``ls``, ``read``, ``glob``...). The workspace, its
sessions and its memory files run on it unchanged, and so does an agent without file tools,
which proves that the harness's own storage depends on nothing of the file-tool contract.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness import HarnessAgent, RuntimeContext
from harness.errors import ConfigError, StorageError, UnusableFile
from harness.filesystem import (
    MISSING,
    AbstractFilesystem,
    FileInfo,
    FileTools,
    Storage,
    Version,
    check_path,
)
from harness.kernel import Msg
from harness.models import ScriptedChatModel
from harness.session import SessionStore
from harness.workspace import WorkspaceManager


class DictStorage(Storage):
    """Files as bytes in a dict, by workspace path; a version is the content's SHA-256."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.calls: list[str] = []

    def _key(self, path: str, ctx: RuntimeContext | None) -> str:
        return check_path(path, self.scope, ctx)

    async def get(
        self, path: str, ctx: RuntimeContext | None = None, *, limit: int | None = None
    ) -> tuple[bytes, Version] | None:
        self.calls.append("get")
        key = self._key(path, ctx)
        if key not in self.files:
            return None
        data = self.files[key]
        if limit is not None and len(data) > limit:
            msg = f"{path} holds {len(data)} bytes, over {limit}"
            raise UnusableFile(msg)
        return data, hashlib.sha256(data).hexdigest()

    async def put(
        self,
        path: str,
        data: bytes,
        ctx: RuntimeContext | None = None,
        *,
        if_version: Version | None = None,
    ) -> Version | None:
        self.calls.append("put")
        key = self._key(path, ctx)
        if if_version is not None:
            current = self.files.get(key)
            found = MISSING if current is None else hashlib.sha256(current).hexdigest()
            if found != if_version:
                return None
        self.files[key] = bytes(data)
        return hashlib.sha256(data).hexdigest()

    async def append(self, path: str, data: bytes, ctx: RuntimeContext | None = None) -> None:
        self.calls.append("append")
        key = self._key(path, ctx)
        self.files[key] = self.files.get(key, b"") + bytes(data)

    async def entries(
        self, directory: str, ctx: RuntimeContext | None = None, *, recursive: bool = False
    ) -> list[FileInfo]:
        self.calls.append("entries")
        base = self._key(directory, ctx)
        prefix = f"{base}/" if base else ""
        found: dict[str, FileInfo] = {}
        for key, data in self.files.items():
            if not key.startswith(prefix):
                continue
            name, deeper, _ = key[len(prefix) :].partition("/")
            if recursive:
                found[key] = FileInfo(key, size=len(data))
            elif deeper:
                found[prefix + name] = FileInfo(prefix + name, is_dir=True)
            else:
                found[key] = FileInfo(key, size=len(data))
        return sorted(found.values(), key=lambda entry: entry.path)

    async def remove(self, path: str, ctx: RuntimeContext | None = None) -> None:
        self.calls.append("remove")
        self.files.pop(self._key(path, ctx), None)

    async def rename(self, source: str, target: str, ctx: RuntimeContext | None = None) -> None:
        self.calls.append("rename")
        key = self._key(source, ctx)
        if key not in self.files:
            msg = f"cannot move {source}: not found"
            raise StorageError(msg)
        self.files[self._key(target, ctx)] = self.files.pop(key)


ALICE = RuntimeContext(session_id="s1", user_id="alice")


@pytest.fixture
def storage() -> DictStorage:
    return DictStorage()


@pytest.fixture
def workspace(tmp_path: Path, storage: DictStorage) -> WorkspaceManager:
    return WorkspaceManager(tmp_path / "workspace", storage)


def test_the_backend_is_storage_only(storage: DictStorage) -> None:
    assert not isinstance(storage, FileTools)
    assert not isinstance(storage, AbstractFilesystem)
    assert sorted(Storage.__abstractmethods__) == [
        "append",
        "entries",
        "get",
        "put",
        "remove",
        "rename",
    ]


async def test_a_session_is_saved_and_loaded(
    workspace: WorkspaceManager, storage: DictStorage
) -> None:
    history = [Msg(role="user", content="hi"), Msg(role="assistant", content="hello")]
    await SessionStore(workspace, "bot").save(ALICE, history)

    assert await SessionStore(workspace, "bot").load(ALICE) == history
    assert "users/alice/agents/bot/context/s1/messages.jsonl" in storage.files


async def test_a_grown_session_is_appended_and_loaded_whole(
    workspace: WorkspaceManager, storage: DictStorage
) -> None:
    sessions = SessionStore(workspace, "bot")
    first = [Msg(role="user", content="one")]
    await sessions.save(ALICE, first, exclusive=True)
    grown = [*first, Msg(role="assistant", content="two"), Msg(role="user", content="three")]
    await sessions.save(ALICE, grown, exclusive=True)

    assert storage.calls.count("append") == 1  # the second save only appended
    assert await SessionStore(workspace, "bot").load(ALICE) == grown


async def test_memory_files_are_read_listed_archived_and_deleted(
    workspace: WorkspaceManager, storage: DictStorage
) -> None:
    storage.files["AGENTS.md"] = b"shared rules\n"
    storage.files["users/alice/MEMORY.md"] = b"alice likes tea\n"
    await workspace.append_text("memory/2026-01-02.md", "- a note\n", "alice")
    await workspace.append_text("memory/2026-01-03.md", "- another\n", "alice")

    read = await workspace.read_first(["AGENTS.md", "MEMORY.md"], "alice")
    assert {name: (found.path, found.text) for name, found in read.items()} == {
        "AGENTS.md": ("AGENTS.md", "shared rules\n"),  # the shared copy, alice has none
        "MEMORY.md": ("users/alice/MEMORY.md", "alice likes tea\n"),
    }
    logs = [info.path for info in await workspace.list_own("memory", "alice")]
    assert logs == ["memory/2026-01-02.md", "memory/2026-01-03.md"]
    assert await workspace.list_files("memory", "alice") == logs

    await workspace.move("memory/2026-01-02.md", "memory/archive/2026-01-02.md", "alice")
    await workspace.delete("memory/2026-01-03.md", "alice")

    assert await workspace.list_dirs("memory", "alice") == ["archive"]
    assert await workspace.list_own("memory", "alice") == []
    assert await workspace.read_own("memory/archive/2026-01-02.md", "alice") == "- a note\n"


async def test_a_memory_rewrite_is_compare_and_set(workspace: WorkspaceManager) -> None:
    await workspace.write_text("MEMORY.md", "old\n", "alice")

    assert not await workspace.replace_text("MEMORY.md", "new\n", expected="other", user_id="alice")
    assert await workspace.replace_text("MEMORY.md", "new\n", expected="old\n", user_id="alice")
    assert await workspace.update_text("MEMORY.md", str.upper, "alice") == "NEW\n"


async def test_an_agent_without_file_tools_runs_on_it(
    workspace: WorkspaceManager, storage: DictStorage
) -> None:
    storage.files["users/alice/MEMORY.md"] = b"alice likes tea\n"
    model = ScriptedChatModel([{"text": "first"}, {"text": "second"}])
    agent = HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        filesystem_tools=False,
        tool_result_eviction=None,
    )
    try:
        await agent.call("hi", ctx=ALICE)
        await agent.call("again", ctx=ALICE)
    finally:
        await agent.aclose()

    saved = await SessionStore(workspace, agent.name).load(ALICE)
    assert [(m.role, m.text) for m in saved] == [
        ("user", "hi"),
        ("assistant", "first"),
        ("user", "again"),
        ("assistant", "second"),
    ]
    assert "alice likes tea" in model.requests[0][0].text  # MEMORY.md reached the prompt


async def test_an_agent_asked_for_file_tools_says_the_backend_has_none(
    workspace: WorkspaceManager,
) -> None:
    with pytest.raises(ConfigError, match="DictStorage offers no file tools"):
        HarnessAgent(model=ScriptedChatModel([]), workspace=workspace, memory=None)
