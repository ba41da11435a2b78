"""A client told its turn started never loses its question, whenever the turn is stopped.

``turn.started`` is sent once the agent has taken the turn's input (the kernel's ``accepted``
item), not when the session's gate is taken: between the two the agent still waits for the
session's lease and loads its saved state, and a stop there (a cancel, a client that left) used
to end the turn before the input was saved, though the client had been told it began.

The session's load is slowed to widen that window, and a stop is drawn at any moment of it and
of the turn after it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import HarnessAgent
from harness.kernel import History, SessionState
from harness.models import ScriptedChatModel
from harness.serve import ServeConfig
from harness.serve.streams import TurnStreams
from harness.serve.turns import Turns

QUESTION = "Please keep this question: what is the capital of Portugal?"

T = TypeVar("T")


def in_a_workspace(main: Callable[[Path], Coroutine[Any, Any, T]]) -> T:
    """Run ``main`` with a new workspace directory on an event loop of its own.

    The directory outlives the loop, whose end waits for its worker threads: a lock file a
    thread takes after its caller was cancelled is made before the directory is removed.
    """
    with tempfile.TemporaryDirectory() as top:
        return asyncio.run(main(Path(top) / "ws"))


def slowed(agent: HarnessAgent, seconds: float) -> Callable[[], None]:
    """Make the agent's session loads take ``seconds`` longer; returns what undoes it.

    A call loads its session with ``restore`` (messages and state in one trip).
    """
    restore = agent.sessions.restore

    async def slow_restore(*args: Any, **kwargs: Any) -> tuple[History, SessionState]:
        await asyncio.sleep(seconds)
        return await restore(*args, **kwargs)

    agent.sessions.restore = slow_restore  # type: ignore[method-assign]

    def undo() -> None:
        agent.sessions.restore = restore  # type: ignore[method-assign]

    return undo


async def _stop_at(
    workspace: Path, load_delay: float, stop_after: float, detach: bool, cancel: bool
) -> None:
    model = ScriptedChatModel([{"text": "Lisbon.", "delay": 0.03, "repeat": True}])
    async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:
        undo = slowed(agent, load_delay)
        turns = Turns(agent, ServeConfig())
        streams = TurnStreams(turns)
        ctx = turns.context(None, "s")
        starting = asyncio.ensure_future(streams.start(ctx, QUESTION, detach=detach))
        await asyncio.sleep(stop_after)
        told = starting.done()
        if told:  # the client has heard turn.started: now it stops the turn
            turn = starting.result()
            assert turn.emitted[0][0] == "turn.started"
            if cancel:
                turn.stop()  # the cancel route
            else:
                await turn.aclose()  # the client left: stops a turn not detached
            await turn.wait()
        else:  # the client leaves before it heard anything
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
        await streams.aclose()
        undo()
        saved = [message.text for message in await agent.sessions.load(ctx)]
    if told:
        assert QUESTION in saved, (load_delay, stop_after, detach, cancel, saved)
    assert saved.count(QUESTION) <= 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    load_delay=st.sampled_from([0.0, 0.02, 0.05]),
    stop_after=st.floats(min_value=0.0, max_value=0.09),
    detach=st.booleans(),
    cancel=st.booleans(),
)
def test_a_turn_the_client_heard_start_keeps_its_question_whenever_it_stops(
    load_delay: float, stop_after: float, detach: bool, cancel: bool
) -> None:
    in_a_workspace(lambda ws: _stop_at(ws, load_delay, stop_after, detach, cancel))


def test_the_stream_sends_turn_started_once_and_never_the_accepted_marker() -> None:
    async def events(workspace: Path) -> list[str]:
        model = ScriptedChatModel([{"text": "Lisbon."}])
        async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:
            turns = Turns(agent, ServeConfig())
            return [name async for name, _ in turns.run(turns.context(None, "s"), QUESTION)]

    names = in_a_workspace(events)
    assert names[0] == "turn.started"
    assert names.count("turn.started") == 1
    assert "accepted" not in names
    assert "progress" not in names
    assert names[-1] == "turn.completed"


def test_a_turn_that_fails_before_the_agent_took_its_input_still_starts_with_turn_started() -> None:
    async def emitted(workspace: Path) -> list[tuple[str, Any]]:
        model = ScriptedChatModel([{"text": "Lisbon."}])
        async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:

            async def broken(*args: Any, **kwargs: Any) -> tuple[History, SessionState]:
                raise RuntimeError("a bug in a backend")

            agent.sessions.restore = broken  # type: ignore[method-assign]
            turns = Turns(agent, ServeConfig())
            turn = await TurnStreams(turns).start(turns.context(None, "s"), QUESTION)
            await turn.wait()
            return list(turn.emitted)

    events = in_a_workspace(emitted)
    assert [name for name, _ in events] == ["turn.started", "error"]
    assert events[1][1]["code"] == "internal_error"


def test_closing_stops_a_detached_turn_whose_client_left_before_it_started() -> None:
    """Such a turn is in no list a reconnect reads yet, but the server's close must stop it:
    left running, it went on writing into a workspace its agent had closed."""

    async def run(workspace: Path) -> None:
        model = ScriptedChatModel([{"text": "Lisbon.", "delay": 5}])
        async with HarnessAgent(model=model, workspace=workspace, memory=None) as agent:
            slowed(agent, 0.2)
            turns = Turns(agent, ServeConfig())
            streams = TurnStreams(turns)
            ctx = turns.context(None, "s")
            starting = asyncio.ensure_future(streams.start(ctx, QUESTION, detach=True))
            await asyncio.sleep(0.01)
            starting.cancel()  # the client leaves before turn.started
            await asyncio.gather(starting, return_exceptions=True)
            assert len(streams.running) == 1  # detached: it goes on
            await asyncio.wait_for(streams.aclose(), timeout=2)
            assert not streams.running

    in_a_workspace(run)
