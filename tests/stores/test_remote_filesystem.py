"""RemoteFilesystem: the local backend's answers, from a key-value store, under concurrency."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from harness.context import RuntimeContext
from harness.errors import PathOutsideWorkspace, StorageError
from harness.filesystem import (
    MISSING,
    AbstractFilesystem,
    IsolationScope,
    LocalFilesystem,
    RemoteFilesystem,
)
from harness.stores import InMemoryStore, RedisStore

ALICE = RuntimeContext(session_id="s1", user_id="alice")
BOB = RuntimeContext(session_id="s2", user_id="bob")
NOUSER = RuntimeContext(session_id="s3")

Step = Callable[[AbstractFilesystem], Awaitable[Any]]


def _comparable(result: Any) -> Any:
    """A result with what legitimately differs between backends (times, versions) removed."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        fields = {
            f.name: _comparable(getattr(result, f.name))
            for f in dataclasses.fields(result)
            if f.name != "modified_at"
        }
        return (type(result).__name__, fields)
    if isinstance(result, list | tuple):
        return [_comparable(item) for item in result]
    return result


async def _outcome(step: Step, fs: AbstractFilesystem) -> Any:
    try:
        return _comparable(await step(fs))
    except StorageError as exc:  # the local backend's message names the host's path
        return ("raised", type(exc).__name__)
    except Exception as exc:  # the same exception, with the same message, is part of the answer
        return ("raised", type(exc).__name__, str(exc))


SETUP: list[Step] = [
    lambda fs: fs.write("notes/a.md", "one\ntwo\r\nthree two\n", ALICE),
    lambda fs: fs.write("notes/deep/b.txt", "two\n", ALICE),
    lambda fs: fs.write("top.md", "", ALICE),
    lambda fs: fs.upload([("img/pic.png", b"\x89PNG\x00"), ("raw.dat", b"\xff\xfe")], ALICE),
    lambda fs: fs.write("shared.md", "for everyone two\n", NOUSER),
    lambda fs: fs.write("memo.md", "bob two\n", BOB),
]

STEPS: list[Step] = [
    # listing
    lambda fs: fs.ls("/", ALICE),
    lambda fs: fs.ls("notes", ALICE),
    lambda fs: fs.ls("/notes/", ALICE),
    lambda fs: fs.ls("missing", ALICE),
    lambda fs: fs.ls("top.md", ALICE),
    lambda fs: fs.ls("/", NOUSER),
    lambda fs: fs.ls("users", NOUSER),
    lambda fs: fs.ls("../x", ALICE),
    lambda fs: fs.ls("users/alice", None),
    # reading
    lambda fs: fs.read("notes/a.md", ctx=ALICE),
    lambda fs: fs.read("notes/a.md", 1, 1, ALICE),
    lambda fs: fs.read("notes/a.md", 1, 0, ALICE),
    lambda fs: fs.read("notes/a.md", 9, ctx=ALICE),
    lambda fs: fs.read("top.md", ctx=ALICE),
    lambda fs: fs.read("top.md", 3, ctx=ALICE),
    lambda fs: fs.read("img/pic.png", ctx=ALICE),
    lambda fs: fs.read("raw.dat", ctx=ALICE),
    lambda fs: fs.read("notes", ctx=ALICE),
    lambda fs: fs.read("/", ctx=ALICE),
    lambda fs: fs.read("nothing.md", ctx=ALICE),
    lambda fs: fs.read("top.md/x", ctx=ALICE),
    lambda fs: fs.read("memo.md", ctx=ALICE),
    lambda fs: fs.read("users/bob/memo.md", ctx=NOUSER),
    lambda fs: fs.read("~/x", ctx=ALICE),
    lambda fs: fs.read("a\x00b", ctx=ALICE),
    lambda fs: fs.read("x" * 300, ctx=ALICE),
    lambda fs: fs.read("notes/a.md", -1, ctx=ALICE),
    # searching
    lambda fs: fs.grep("two", ctx=ALICE),
    lambda fs: fs.grep("two", "notes", ctx=ALICE),
    lambda fs: fs.grep("two", "notes/a.md", ctx=ALICE),
    lambda fs: fs.grep("two", "/", "*.txt", ALICE),
    lambda fs: fs.grep("two", "/", "notes/*.md", ALICE),
    lambda fs: fs.grep("two", "/", "../*", ALICE),
    lambda fs: fs.grep("two", ctx=None),
    lambda fs: fs.grep("PNG", ctx=ALICE),
    lambda fs: fs.glob("**/*.md", ctx=ALICE),
    lambda fs: fs.glob("*.md", ctx=ALICE),
    lambda fs: fs.glob("/**", ctx=ALICE),
    lambda fs: fs.glob("*", "notes", ALICE),
    lambda fs: fs.glob("**/b.*", "notes", ALICE),
    lambda fs: fs.glob("*", "top.md", ALICE),
    lambda fs: fs.glob("[ab].md", "notes", ALICE),
    lambda fs: fs.glob("**/*.md", "users", None),
    # writing
    lambda fs: fs.write("top.md", "again", ALICE),
    lambda fs: fs.write("notes", "x", ALICE),
    lambda fs: fs.write("/", "x", ALICE),
    lambda fs: fs.write("top.md/below", "x", ALICE),
    lambda fs: fs.write("notes/deep/b.txt/c/d", "x", ALICE),
    lambda fs: fs.write("new/dir/file.md", "fresh", ALICE),
    lambda fs: fs.read("new/dir/file.md", ctx=ALICE),
    lambda fs: fs.edit("notes/a.md", "two", "2", ctx=ALICE),
    lambda fs: fs.edit("notes/a.md", "two", "2", replace_all=True, ctx=ALICE),
    lambda fs: fs.read("notes/a.md", ctx=ALICE),
    lambda fs: fs.edit("notes/a.md", "2\nthree", "TWO\nTHREE", ctx=ALICE),
    lambda fs: fs.read("notes/a.md", ctx=ALICE),
    lambda fs: fs.edit("notes/a.md", "absent", "x", ctx=ALICE),
    lambda fs: fs.edit("notes/a.md", "", "x", ctx=ALICE),
    lambda fs: fs.edit("raw.dat", "x", "y", ctx=ALICE),
    lambda fs: fs.edit("nothing", "x", "y", ctx=ALICE),
    lambda fs: fs.edit("notes", "x", "y", ctx=ALICE),
    lambda fs: fs.upload([("notes", b"x"), ("top.md", b"replaced"), ("../x", b"")], ALICE),
    lambda fs: fs.download(["top.md", "notes", "nothing", "img/pic.png", "~x"], ALICE),
    lambda fs: fs.exists("notes", ALICE),
    lambda fs: fs.exists("notes/a.md", ALICE),
    lambda fs: fs.exists("nothing", ALICE),
    lambda fs: fs.exists("../x", ALICE),
    lambda fs: fs.exists("users/bob", NOUSER),
    lambda fs: fs.move("top.md", "moved/top.md", ALICE),
    lambda fs: fs.move("top.md", "x.md", ALICE),
    lambda fs: fs.move("notes", "x", ALICE),
    lambda fs: fs.move("moved/top.md", "notes", ALICE),
    lambda fs: fs.move("moved/top.md", "raw.dat/x", ALICE),
    lambda fs: fs.move("moved/top.md", "moved/top.md", ALICE),
    lambda fs: fs.write("moved/keep.md", "k", ALICE),
    lambda fs: fs.move("moved/top.md", "raw.dat", ALICE),
    lambda fs: fs.read("raw.dat", ctx=ALICE),
    lambda fs: fs.delete("notes", ALICE),
    lambda fs: fs.delete("/", ALICE),
    lambda fs: fs.delete("nothing", ALICE),
    lambda fs: fs.write("notes/deep/c.txt", "c", ALICE),
    lambda fs: fs.delete("notes/deep/b.txt", ALICE),
    lambda fs: fs.ls("notes", ALICE),
    lambda fs: fs.ls("notes/deep", ALICE),
    lambda fs: fs.exists("notes/deep/b.txt", ALICE),
    # storage operations
    lambda fs: fs.append("log/day.md", b"- one\n", ALICE),
    lambda fs: fs.append("log/day.md", b"- two\n", ALICE),
    lambda fs: fs.read("log/day.md", ctx=ALICE),
    lambda fs: fs.append("notes", b"x", ALICE),
    lambda fs: fs.append("raw.dat/x", b"x", ALICE),
    lambda fs: fs.append("../x", b"x", ALICE),
    lambda fs: fs.get("notes", ALICE),
    lambda fs: fs.get("nothing", ALICE),
    lambda fs: fs.put("notes", b"x", ALICE),
    lambda fs: fs.put("raw.dat/y", b"x", ALICE),
    lambda fs: fs.put("fresh.md", b"x", ALICE, if_version="nonsense"),
    lambda fs: fs.ls("/", ALICE),
    lambda fs: fs.ls("/", None),
]


async def test_remote_answers_every_step_as_the_local_backend_does(tmp_path: Path) -> None:
    local = LocalFilesystem(tmp_path / "workspace")
    remote = RemoteFilesystem(InMemoryStore())
    for step in SETUP:
        assert _comparable(await step(remote)) == _comparable(await step(local))
    for number, step in enumerate(STEPS):
        expected = await _outcome(step, local)
        assert await _outcome(step, remote) == expected, f"step {number}"


async def test_a_directory_exists_while_a_file_is_in_it() -> None:
    # The one place the remote backend differs: directories are implied by keys, so the last
    # file's delete (or move) takes its directory with it, where a local one stays, empty.
    fs = RemoteFilesystem(InMemoryStore())
    await fs.write("a/b/c.md", "x", ALICE)
    assert [(e.path, e.is_dir) for e in (await fs.ls("a", ALICE)).entries] == [("a/b", True)]
    assert await fs.exists("a/b", ALICE)
    await fs.move("a/b/c.md", "d.md", ALICE)
    assert not await fs.exists("a", ALICE)
    assert (await fs.ls("/", ALICE)).entries[0].path == "d.md"


async def test_get_and_put_compare_and_set_on_the_store_version() -> None:
    fs = RemoteFilesystem(InMemoryStore())
    assert await fs.get("a.md", ALICE) is None
    assert await fs.put("a.md", b"one", ALICE, if_version="1") is None
    first = await fs.put("a.md", b"one", ALICE, if_version=MISSING)
    assert first is not None
    assert await fs.put("a.md", b"again", ALICE, if_version=MISSING) is None
    assert await fs.get("a.md", ALICE) == (b"one", first)
    second = await fs.put("a.md", b"two", ALICE, if_version=first)
    assert second is not None
    assert second != first
    assert await fs.put("a.md", b"stale", ALICE, if_version=first) is None
    assert await fs.get("a.md", ALICE) == (b"two", second)
    assert await fs.put("a.md", b"any", ALICE) not in (None, first, second)


async def test_files_are_store_items_under_the_namespace_path() -> None:
    store = InMemoryStore()
    fs = RemoteFilesystem(store, root=("app", "fs"))
    await fs.write("memory/day.md", "text", ALICE)
    await fs.upload([("pic.png", b"\x89PNG")], ALICE)
    await fs.write("AGENTS.md", "persona", None)
    keys = [item.key for item in await store.search(("app", "fs"))]
    assert keys == ["AGENTS.md", "users/alice/memory/day.md", "users/alice/pic.png"]
    item = await store.get(("app", "fs"), "users/alice/pic.png")
    assert item is not None
    assert item.value["data"] == base64.b64encode(b"\x89PNG").decode()
    assert (item.value["encoding"], item.value["size"]) == ("base64", 4)
    assert isinstance(item.value["modified_at"], float)


async def test_session_scope_keeps_each_session_apart() -> None:
    fs = RemoteFilesystem(InMemoryStore(), scope=IsolationScope.SESSION)
    await fs.write("plan.md", "alice's", ALICE)
    assert await fs.get("plan.md", BOB) is None
    assert await fs.get("sessions/s1/plan.md", None) == (b"alice's", "1")


async def test_a_path_that_escapes_raises_from_storage_operations() -> None:
    fs = RemoteFilesystem(InMemoryStore())
    with pytest.raises(PathOutsideWorkspace):
        await fs.get("../x", ALICE)
    with pytest.raises(PathOutsideWorkspace):
        await fs.put("users/bob/x", b"", NOUSER)
    with pytest.raises(PathOutsideWorkspace):
        await fs.append("~/x", b"", ALICE)


async def test_fifty_concurrent_appends_lose_no_record(redis_url: str) -> None:
    for store in (InMemoryStore(), RedisStore(redis_url, prefix=f"test-{uuid.uuid4().hex}")):
        fs = RemoteFilesystem(store)
        records = [f"record {i:02d}\n".encode() for i in range(50)]
        await asyncio.gather(*(fs.append("log.md", record, ALICE) for record in records))
        got = await fs.get("log.md", ALICE)
        assert got is not None
        assert sorted(got[0].splitlines(keepends=True)) == records
        await store.aclose()


class _AlwaysChanged(InMemoryStore):
    """A store on which some other writer always got in first."""

    async def put_if_version(
        self, namespace: tuple[str, ...], key: str, value: Any, version: int | None
    ) -> int | None:
        await super().put(namespace, key, {"data": "theirs", "encoding": "utf-8"})
        return None


async def test_an_append_that_keeps_losing_raises_instead_of_dropping_the_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("harness.filesystem.remote._BACKOFF_CAP", 0.0)
    fs = RemoteFilesystem(_AlwaysChanged())
    with pytest.raises(StorageError, match=r"could not append to 'log.md'.*try again"):
        await fs.append("log.md", b"mine\n", ALICE)
    assert await fs.get("log.md", ALICE) == (b"theirs", "100")


async def test_an_edit_retries_on_the_new_content_when_another_writer_got_in_first() -> None:
    class OneConflict(InMemoryStore):
        conflicts = 0

        async def put_if_version(
            self, namespace: tuple[str, ...], key: str, value: Any, version: int | None
        ) -> int | None:
            if not self.conflicts and version is not None:
                self.conflicts += 1
                await super().put(namespace, key, {"data": "a b other", "encoding": "utf-8"})
                return None
            return await super().put_if_version(namespace, key, value, version)

    fs = RemoteFilesystem(OneConflict())
    await fs.write("f.md", "a b", ALICE)
    result = await fs.edit("f.md", "a", "A", ctx=ALICE)
    assert result.error is None
    assert await fs.get("f.md", ALICE) == (b"A b other", "3")


async def test_a_value_that_is_not_a_file_is_a_storage_error() -> None:
    store = InMemoryStore()
    await store.put(("fs",), "users/alice/odd.md", {"something": "else"})
    fs = RemoteFilesystem(store)
    with pytest.raises(StorageError, match="is not a file"):
        await fs.get("odd.md", ALICE)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"root": ()}, ValueError),
        ({"root": ("fs", "")}, ValueError),
        ({"max_file_bytes": 0}, ValueError),
        ({"max_file_bytes": 1.5}, TypeError),
    ],
)
def test_bad_configuration_is_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        RemoteFilesystem(InMemoryStore(), **kwargs)


def test_a_store_that_is_not_a_store_is_refused() -> None:
    with pytest.raises(TypeError, match="BaseStore"):
        RemoteFilesystem({})  # type: ignore[arg-type]
