"""The session catalogue's automatic title: the user's own first words, not the harness's."""

from __future__ import annotations

from pathlib import Path

from harness.context import RuntimeContext
from harness.kernel import Msg
from harness.memory.render import SUMMARY_NAME
from harness.session import SessionStore
from harness.session.catalogue import SessionCatalogue
from harness.workspace import WorkspaceManager


async def test_a_compacted_session_is_titled_by_the_users_words_not_the_summary(
    tmp_path: Path,
) -> None:
    workspace = WorkspaceManager(tmp_path / "ws")
    ctx = RuntimeContext(session_id="long")
    await SessionStore(workspace, "harness").save(
        ctx,
        [
            Msg(role="user", name=SUMMARY_NAME, content="You are in the middle of a conversation"),
            Msg(role="assistant", content="Understood."),
            Msg(role="user", content="Now book the train"),
            Msg(role="assistant", content="Booked."),
        ],
    )
    listed = await SessionCatalogue(workspace, "harness").list(None, count_messages=True)
    assert [(s.id, s.title, s.messages) for s in listed] == [("long", "Now book the train", 4)]
