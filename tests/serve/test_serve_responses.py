"""The Responses API (``POST /v1/responses``), spoken to by the real ``openai`` SDK and LangChain.

Also LangChain's ``ChatOpenAI`` against chat completions, its default API.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import agents
import httpx2
import openai
import pytest
from _served import Served, scripted_agent, served
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from harness import HarnessAgent
from harness.models import ScriptedChatModel
from harness.serve import SESSION_HEADER, ApiKeys, ServeConfig, add_key
from harness.serve.responses_api import response_id, response_session
from harness.serve.turns import SESSION_ID

TURNS: list[dict[str, Any]] = [
    {"match": "weather", "tool_calls": [{"name": "list_files", "input": {"path": "."}}]},
    {
        "match": r"\[",
        "text": "It is sunny in Paris.",
        "usage": {"input_tokens": 7, "output_tokens": 5},
    },
    {"match": "^ship", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
    {
        "text": "Hello there, friend.",
        "repeat": True,
        "usage": {"input_tokens": 3, "output_tokens": 4},
    },
]


class Model(ScriptedChatModel):
    """The scripted model, kept by the test to see what the agent sent it."""


async def deploy(target: str) -> str:
    """Deploy.

    Args:
        target: Where.
    """
    return f"deployed {target}"


@pytest.fixture
def model() -> Model:
    return Model(TURNS)


@contextlib.contextmanager
def serving(workspace: Path, model: ScriptedChatModel, config: ServeConfig) -> Iterator[Served]:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with HarnessAgent(
            model=model,
            workspace=workspace,
            memory=None,
            tools=[deploy],
            approvals={"deploy": True},
        ) as agent:
            yield agent

    with served(opened, config) as running:
        yield running


@pytest.fixture
def server(workspace: Path, model: Model) -> Iterator[Served]:
    with serving(workspace, model, ServeConfig()) as running:
        yield running


def client(server: Served, key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)


async def history(server: Served, session: str, key: str = "unused") -> list[tuple[str, str]]:
    """The session's messages with text, as ``GET /v1/sessions/{id}`` shows them."""
    async with httpx2.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=20
    ) as api:
        reply = await api.get(f"/v1/sessions/{session}")
    if reply.status_code == 404:
        return []
    assert reply.status_code == 200, reply.text
    return [(m["role"], m["text"]) for m in reply.json()["messages"] if m["text"]]


async def test_a_response_is_the_agents_reply_and_runs_its_tools(
    server: Served, model: Model
) -> None:
    async with client(server) as api:
        raw = await api.responses.with_raw_response.create(
            model="harness", input="What is the weather?"
        )
    response = raw.parse()
    assert response.output_text == "It is sunny in Paris."
    assert response.status == "completed"
    assert response.model == "harness"
    assert response.object == "response"
    assert [item.type for item in response.output] == ["message"]  # no function_call items
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 5)
    assert response.usage.total_tokens == 12
    # The tool ran inside the harness: the second request carried its result.
    assert "[DIR]" in model.requests[1][-1].tool_results[0].text
    # A request naming no session had one of its own, which its id names.
    session = raw.headers[SESSION_HEADER]
    assert session.startswith("resp-")
    assert response_session(response.id) == session
    assert await history(server, session) == [
        ("user", "What is the weather?"),
        ("assistant", "It is sunny in Paris."),
    ]


async def test_a_streamed_response_sends_its_events_in_order(server: Served) -> None:
    async with client(server) as api:
        stream = await api.responses.create(model="harness", input="hi", stream=True)
        events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1
    last = events[-1]
    assert last.type == "response.completed"
    assert "".join(deltas) == last.response.output_text == "Hello there, friend."
    assert last.response.usage is not None
    assert last.response.usage.output_tokens == 4
    assert events[0].type == "response.created"
    assert events[0].response.id == last.response.id


async def test_the_sdks_stream_helper_accumulates_the_reply(server: Served) -> None:
    deltas: list[str] = []
    snapshots: list[str] = []
    async with client(server) as api, api.responses.stream(model="harness", input="hi") as stream:
        async for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
                snapshots.append(event.snapshot)
        final = await stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Hello there, friend."
    # The helper's own accumulation of the events agrees, delta by delta.
    assert snapshots == ["".join(deltas[: i + 1]) for i in range(len(deltas))]
    assert final.status == "completed"


async def test_each_steps_text_is_an_item_of_its_own_whole_or_streamed(workspace: Path) -> None:
    turns: list[dict[str, Any]] = [
        {
            "match": "look",
            "text": "Let me look.",
            "tool_calls": [{"name": "list_files", "input": {"path": "."}}],
            "repeat": True,
        },
        {"match": r"\[", "text": "Only folders.", "repeat": True},
    ]
    with served(scripted_agent(workspace, turns)) as server:
        async with client(server) as api:
            whole = await api.responses.create(model="harness", input="look around")
            async with api.responses.stream(model="harness", input="look again") as stream:
                deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
                streamed = await stream.get_final_response()
    for response in (whole, streamed):
        texts = [
            part.text
            for item in response.output
            if item.type == "message"
            for part in item.content
            if part.type == "output_text"
        ]
        assert texts == ["Let me look.", "Only folders."]
    assert "".join(deltas) == streamed.output_text == "Let me look.Only folders."


async def test_previous_response_id_continues_its_session(server: Served, model: Model) -> None:
    async with client(server) as api:
        first = await api.responses.create(model="harness", input="one")
        second = await api.responses.create(
            model="harness", input="two", previous_response_id=first.id
        )
        third = await api.responses.create(
            model="harness", input="three", previous_response_id=first.id
        )
    assert second.previous_response_id == first.id
    session = response_session(first.id)
    assert session is not None
    assert response_session(second.id) == response_session(third.id) == session
    assert len({first.id, second.id, third.id}) == 3
    assert [text for role, text in await history(server, session) if role == "user"] == [
        "one",
        "two",
        "three",
    ]
    # The model was given the session, not only the new turn.
    assert [m.text for m in model.requests[-1] if m.role == "user"] == ["one", "two", "three"]


async def test_requests_without_a_session_each_start_one(server: Served) -> None:
    async with client(server) as api:
        first = await api.responses.create(model="harness", input="a")
        second = await api.responses.create(model="harness", input="b")
    sessions = [response_session(first.id), response_session(second.id)]
    assert sessions[0] != sessions[1]
    for session, text in zip(sessions, "ab", strict=True):
        assert session is not None
        assert await history(server, session) == [
            ("user", text),
            ("assistant", "Hello there, friend."),
        ]


async def test_conversation_or_the_header_names_the_session(server: Served) -> None:
    async with client(server) as api:
        first = await api.responses.create(model="harness", input="a", conversation="conv-1")
        second = await api.responses.create(
            model="harness", input="b", conversation={"id": "conv-1"}
        )
        third = await api.responses.create(
            model="harness", input="c", extra_headers={SESSION_HEADER: "conv-1"}
        )
        # All three agree: the same session.
        fourth = await api.responses.create(
            model="harness",
            input="d",
            conversation="conv-1",
            previous_response_id=third.id,
            extra_headers={SESSION_HEADER: "conv-1"},
        )
        with pytest.raises(openai.BadRequestError, match="name different sessions"):
            await api.responses.create(
                model="harness",
                input="e",
                conversation="conv-2",
                extra_headers={SESSION_HEADER: "conv-1"},
            )
        with pytest.raises(openai.BadRequestError, match="name different sessions"):
            await api.responses.create(
                model="harness", input="e", conversation="conv-2", previous_response_id=first.id
            )
    assert first.conversation is not None
    assert first.conversation.id == "conv-1"
    assert second.conversation is not None
    assert second.conversation.id == "conv-1"
    assert third.conversation is None
    assert fourth.previous_response_id == third.id
    assert [text for role, text in await history(server, "conv-1") if role == "user"] == [
        "a",
        "b",
        "c",
        "d",
    ]
    assert await history(server, "conv-2") == []


async def test_an_input_history_adds_only_its_new_turn(server: Served, model: Model) -> None:
    async with client(server) as api:
        items: list[dict[str, Any]] = [
            {"role": "system", "content": "Talk like a pirate."},
            {"role": "user", "content": "an old question"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "an old answer"}],
            },
            {"type": "message", "role": "user", "content": "first part"},
            {"role": "user", "content": [{"type": "input_text", "text": "second part"}]},
        ]
        await api.responses.create(
            model="harness",
            instructions="You are a pirate.",
            input=items,  # type: ignore[arg-type]
            conversation="resent",
        )
    assert await history(server, "resent") == [
        ("user", "first part\n\nsecond part"),
        ("assistant", "Hello there, friend."),
    ]
    # The caller's instructions are not the operator's and went nowhere.
    assert all("pirate" not in m.text for m in model.requests[-1])


async def test_what_the_endpoint_refuses(server: Served) -> None:
    async with client(server) as api:
        with pytest.raises(openai.NotFoundError, match="this server serves 'harness'"):
            await api.responses.create(model="gpt-4o", input="hi")
        for made_up in ("resp_made_up", "not-a-response", response_id("never-was")):
            with pytest.raises(openai.NotFoundError) as missing:
                await api.responses.create(
                    model="harness", input="hi", previous_response_id=made_up
                )
            assert missing.value.code == "response_not_found"
        with pytest.raises(openai.BadRequestError, match="session id"):
            await api.responses.create(model="harness", input="hi", conversation="../../etc")
        with pytest.raises(openai.BadRequestError, match="session id"):
            await api.responses.create(
                model="harness", input="hi", extra_headers={SESSION_HEADER: "../../etc"}
            )
        with pytest.raises(openai.BadRequestError) as image:
            await api.responses.create(
                model="harness",
                input=[
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "input_image",
                                "image_url": "http://x/y.png",
                                "detail": "auto",
                            }
                        ],
                    }
                ],
            )
        assert image.value.code == "unsupported_content"
        with pytest.raises(openai.BadRequestError) as output:
            await api.responses.create(
                model="harness",
                input=[
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c1", "output": "42"},
                ],
            )
        assert output.value.code == "unsupported_content"
        with pytest.raises(openai.BadRequestError, match="no new user message"):
            await api.responses.create(
                model="harness",
                input=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}],
            )
        with pytest.raises(openai.BadRequestError) as empty:
            await api.responses.create(model="harness", input="   ")
        assert empty.value.code == "empty_input"


async def test_a_failed_turn_is_an_error_for_the_client(workspace: Path) -> None:
    with served(scripted_agent(workspace, [])) as server:  # no turn left: the model fails
        async with client(server) as api:
            with pytest.raises(openai.APIStatusError, match="no turn left") as refused:
                await api.responses.create(
                    model="harness", input="plain question", conversation="failing"
                )
            assert refused.value.status_code == 502
            stream = await api.responses.create(
                model="harness", input="streamed question", conversation="failing", stream=True
            )
            events = [event async for event in stream]
        assert [e.sequence_number for e in events] == list(range(len(events)))
        last = events[-1]
        assert last.type == "response.failed"
        assert last.response.status == "failed"
        assert last.response.error is not None
        error = last.response.error.model_dump()  # the harness's codes, not OpenAI's list
        assert error["code"] == "script_exhausted_error"
        assert "no turn left" in error["message"]
        assert await history(server, "failing") == [
            ("user", "plain question"),
            ("user", "streamed question"),
        ]


async def test_a_turn_that_waits_for_approval_says_so(server: Served) -> None:
    async with client(server) as api:
        waiting = await api.responses.create(model="harness", input="ship it", conversation="w")
        with pytest.raises(openai.APIStatusError) as busy:
            async with api.responses.stream(model="harness", input="again", conversation="w") as s:
                await s.get_final_response()
    assert waiting.status == "completed"
    assert "waiting for approval of 1 tool call(s): deploy" in waiting.output_text
    assert "/v1/sessions/w/approvals" in waiting.output_text
    assert busy.value.status_code == 409
    assert busy.value.code == "approvals_pending"


async def test_another_users_response_id_reaches_only_the_callers_own_sessions(
    workspace: Path, model: Model, tmp_path: Path
) -> None:
    file = tmp_path / "keys.txt"
    alice, bob = add_key(file, "alice"), add_key(file, "bob")
    with serving(workspace, model, ServeConfig(keys=ApiKeys.load([file]))) as server:
        async with client(server, alice) as as_alice, client(server, bob) as as_bob:
            hers = await as_alice.responses.create(model="harness", input="alice's secret")
            session = response_session(hers.id)
            assert session is not None
            with pytest.raises(openai.NotFoundError):
                await as_bob.responses.create(
                    model="harness", input="show me", previous_response_id=hers.id
                )
            # Bob's own session of that name is his, apart from hers.
            await as_bob.responses.create(model="harness", input="bob's", conversation=session)
            his = await as_bob.responses.create(
                model="harness", input="bob's again", previous_response_id=hers.id
            )
        assert response_session(his.id) == session
        assert await history(server, session, alice) == [
            ("user", "alice's secret"),
            ("assistant", "Hello there, friend."),
        ]
        assert [text for role, text in await history(server, session, bob) if role == "user"] == [
            "bob's",
            "bob's again",
        ]
        assert all("secret" not in m.text for m in model.requests[-1])


@given(st.from_regex(SESSION_ID, fullmatch=True))
def test_every_session_id_round_trips_through_a_response_id(session: str) -> None:
    # Drawn from the ids a session can have (any text once drew one too long for an id).
    made = response_id(session)
    assert response_session(made) == session
    assert made.isascii()
    assert made.replace("_", "").isalnum()


@given(st.text() | st.from_regex(r"resp_[a-z2-7]{0,30}_[0-9a-f]{1,20}", fullmatch=True))
def test_no_string_breaks_the_decoding(ident: str) -> None:
    session = response_session(ident)
    assert session is None or isinstance(session, str)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ident=st.text(max_size=300)
    | st.from_regex(r"resp_[a-z2-7]{0,40}_[0-9a-f]{1,20}", fullmatch=True)
    | st.text().map(response_id)
    | st.from_regex(SESSION_ID, fullmatch=True).map(response_id)  # sessions nobody had
)
def test_a_made_up_previous_response_id_is_404_or_400_never_500(server: Served, ident: str) -> None:
    reply = httpx2.post(
        f"{server.url}/v1/responses",
        json={"model": "harness", "input": "hi", "previous_response_id": ident},
        timeout=20,
    )
    assert reply.status_code in (400, 404), reply.text
    assert reply.json()["error"]["code"] in ("response_not_found", "invalid_request")


def test_langchain_talks_to_the_responses_api(server: Served) -> None:
    chat = ChatOpenAI(
        base_url=f"{server.url}/v1",
        api_key="unused",  # type: ignore[arg-type]
        model="harness",
        use_responses_api=True,
        max_retries=0,
    )
    answer = chat.invoke("hi")
    assert answer.text == "Hello there, friend."
    assert answer.usage_metadata is not None
    assert answer.usage_metadata["output_tokens"] == 4
    chunks = list(chat.stream("hi"))
    assert len([c for c in chunks if c.text]) > 1
    assert "".join(c.text for c in chunks) == "Hello there, friend."


async def test_langchain_continues_a_session_by_history_or_by_response_id(server: Served) -> None:
    options: dict[str, Any] = {
        "base_url": f"{server.url}/v1",
        "api_key": "unused",
        "model": "harness",
        "use_responses_api": True,
        "max_retries": 0,
    }
    by_history = ChatOpenAI(**options, default_headers={SESSION_HEADER: "lc-history"})
    first = await by_history.ainvoke("hi")
    await by_history.ainvoke([HumanMessage("hi"), first, HumanMessage("and now?")])
    assert await history(server, "lc-history") == [
        ("user", "hi"),
        ("assistant", "Hello there, friend."),
        ("user", "and now?"),
        ("assistant", "Hello there, friend."),
    ]
    by_id = ChatOpenAI(**options, use_previous_response_id=True)
    first = await by_id.ainvoke("one")
    second = await by_id.ainvoke([HumanMessage("one"), first, HumanMessage("two")])
    session = response_session(first.response_metadata["id"])
    assert session is not None
    assert response_session(second.response_metadata["id"]) == session
    assert [text for role, text in await history(server, session) if role == "user"] == [
        "one",
        "two",
    ]


async def test_langchain_talks_to_chat_completions(server: Served) -> None:
    chat = ChatOpenAI(
        base_url=f"{server.url}/v1",
        api_key="unused",  # type: ignore[arg-type]
        model="harness",
        max_retries=0,
        default_headers={SESSION_HEADER: "lc"},
    )
    answer = await chat.ainvoke("hi")
    assert answer.text == "Hello there, friend."
    chunks = [chunk async for chunk in chat.astream("again")]
    assert len([c for c in chunks if c.text]) > 1
    assert "".join(c.text for c in chunks) == "Hello there, friend."
    assert [text for role, text in await history(server, "lc") if role == "user"] == [
        "hi",
        "again",
    ]


async def test_a_client_that_resends_its_input_items_continues_its_session(
    server: Served,
) -> None:
    """Without previous_response_id, each request once started a session of its own and
    dropped the history the client resent; now the history names the session it continues."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    sessions: set[str] = set()
    async with client(server) as api:
        for said in ("and then?", "thanks"):
            raw = await api.responses.with_raw_response.create(
                model="harness",
                input=items,  # type: ignore[arg-type]
            )
            sessions.add(raw.headers[SESSION_HEADER])
            reply = raw.parse().output_text
            items += [
                {"role": "assistant", "content": [{"type": "output_text", "text": reply}]},
                {"role": "user", "content": said},
            ]
    [session] = sessions
    assert [text for role, text in await history(server, session) if role == "user"] == [
        "hi",
        "and then?",
    ]


class Trip(BaseModel):
    city: str
    days: int


async def test_text_format_gets_an_object_that_fits_from_prose_first(workspace: Path) -> None:
    """responses.parse(text_format=...) once met prose and failed to parse it."""
    turns: list[dict[str, Any]] = [
        {"match": "^Answer with only", "text": "Three days in Porto sounds right."},
        {"match": "no JSON value", "text": '{"city": "Porto", "days": 3}'},
    ]
    with serving(workspace, ScriptedChatModel(turns), ServeConfig()) as server:
        async with client(server) as api:
            parsed = await api.responses.parse(
                model="harness", input="Plan a trip", text_format=Trip
            )
    assert parsed.output_parsed == Trip(city="Porto", days=3)


async def test_the_agents_sdks_output_type_gets_an_object_that_fits_from_prose_first(
    workspace: Path,
) -> None:
    """The OpenAI Agents SDK's ``output_type`` over Responses (its default model) once failed
    with a JSON parse error: the harness accepted ``text.format`` and ignored it."""
    turns: list[dict[str, Any]] = [
        {"match": "^Answer with only", "text": "Four days in Ghent, I would say."},
        {"match": "no JSON value", "text": '{"city": "Ghent", "days": 4}'},
    ]
    with serving(workspace, ScriptedChatModel(turns), ServeConfig()) as server:
        async with client(server) as api:
            planner = agents.Agent(
                name="planner",
                instructions="Plan trips.",
                output_type=Trip,
                model=agents.OpenAIResponsesModel(model="harness", openai_client=api),
            )
            result = await agents.Runner.run(
                planner, "Plan a trip", run_config=agents.RunConfig(tracing_disabled=True)
            )
    assert result.final_output == Trip(city="Ghent", days=4)


async def test_a_response_is_retrieved_listed_and_deleted_by_its_user_alone(
    workspace: Path, tmp_path: Path
) -> None:
    """responses.retrieve, input_items.list and delete once answered 404."""
    file = tmp_path / "keys.txt"
    alice, bob = add_key(file, "alice"), add_key(file, "bob")
    turns: list[dict[str, Any]] = [{"text": "Hello there.", "repeat": True}]
    config = ServeConfig(keys=ApiKeys.load([file]))
    with serving(workspace, ScriptedChatModel(turns), config) as server:
        async with client(server, alice) as api, client(server, bob) as other:
            made = await api.responses.create(model="harness", input="hi")
            kept = await api.responses.retrieve(made.id)
            assert (kept.id, kept.output_text, kept.status) == (
                made.id,
                "Hello there.",
                "completed",
            )
            items = await api.responses.input_items.list(made.id)
            assert [item.type for item in items.data] == ["message"]
            assert items.data[0].content[0].text == "hi"  # type: ignore[union-attr,index]
            with pytest.raises(openai.NotFoundError):
                await other.responses.retrieve(made.id)  # another user's: not found
            unstored = await api.responses.create(model="harness", input="hi", store=False)
            with pytest.raises(openai.NotFoundError):
                await api.responses.retrieve(unstored.id)
            await api.responses.delete(made.id)
            with pytest.raises(openai.NotFoundError):
                await api.responses.retrieve(made.id)
            with pytest.raises(openai.NotFoundError):
                await api.responses.delete(made.id)
