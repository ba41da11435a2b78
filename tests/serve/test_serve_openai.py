"""The OpenAI-compatible endpoint, spoken to by the real ``openai`` SDK over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from _served import Served, scripted_agent, served
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, SecretStr

from harness import HarnessAgent, RuntimeContext
from harness.models import ScriptedChatModel
from harness.serve import SESSION_HEADER, ServeConfig

TURNS: list[dict[str, Any]] = [
    {"match": "weather", "tool_calls": [{"name": "list_files", "input": {"path": "."}}]},
    {
        "match": r"\[",
        "text": "It is sunny in Paris.",
        "usage": {"input_tokens": 7, "output_tokens": 5},
    },
    {
        "text": "Hello there, friend.",
        "repeat": True,
        "usage": {"input_tokens": 3, "output_tokens": 4},
    },
]


class Model(ScriptedChatModel):
    """The scripted model, kept by the test to see what the agent sent it."""


@pytest.fixture
def model() -> Model:
    return Model(TURNS)


def opening(
    workspace: Path, model: Model
) -> Callable[[], AbstractAsyncContextManager[HarnessAgent]]:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:
            yield agent

    return opened


@pytest.fixture
def server(workspace: Path, model: Model) -> Iterator[Served]:
    with served(opening(workspace, model), ServeConfig()) as running:
        yield running


def client(server: Served) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


async def saved(workspace: Path, session: str) -> list[tuple[str, str]]:
    agent = HarnessAgent(model=ScriptedChatModel([]), workspace=workspace, memory=None)
    async with agent:
        messages = await agent.sessions.load(RuntimeContext(session_id=session))
    return [(m.role, m.text) for m in messages if m.text]


async def test_a_completion_is_the_agents_reply_and_runs_its_tools(
    server: Served, workspace: Path, model: Model
) -> None:
    async with client(server) as api:
        completion = await api.chat.completions.create(
            model="harness",
            messages=[{"role": "user", "content": "What is the weather?"}],
            extra_headers={SESSION_HEADER: "s1"},
        )
    assert completion.choices[0].message.content == "It is sunny in Paris."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "harness"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 7
    # The tool ran inside the harness: the second request carried its result.
    assert "[DIR]" in model.requests[1][-1].tool_results[0].text
    assert await saved(workspace, "s1") == [
        ("user", "What is the weather?"),
        ("assistant", "It is sunny in Paris."),
    ]


async def test_a_streamed_completion_sends_the_text_as_it_comes(server: Served) -> None:
    async with client(server) as api:
        stream = await api.chat.completions.create(
            model="harness",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
            metadata={"session_id": "streamed"},
        )
        chunks = [chunk async for chunk in stream]
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) > 1
    assert "".join(pieces) == "Hello there, friend."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4


async def test_a_client_resending_the_whole_history_adds_only_its_new_turn(
    server: Served, workspace: Path, model: Model
) -> None:
    history: list[dict[str, str]] = [{"role": "system", "content": "You are a pirate."}]
    async with client(server) as api:
        for question in ("first question", "second question", "third question"):
            history.append({"role": "user", "content": question})
            completion = await api.chat.completions.create(
                model="harness",
                messages=history,  # type: ignore[arg-type]
                extra_headers={SESSION_HEADER: "resent"},
            )
            history.append(
                {"role": "assistant", "content": completion.choices[0].message.content or ""}
            )
    assert await saved(workspace, "resent") == [
        ("user", "first question"),
        ("assistant", "Hello there, friend."),
        ("user", "second question"),
        ("assistant", "Hello there, friend."),
        ("user", "third question"),
        ("assistant", "Hello there, friend."),
    ]
    # The session, not the client's copy, is what the model was given; the client's system
    # message is not the operator's and went nowhere.
    last = model.requests[-1]
    assert [m.text for m in last if m.role == "user"][-3:] == [
        "first question",
        "second question",
        "third question",
    ]
    assert all("pirate" not in m.text for m in last)


async def test_a_session_continues_across_requests_without_the_history(
    server: Served, model: Model
) -> None:
    async with client(server) as api:
        for text in ("one", "two"):
            await api.chat.completions.create(
                model="harness",
                messages=[{"role": "user", "content": text}],
                extra_headers={SESSION_HEADER: "kept"},
            )
    assert [m.text for m in model.requests[-1] if m.role == "user"][-2:] == ["one", "two"]


async def test_stateless_clients_each_continue_a_session_of_their_own(
    server: Served, workspace: Path
) -> None:
    """Two chat UIs that send their whole history and no session id, with the same first words
    (and so the same first answer): each continues its own session, nothing is kept twice.
    Without an id, every chat once landed in "default": one held 22 messages of many."""
    histories: dict[str, list[dict[str, str]]] = {
        who: [{"role": "user", "content": "hi"}] for who in ("ann", "bob")
    }
    sessions: dict[str, set[str]] = {"ann": set(), "bob": set()}
    async with client(server) as api:
        for round in range(3):
            for who, history in histories.items():
                raw = await api.chat.completions.with_raw_response.create(
                    model="harness",
                    messages=history,  # type: ignore[arg-type]
                )
                sessions[who].add(raw.headers["X-Harness-Session"])
                reply = raw.parse().choices[0].message.content or ""
                history += [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": f"{who} says {round}"},
                ]
    [ann], [bob] = sessions["ann"], sessions["bob"]
    assert ann != bob
    for who, session in (("ann", ann), ("bob", bob)):
        said = [text for role, text in await saved(workspace, session) if role == "user"]
        assert said == ["hi", f"{who} says 0", f"{who} says 1"]


async def test_a_refused_stateless_request_leaves_its_session_for_the_retry(
    workspace: Path, model: Model
) -> None:
    """A request refused after its history was matched (here: its new turn is too long) once
    used up the match, and its retry started a new session; one with an unknown history left
    a session holding only that history."""
    with served(opening(workspace, model), ServeConfig(max_input_chars=50)) as server:
        async with client(server) as api:
            history = [{"role": "user", "content": "hi"}]
            first = await api.chat.completions.with_raw_response.create(
                model="harness",
                messages=history,  # type: ignore[arg-type]
            )
            session = first.headers["X-Harness-Session"]
            history.append(
                {"role": "assistant", "content": first.parse().choices[0].message.content or ""}
            )
            for bringing in (
                history,
                [
                    {"role": "user", "content": "from elsewhere"},
                    {"role": "assistant", "content": "ok"},
                ],
            ):
                with pytest.raises(openai.APIStatusError, match="at most 50") as refused:
                    await api.chat.completions.create(
                        model="harness",
                        messages=[*bringing, {"role": "user", "content": "x" * 51}],  # type: ignore[list-item]
                    )
                assert refused.value.status_code == 413
            retried = await api.chat.completions.with_raw_response.create(
                model="harness",
                messages=[*history, {"role": "user", "content": "shorter"}],  # type: ignore[list-item]
            )
        async with httpx2.AsyncClient(base_url=server.url, timeout=20) as raw:
            listed = (await raw.get("/v1/sessions")).json()["data"]
    assert retried.headers["X-Harness-Session"] == session
    assert [entry["id"] for entry in listed] == [session]  # the refused history left none


async def test_a_history_from_elsewhere_starts_a_session_that_keeps_it(
    server: Served, workspace: Path
) -> None:
    """A client that brings a conversation the server never saw loses none of it."""
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "my name is Ada"},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "what is my name?"},
    ]
    async with client(server) as api:
        raw = await api.chat.completions.with_raw_response.create(
            model="harness",
            messages=history,  # type: ignore[arg-type]
        )
    kept = await saved(workspace, raw.headers["X-Harness-Session"])
    assert kept[:3] == [
        ("user", "my name is Ada"),
        ("assistant", "Hello Ada."),
        ("user", "what is my name?"),
    ]


async def test_what_the_endpoint_refuses(server: Served) -> None:
    async with client(server) as api:
        with pytest.raises(openai.NotFoundError, match="this server serves 'harness'"):
            await api.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.BadRequestError, match="no new user message"):
            await api.chat.completions.create(
                model="harness",
                messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}],
            )
        with pytest.raises(openai.BadRequestError, match="session id"):
            await api.chat.completions.create(
                model="harness",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={SESSION_HEADER: "../../etc"},
            )
        with pytest.raises(openai.BadRequestError, match="only text content"):
            await api.chat.completions.create(
                model="harness",
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}],
                    }
                ],
            )
        listed = await api.models.list()
    assert [m.id for m in listed.data] == ["harness"]


async def test_a_failed_turn_is_an_error_for_the_client_and_keeps_the_question(
    workspace: Path,
) -> None:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        # A script with no turn left: the model fails at once.
        async with HarnessAgent(
            model=ScriptedChatModel([]), workspace=workspace, memory=None
        ) as agent:
            yield agent

    with served(opened) as server:
        async with client(server) as api:
            with pytest.raises(openai.APIStatusError, match="no turn left") as refused:
                await api.chat.completions.create(
                    model="harness",
                    messages=[{"role": "user", "content": "plain question"}],
                    extra_headers={SESSION_HEADER: "failing"},
                )
            assert refused.value.status_code == 502
            stream = await api.chat.completions.create(
                model="harness",
                messages=[{"role": "user", "content": "streamed question"}],
                extra_headers={SESSION_HEADER: "failing"},
                stream=True,
            )
            with pytest.raises(openai.APIError, match="no turn left"):
                async for _ in stream:
                    pass
    assert await saved(workspace, "failing") == [
        ("user", "plain question"),
        ("user", "streamed question"),
    ]


class City(BaseModel):
    name: str
    population: int


async def test_response_format_gets_schema_valid_json_from_a_model_that_answers_prose(
    workspace: Path,
) -> None:
    """The openai SDK's parse() with a pydantic model, and LangChain's with_structured_output:
    the first answer is prose, the harness asks again with what is wrong, the client gets an
    object that fits. response_format was once accepted and ignored (a JSON parse error)."""
    turns: list[dict[str, Any]] = [
        {"match": "^Answer with only", "text": "Paris is the capital, with about 2.1 million."},
        {"match": "no JSON value", "text": '{"name": "Paris", "population": 2100000}'},
        {"match": "^Answer with only", "text": "Lyon!"},
        {"match": "no JSON value", "text": '{"name": "Lyon", "population": 520000}'},
    ]
    with served(scripted_agent(workspace, turns)) as server:
        async with client(server) as api:
            parsed = await api.chat.completions.parse(
                model="harness",
                messages=[{"role": "user", "content": "Which capital?"}],
                response_format=City,
                extra_headers={"X-Harness-Session": "cities"},
            )
        assert parsed.choices[0].message.parsed == City(name="Paris", population=2100000)
        async with httpx2.AsyncClient(base_url=server.url, timeout=20) as api:
            shown = (await api.get("/v1/sessions/cities")).json()["messages"]
        # the harness's notes (the format, the correction) are marked: a page shows them as such
        assert [(m["role"], m.get("synthetic", False)) for m in shown if m["role"] == "user"] == [
            ("user", False),
            ("user", True),
            ("user", True),
        ]

        chat = ChatOpenAI(
            model="harness",
            base_url=f"{server.url}/v1",
            api_key=SecretStr("unused"),
            max_retries=0,
        )
        structured = chat.with_structured_output(City, method="json_schema")
        result = await structured.ainvoke("Which city in France?")
        assert result == City(name="Lyon", population=520000)
