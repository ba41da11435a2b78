"""Session state is saved with the session: any process continues a session as one process would.

The workspace context hook keeps, per session, the memory files its system prompt shows and the
notes it has told the model since (issue 18). Kept in the hook, that lived only in the process:
the next ``harness run`` or another serve worker rebuilt the prompt from the files as they are
now, so after a ``memory_save`` the system prompt changed and the provider's cache was lost
(issue 28). Here every turn may land in a new agent (a new process, as far as the agent can
tell: nothing is shared but the workspace), on a local disk or on Redis, and the requests the
model sees must be the ones a single long-lived agent would have sent.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _outcomes import answer
from harness import HarnessAgent, MemoryConfig, RuntimeContext
from harness.kernel import Msg, SessionState
from harness.models import ScriptedChatModel
from harness.session import SessionStore
from harness.session.store import STATE_FILE
from harness.stores import RedisStore
from harness.workspace import MEMORY_MD, WorkspaceManager

CTX = RuntimeContext(session_id="s1", user_id="ann")

FACTS = ("The user's tea is green.", "Ann lives in Porto.", "Ann's cat is called Miso.")

SCRIPT: list[dict[str, Any]] = [
    *(
        {
            "match": f"^save {number}$",
            "tool_calls": [
                {"name": "memory_save", "input": {"fact": fact, "target": "MEMORY.md#Facts"}}
            ],
            "repeat": True,  # a new agent has a new model: the script must not remember turns
        }
        for number, fact in enumerate(FACTS)
    ),
    {"match": "Saved|saved", "text": "noted", "repeat": True},
    {"text": "fine", "repeat": True},
]


def shape(request: list[Msg], root: Path) -> list[dict[str, Any]]:
    """A request as the provider reads it: roles, names and content (not ids or times).

    Written the same for runs that differ only where they must: the workspace's path is
    ``<workspace>``, and tool call ids (each scripted model numbers its own) are ``call``.
    """
    dumped = [m.model_dump(mode="json", include={"role", "name", "content"}) for m in request]
    text = re.sub(r'"id": "call_\d+"', '"id": "call"', json.dumps(dumped))
    shaped: list[dict[str, Any]] = json.loads(text.replace(str(root), "<workspace>"))
    return shaped


async def run_turns(
    root: Path, turns: list[str], fresh: list[bool], redis_url: str | None
) -> list[list[dict[str, Any]]]:
    """Every request of ``turns``; a turn marked fresh runs in a new agent (a new process).

    With ``redis_url``, each agent is a worker of a workspace kept in one Redis.
    """
    prefix = hashlib.sha256(str(root).encode()).hexdigest()[:16]  # the workspace's, in Redis
    requests: list[list[dict[str, Any]]] = []
    stores: list[RedisStore] = []
    agent: HarnessAgent | None = None
    for index, (text, new) in enumerate(zip(turns, fresh, strict=True)):
        if agent is None or new:
            if agent is not None:
                requests += await closed(agent, root)
            store = RedisStore(redis_url, prefix=prefix) if redis_url else None
            stores += [store] if store is not None else []
            agent = HarnessAgent(
                model=ScriptedChatModel(SCRIPT),
                workspace=root,
                store=store,
                memory=MemoryConfig(flush=False, auto_consolidate=False),
                subagents=None,
            )
            if index == 0:  # the operator's: a prompt that shows an unknown line lowers saves
                seeded = "## Facts\n- Ann drinks tea.\n"
                await agent.workspace.write_text(MEMORY_MD, seeded, "ann")
                await agent.provenance.adopt("ann", MEMORY_MD, seeded)
        answer(await agent.call(text, ctx=CTX))
    assert agent is not None
    requests += await closed(agent, root)
    for store in stores:
        await store.aclose()
    return requests


async def closed(agent: HarnessAgent, root: Path) -> list[list[dict[str, Any]]]:
    """Close the agent; the requests its model saw."""
    await agent.aclose()
    assert isinstance(agent.model, ScriptedChatModel)
    return [shape(request, root) for request in agent.model.requests]


turn_texts = st.lists(
    st.one_of(
        st.builds(lambda n: f"save {n}", st.integers(0, len(FACTS) - 1)),
        st.sampled_from(["hello", "what do you know?", "again"]),
    ),
    min_size=2,
    max_size=5,
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
async def test_a_session_continued_by_any_process_sees_what_one_process_would_show(
    tmp_path: Path, data: st.DataObject
) -> None:
    turns = data.draw(turn_texts)
    fresh = data.draw(st.lists(st.booleans(), min_size=len(turns), max_size=len(turns)))
    run = tmp_path / uuid.uuid4().hex[:8]  # a workspace's index sits beside it: one each
    one = await run_turns(run / "one" / "ws", turns, [False] * len(turns), None)
    many = await run_turns(run / "many" / "ws", turns, [True] * len(turns), None)
    mixed = await run_turns(run / "mixed" / "ws", turns, fresh, None)
    assert many == one
    assert mixed == one


async def test_after_a_memory_save_the_next_worker_keeps_the_prompt_byte_identical(
    tmp_path: Path, redis_url: str
) -> None:
    turns = ["save 0", "hello", "again"]
    requests = await run_turns(tmp_path / "redis" / "ws", turns, [True, True, True], redis_url)
    systems = [request[0] for request in requests]
    assert len(systems) == 4  # the save takes two steps
    assert all(system == systems[0] for system in systems)
    assert "green" not in json.dumps(systems[0])
    notes = [
        [(i, m["content"]) for i, m in enumerate(r) if m["name"] == "workspace_update"]
        for r in requests
    ]
    assert notes[0] == []
    (first,) = notes[1]
    assert "+ [user] - The user's tea is green." in first[1][0]["text"]
    assert notes[2] == notes[3] == [first]  # the same note at the same place, in each worker


async def test_the_state_is_written_only_when_a_hook_changed_it(workspace: Path) -> None:
    store = SessionStore(WorkspaceManager(workspace), "bot")
    ctx = RuntimeContext(session_id="s")
    state = await store.load_state(ctx)
    await store.save_state(ctx, state)
    path = workspace / "agents/bot/context/s" / STATE_FILE
    assert not path.exists()

    state.set("hook", {"text": "lone \udcff surrogate", "n": [1, 2]})
    await store.save_state(ctx, state)
    written = path.read_bytes()
    assert not state.changed
    path.touch()
    await store.save_state(ctx, state)  # unchanged: not written again
    assert path.read_bytes() == written

    again = await SessionStore(WorkspaceManager(workspace), "bot").load_state(ctx)
    assert again.get("hook") == {"text": "lone \udcff surrogate", "n": [1, 2]}
    assert not again.changed


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b"\xff\xfe", b'"text"'])
async def test_an_unreadable_state_starts_afresh_and_keeps_every_message(
    workspace: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = RuntimeContext(session_id="s")
    async with HarnessAgent(
        model=ScriptedChatModel([{"text": "fine", "repeat": True}]),
        workspace=workspace,
        memory=None,
    ) as agent:
        answer(await agent.call("first", ctx=ctx))
        path = workspace / "agents/harness/context/s" / STATE_FILE
        assert json.loads(path.read_bytes())  # the workspace context's view, kept
        path.write_bytes(content)
        with caplog.at_level(logging.WARNING):
            reply = answer(await agent.call("second", ctx=ctx))
        saved = await agent.sessions.load(ctx)
    assert reply.text == "fine"
    assert [m.text for m in saved] == ["first", "fine", "second", "fine"]
    assert any(STATE_FILE in record.getMessage() for record in caplog.records)
    assert json.loads(path.read_bytes())  # rewritten whole at the next step


def test_a_cache_is_dropped_with_the_value_it_was_left_with() -> None:
    state = SessionState({"k": {"a": 1}})
    decoded = object()
    state.remember("k", decoded)
    assert state.cached("k") is decoded
    assert state.copy().cached("k") is decoded
    state.set("k", {"a": 2})
    assert state.cached("k") is None
    assert state.changed
