"""The session catalogue over HTTP: sessions by recency with titles, rename, delete; and the
tool activity a chat-completions stream carries for clients that want it."""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from _served import Served, scripted_agent, served
from hypothesis import given
from hypothesis import strategies as st
from langchain_openai import ChatOpenAI

from harness.serve import ApiKeys, ServeConfig, digest, new_key
from harness.session.catalogue import MAX_TITLE_CHARS, clean_title

TURNS: list[dict[str, Any]] = [
    {
        "match": "files",
        "tool_calls": [{"name": "list_files", "input": {"path": "."}}],
        "repeat": True,
    },
    {"match": r"\[DIR\]", "text": "There are folders.", "repeat": True},
    {"match": "forever", "text": "Late.", "delay": 30, "repeat": True},
    {"text": "Noted.", "repeat": True},
]
ALICE, BOB = new_key(), new_key()


def opener(workspace: Path) -> Any:
    return scripted_agent(workspace, TURNS)


@pytest.fixture
def server(workspace: Path) -> Iterator[Served]:
    keys = ApiKeys({digest(ALICE): "alice", digest(BOB): "bob"})
    with served(opener(workspace), ServeConfig(keys=keys, ping_seconds=0.5)) as running:
        yield running


def as_user(server: Served, key: str) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.AsyncClient(base_url=server.url, timeout=20, headers=headers)


async def turn(api: httpx.AsyncClient, session: str, text: str) -> None:
    async with api.stream("POST", f"/v1/sessions/{session}/turns", json={"input": text}) as r:
        assert r.status_code == 200
        await r.aread()


async def test_sessions_are_listed_newest_first_with_titles_renamed_and_deleted(
    server: Served,
) -> None:
    async with as_user(server, ALICE) as alice, as_user(server, BOB) as bob:
        await turn(alice, "trip", "Plan my\ntrip to Lyon\u202e please")
        await asyncio.sleep(0.05)
        await turn(alice, "taxes", "Taxes are due in May")
        await asyncio.sleep(0.05)
        await turn(alice, "trip", "And the hotel")  # the trip is the latest again
        listed = (await alice.get("/v1/sessions")).json()["data"]
        assert [s["id"] for s in listed] == ["trip", "taxes"]
        assert listed[0]["title"] == "Plan my trip to Lyon please"  # one clean line
        assert listed[0]["updated_at"] >= listed[1]["updated_at"]
        assert (await alice.get("/v1/sessions", params={"limit": 1})).json()["data"][0][
            "id"
        ] == "trip"

        renamed = await alice.patch("/v1/sessions/taxes", json={"title": "  2026 taxes  "})
        assert renamed.status_code == 200
        assert renamed.json()["title"] == "2026 taxes"
        titles = {s["id"]: s["title"] for s in (await alice.get("/v1/sessions")).json()["data"]}
        assert titles["taxes"] == "2026 taxes"
        blank = await alice.patch("/v1/sessions/taxes", json={"title": ""})
        assert blank.json()["title"] == "Taxes are due in May"  # back to the automatic one

        # Bob reaches none of it: not listed, not renamed, not deleted.
        assert (await bob.get("/v1/sessions")).json()["data"] == []
        assert (await bob.patch("/v1/sessions/trip", json={"title": "x"})).status_code == 404
        assert (await bob.delete("/v1/sessions/trip")).status_code == 404

        deleted = await alice.delete("/v1/sessions/trip")
        assert deleted.json() == {"id": "trip", "deleted": True}
        assert (await alice.get("/v1/sessions/trip")).status_code == 404
        assert [s["id"] for s in (await alice.get("/v1/sessions")).json()["data"]] == ["taxes"]
        assert (await alice.get("/v1/sessions/trip/trace")).status_code == 404
        assert (await alice.delete("/v1/sessions/trip")).status_code == 404

        # A new turn on a deleted session starts it afresh.
        await turn(alice, "trip", "Start over")
        history = (await alice.get("/v1/sessions/trip")).json()["messages"]
        assert [m["text"] for m in history] == ["Start over", "Noted."]


async def test_a_session_with_a_running_turn_is_not_deleted(server: Served) -> None:
    async with as_user(server, ALICE) as alice:
        body = {"input": "wait forever", "detach": True}
        async with alice.stream("POST", "/v1/sessions/busy/turns", json=body) as reply:
            assert reply.status_code == 200
        for _ in range(100):  # the question is saved; the model is slow
            if (await alice.get("/v1/sessions/busy")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        refused = await alice.delete("/v1/sessions/busy")
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "session_busy"
        assert (await alice.post("/v1/sessions/busy/cancel")).json()["cancelled"] is True
        assert (await alice.delete("/v1/sessions/busy")).status_code == 200


@given(st.text(max_size=300))
def test_a_title_is_one_line_of_visible_text_within_its_limit(text: str) -> None:
    title = clean_title(text)
    assert len(title) <= MAX_TITLE_CHARS
    assert title == title.strip()
    assert "  " not in title
    assert not any(unicodedata.category(ch) in {"Cc", "Cf", "Zl", "Zp", "Cs"} for ch in title)
    assert clean_title(title) == title


def test_a_chat_stream_carries_tool_activity_that_standard_clients_skip(server: Served) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=ALICE)
    stream = client.chat.completions.create(
        model="harness",
        messages=[{"role": "user", "content": "Which files are there?"}],
        stream=True,
        extra_headers={"X-Harness-Session": "tools"},
    )
    text, activity = "", []
    for chunk in stream:
        text += chunk.choices[0].delta.content or "" if chunk.choices else ""
        if chunk.model_extra and "harness_tool" in chunk.model_extra:
            activity.append(chunk.model_extra["harness_tool"])
    assert text == "There are folders."
    assert [(a["type"], a["name"]) for a in activity] == [
        ("tool.started", "list_files"),
        ("tool.finished", "list_files"),
    ]
    assert activity[0]["input"] == {"path": "."}
    assert "[DIR]" in activity[1]["output"]

    # LangChain reads the same stream and sees only the text.
    chat = ChatOpenAI(
        base_url=f"{server.url}/v1",
        api_key=ALICE,  # type: ignore[arg-type]
        model="harness",
        default_headers={"X-Harness-Session": "tools-lc"},
    )
    chunks = list(chat.stream("Which files are there?"))
    assert "".join(str(c.content) for c in chunks) == "There are folders."


async def test_a_turn_that_rewinds_replaces_the_last_message_and_its_answer(
    server: Served,
) -> None:
    """The page's edit and regenerate: the new input takes the last one's place."""
    async with as_user(server, ALICE) as api:
        refused = await api.post("/v1/sessions/r/turns", json={"input": "hi", "rewind": True})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "nothing_to_rewind"
        await turn(api, "r", "Remember this.")
        await turn(api, "r", "Which files are here?")
        body = {"input": "Remember that instead.", "rewind": True}
        async with api.stream("POST", "/v1/sessions/r/turns", json=body) as r:
            assert r.status_code == 200
            await r.aread()
        shown = (await api.get("/v1/sessions/r")).json()["messages"]
    assert [(m["role"], m["text"]) for m in shown if m["text"]] == [
        ("user", "Remember this."),
        ("assistant", "Noted."),
        ("user", "Remember that instead."),
        ("assistant", "Noted."),
    ]
