from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

import pytest

from harness.context import RuntimeContext
from harness.kernel import History, Msg, ToolResultBlock, ToolUseBlock, drop_unanswered_tail
from harness.session import SessionFsync, SessionStore
from harness.session import store as session_store
from harness.workspace import WorkspaceManager


def store(workspace: Path) -> SessionStore:
    return SessionStore(WorkspaceManager(workspace), "bot")


CTX = RuntimeContext(session_id="s1")


def local(s: SessionStore, ctx: RuntimeContext) -> Path:
    """Where the default (local) backend keeps the session's file."""
    return s.workspace.local_path(s.path(ctx))


def msgs(*texts: str) -> list[Msg]:
    return [Msg(role="user" if i % 2 == 0 else "assistant", content=t) for i, t in enumerate(texts)]


async def test_new_session_loads_empty(workspace: Path) -> None:
    assert await store(workspace).load(CTX) == []


async def test_round_trip_and_location(workspace: Path) -> None:
    s = store(workspace)
    history = msgs("hi", "hello")
    await s.save(CTX, history)
    path = workspace / "agents" / "bot" / "context" / "s1" / "messages.jsonl"
    assert s.path(CTX) == "agents/bot/context/s1/messages.jsonl"
    assert local(s, CTX) == path.resolve()
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [
        m.id for m in history
    ]
    assert await s.load(CTX) == history


async def test_growth_is_appended_change_is_rewritten(workspace: Path) -> None:
    s = store(workspace)
    history = msgs("a", "b")
    await s.save(CTX, history)
    path = local(s, CTX)
    inode = path.stat().st_ino
    history += msgs("c", "d")
    await s.save(CTX, history)
    assert path.stat().st_ino == inode  # appended in place
    assert await s.load(CTX) == history
    history[0] = history[0].model_copy(update={"content": msgs("A")[0].content})
    await s.save(CTX, history)
    assert path.stat().st_ino != inode  # atomically replaced
    assert await s.load(CTX) == history
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


async def test_shrinking_rewrites(workspace: Path) -> None:
    s = store(workspace)
    history = msgs("a", "b", "c")
    await s.save(CTX, history)
    await s.save(CTX, history[:1])
    assert await s.load(CTX) == history[:1]


async def test_a_corrupt_line_is_quarantined_with_file_and_line(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = store(workspace)
    history = msgs("a", "b", "c")
    await s.save(CTX, history)
    path = local(s, CTX)
    lines = path.read_text().splitlines()
    lines[1] = '{"role": "assistant", "content": [{"type": "te'
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING):
        loaded = await s.load(CTX)
    assert loaded == [history[0], history[2]]
    assert f"{s.path(CTX)}:2: a line that cannot be read" in caplog.text
    assert "is kept in agents/bot/context/s1/quarantine.jsonl" in caplog.text
    (kept,) = (path.parent / "quarantine.jsonl").read_text().splitlines()
    assert json.loads(kept)["text"] == lines[1]
    assert json.loads(kept)["line"] == 2
    await s.save(CTX, loaded)
    assert await s.load(CTX) == loaded
    assert len(path.read_text().splitlines()) == 2
    assert len((path.parent / "quarantine.jsonl").read_text().splitlines()) == 1


async def test_torn_last_line_is_replaced_on_next_save(workspace: Path) -> None:
    s = store(workspace)
    history = msgs("a", "b")
    await s.save(CTX, history)
    path = local(s, CTX)
    with path.open("a") as handle:
        handle.write('{"id": "half')
    loaded = await s.load(CTX)
    assert loaded == history
    loaded += msgs("c")
    await s.save(CTX, loaded)
    assert await s.load(CTX) == loaded


async def test_users_and_sessions_are_separate(workspace: Path) -> None:
    s = store(workspace)
    alice = RuntimeContext(session_id="s1", user_id="alice")
    bob = RuntimeContext(session_id="s1", user_id="bob")
    await s.save(alice, msgs("alice here"))
    await s.save(bob, msgs("bob here"))
    await s.save(RuntimeContext(session_id="s2", user_id="alice"), msgs("other session"))
    assert [m.text for m in await s.load(alice)] == ["alice here"]
    assert [m.text for m in await s.load(bob)] == ["bob here"]
    assert local(s, alice).is_relative_to((workspace / "users" / "alice").resolve())


async def test_odd_session_ids_stay_inside(workspace: Path) -> None:
    s = store(workspace)
    ctx = RuntimeContext(session_id="../../escape")
    await s.save(ctx, msgs("x"))
    context_dir = workspace.resolve() / "agents" / "bot" / "context"
    assert local(s, ctx).is_relative_to(context_dir)
    assert await s.load(ctx) == await s.load(RuntimeContext(session_id="../../escape"))


async def test_concurrent_saves_leave_a_whole_file(workspace: Path) -> None:
    s = store(workspace)
    base = msgs("a", "b")
    versions = [base + msgs(f"turn {i}") for i in range(20)]
    await asyncio.gather(*(s.save(CTX, v) for v in versions))
    loaded = await s.load(CTX)
    assert loaded in versions


def test_session_id_is_required(workspace: Path) -> None:
    with pytest.raises(ValueError, match="session id"):
        store(workspace).path(RuntimeContext())


def _call(*ids: str) -> Msg:
    return Msg(role="assistant", content=[ToolUseBlock(id=i, name="t") for i in ids])


def _result(call_id: str) -> Msg:
    return Msg.tool_result(ToolResultBlock(id=call_id, name="t", output="ok"))


def test_drop_unanswered_tail() -> None:
    user = Msg(role="user", content="go")
    done = [user, _call("1"), _result("1")]
    assert drop_unanswered_tail(done) == done
    assert drop_unanswered_tail([user, _call("1", "2"), _result("1")]) == [user]
    assert drop_unanswered_tail([*done, _call("3")]) == done
    reply = Msg(role="assistant", content="fine")
    assert drop_unanswered_tail([*done, reply]) == [*done, reply]
    assert drop_unanswered_tail([user]) == [user]
    assert drop_unanswered_tail([]) == []


async def test_a_growing_history_is_appended_without_comparing_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step's save used to compare the whole history with the saved one; a History the
    store saved and that only grew since is appended at a cost that does not depend on it."""
    s = store(workspace)
    await s.save(CTX, msgs(*(f"m{i}" for i in range(50))))
    history = await s.load(CTX)
    assert isinstance(history, History)
    compared: list[int] = []
    original = session_store._starts_with

    def spy(messages: tuple[Msg, ...], prefix: tuple[Msg, ...]) -> bool:
        compared.append(len(prefix))
        return original(messages, prefix)

    monkeypatch.setattr(session_store, "_starts_with", spy)
    for i in range(3):
        history.append(Msg(role="user", content=f"step {i}"))
        await s.save(CTX, history, exclusive=True)
    assert compared == []
    assert await store(workspace).load(CTX) == history


@pytest.mark.parametrize("exclusive", [True, False])
async def test_an_in_place_rewrite_of_an_early_message_is_saved_whole(
    workspace: Path, exclusive: bool
) -> None:
    s = store(workspace)
    await s.save(CTX, msgs("a", "b", "c"))
    history = await s.load(CTX)
    history.append(Msg(role="assistant", content="d"))
    await s.save(CTX, history, exclusive=exclusive)
    history[1] = history[1].model_copy(update={"content": msgs("B")[0].content})
    history.append(Msg(role="user", content="e"))  # grown too: an append would miss the change
    await s.save(CTX, history, exclusive=exclusive)
    assert [m.text for m in await store(workspace).load(CTX)] == ["a", "B", "c", "d", "e"]
    history[:] = [history[0], *history[2:]]  # memory[:] = ..., as a compaction does
    history.append(Msg(role="assistant", content="f"))
    await s.save(CTX, history, exclusive=exclusive)
    assert [m.text for m in await store(workspace).load(CTX)] == ["a", "c", "d", "e", "f"]
    assert [m.text for m in await s.load(CTX)] == ["a", "c", "d", "e", "f"]


def synced_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files ``fsync``-ed from now on."""
    synced: list[str] = []
    original = os.fsync

    def spy(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        original(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return synced


@pytest.mark.parametrize(
    ("fsync", "expected"),
    [(None, []), ("step", ["messages.jsonl"] * 3), ("turn", ["messages.jsonl"])],
)
async def test_appends_are_synced_to_the_disk_as_asked(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, fsync: SessionFsync, expected: list[str]
) -> None:
    s = SessionStore(WorkspaceManager(workspace), "bot", fsync=fsync)
    await s.save(CTX, msgs("a"))
    history = await s.load(CTX)
    synced = synced_files(monkeypatch)
    for text in ("b", "c"):
        history.append(Msg(role="user", content=text))
        await s.save(CTX, history, exclusive=True)
    history.append(Msg(role="assistant", content="d"))
    await s.save(CTX, history, exclusive=True, end=True)
    await s.save(CTX, history, exclusive=True, end=True)  # nothing appended: nothing to sync
    assert [name for name in synced if name.endswith(".jsonl")] == expected
    # Outside a call the store does not hold the file, so it does not know which directories
    # its first append made: each sync also syncs every one up to the workspace's parent.
    (messages,) = workspace.rglob("messages.jsonl")
    directories = [p.name for p in messages.parents if p.is_relative_to(workspace.parent)]
    assert [name for name in synced if not name.endswith(".jsonl")] == directories * len(expected)
    assert [m.text for m in await store(workspace).load(CTX)] == ["a", "b", "c", "d"]


def test_an_unknown_fsync_setting_is_refused(workspace: Path) -> None:
    with pytest.raises(ValueError, match='fsync must be "step", "turn" or None'):
        SessionStore(WorkspaceManager(workspace), "bot", fsync="always")  # type: ignore[arg-type]
