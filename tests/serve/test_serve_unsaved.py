"""A turn whose session could not be saved is a failed turn, on both APIs, streamed or not.

The agent raises :class:`~harness.errors.TurnNotSaved` when the session's save fails, even
after the model answered. A client must then get an error, never a reply that looks kept:
no ``turn.completed`` event, no OpenAI chunk that finishes normally, no 200 completion.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import httpx2
import openai
import pytest
from _served import Served, served, sse_events

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.errors import StorageError, TurnNotSaved
from harness.kernel import Event, Hook, Msg, PostCall, StreamItem
from harness.models import ScriptedChatModel
from harness.structured import OutputSpec, OutputType

TURNS: list[dict[str, Any]] = [{"text": "An answer nobody will see again.", "repeat": True}]
LOST = "could not save session: the disk is full"


class SaveFails(Hook):
    """The call's last save fails, as the agent reports it: after the model has answered."""

    priority = 950  # after the session's own save (900)
    events: ClassVar[tuple[type[Event], ...]] = (PostCall,)

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PostCall)
        raise TurnNotSaved(LOST, reply=answer(event.outcome))


class ReplyThenUnsaved(HarnessAgent):
    """An agent whose stream yields the reply and only then finds the session unsaved."""

    async def stream(
        self,
        msgs: str | Msg | Sequence[Msg] | None = None,
        *,
        ctx: RuntimeContext | None = None,
        output: OutputType | OutputSpec | None = None,
        rewind: bool = False,
    ) -> AsyncGenerator[StreamItem, None]:
        async for item in super().stream(msgs, ctx=ctx, output=output, rewind=rewind):
            yield item
        raise TurnNotSaved(LOST)


def by_hook(workspace: Path) -> Callable[[], contextlib.AbstractAsyncContextManager[HarnessAgent]]:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with HarnessAgent(
            model=ScriptedChatModel(TURNS), workspace=workspace, memory=None, hooks=[SaveFails()]
        ) as agent:
            yield agent

    return opened


def after_reply(
    workspace: Path,
) -> Callable[[], contextlib.AbstractAsyncContextManager[HarnessAgent]]:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with ReplyThenUnsaved(
            model=ScriptedChatModel(TURNS), workspace=workspace, memory=None
        ) as agent:
            yield agent

    return opened


def by_store(workspace: Path) -> Callable[[], contextlib.AbstractAsyncContextManager[HarnessAgent]]:
    """The session's store itself fails: what the agent does about it is the library's."""

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[HarnessAgent]:
        async with HarnessAgent(
            model=ScriptedChatModel(TURNS), workspace=workspace, memory=None
        ) as agent:

            async def full(*args: Any, **kwargs: Any) -> None:
                raise StorageError("the disk is full")

            agent.sessions.save = full  # type: ignore[method-assign]
            yield agent

    return opened


@pytest.fixture(params=[by_hook, after_reply])
def server(request: pytest.FixtureRequest, workspace: Path) -> Iterator[Served]:
    with served(request.param(workspace)) as running:
        yield running


async def native_events(server: Served) -> list[tuple[str, Any]]:
    async with (
        httpx2.AsyncClient(base_url=server.url, timeout=20) as api,
        api.stream("POST", "/v1/sessions/s1/turns", json={"input": "hello"}) as reply,
    ):
        assert reply.status_code == 200  # the stream had begun: the failure is an event
        return list(sse_events(iter([line + "\n" async for line in reply.aiter_lines()])))


def assert_failed_unsaved(events: list[tuple[str, Any]]) -> None:
    names = [name for name, _ in events]
    assert names[0] == "turn.started"
    assert "turn.completed" not in names
    assert names[-1] == "error"
    assert events[-1][1]["code"] == "turn_not_saved"


async def test_the_native_stream_ends_in_an_error_and_no_reply(server: Served) -> None:
    events = await native_events(server)
    assert_failed_unsaved(events)
    assert "disk is full" in events[-1][1]["message"]


async def test_a_plain_completion_is_an_error_status(server: Served) -> None:
    async with openai.AsyncOpenAI(
        base_url=f"{server.url}/v1", api_key="unused", max_retries=0
    ) as api:
        with pytest.raises(openai.APIStatusError, match="disk is full") as failed:
            await api.chat.completions.create(
                model="harness", messages=[{"role": "user", "content": "hello"}]
            )
    assert failed.value.status_code == 503
    body = failed.value.body
    assert isinstance(body, dict)
    assert body["code"] == "turn_not_saved"
    assert body["type"] == "server_error"


async def test_an_openai_stream_ends_without_a_normal_finish(server: Served) -> None:
    body = {
        "model": "harness",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with (
        httpx2.AsyncClient(base_url=server.url, timeout=20) as api,
        api.stream("POST", "/v1/chat/completions", json=body) as reply,
    ):
        lines = [line async for line in reply.aiter_lines()]
    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert "[DONE]" not in data
    chunks = [json.loads(item) for item in data]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
    assert "stop" not in finishes
    assert not any("usage" in c for c in chunks)
    assert chunks[-1]["error"]["code"] == "turn_not_saved"
    # And the SDK raises it, as for any failed turn.
    async with openai.AsyncOpenAI(
        base_url=f"{server.url}/v1", api_key="unused", max_retries=0
    ) as sdk:
        stream = await sdk.chat.completions.create(
            model="harness", messages=[{"role": "user", "content": "again"}], stream=True
        )
        with pytest.raises(openai.APIError, match="disk is full"):
            async for _ in stream:
                pass


async def test_a_store_that_fails_makes_the_turn_fail(workspace: Path) -> None:
    with served(by_store(workspace)) as server:
        assert_failed_unsaved(await native_events(server))
