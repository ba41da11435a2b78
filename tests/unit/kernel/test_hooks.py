"""Contract tests for hooks and the hook chain (harness.kernel.hooks)."""

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import pytest

from _outcomes import answer
from harness.context import RuntimeContext
from harness.kernel import (
    DEFAULT_HOOK_PRIORITY,
    Error,
    Event,
    Finished,
    Hook,
    HookChain,
    HookHost,
    Msg,
    PostCall,
    PreCall,
    PreReasoning,
    ReActAgent,
    Tool,
    Toolkit,
)
from harness.models.scripted import ScriptedChatModel

CTX = RuntimeContext(session_id="s")


def pre_call() -> PreCall:
    return PreCall(ctx=CTX, agent="a", memory=[], call_id="c1", inputs=[])


def post_call() -> PostCall:
    return PostCall(
        ctx=CTX,
        agent="a",
        memory=[],
        call_id="c1",
        outcome=Finished(Msg(role="assistant", content="x")),
    )


class Recorder(Hook):
    def __init__(self, label: str, log: list[str], priority: int | None = None) -> None:
        self.label = label
        self.log = log
        if priority is not None:
            self.priority = priority

    async def on_event(self, event: Event) -> None:
        self.log.append(f"{self.label}:{type(event).__name__}")


class PreCallOnly(Recorder):
    events: ClassVar[tuple[type[Event], ...]] = (PreCall,)


class CallBoundaries(Recorder):
    events: ClassVar[tuple[type[Event], ...]] = (PreCall, PostCall)


class Failing(Hook):
    def __init__(self, on: type[Event], log: list[str] | None = None) -> None:
        self.on = on
        self.log = log

    async def on_event(self, event: Event) -> None:
        if self.log is not None:
            self.log.append(type(event).__name__)
        if isinstance(event, self.on):
            msg = f"hook failed on {type(event).__name__}"
            raise RuntimeError(msg)


def test_default_priority_is_100() -> None:
    assert DEFAULT_HOOK_PRIORITY == 100
    assert Hook.priority == 100
    assert Recorder("x", []).priority == 100


async def test_lower_priority_runs_first_and_ties_keep_registration_order() -> None:
    log: list[str] = []
    hooks = [
        Recorder("a50", log, 50),
        Recorder("b10", log, 10),
        Recorder("c50", log, 50),
        Recorder("d_default", log),
        Recorder("e10", log, 10),
        Recorder("f0", log, 0),
        Recorder("g50", log, 50),
    ]

    chain = HookChain(hooks)
    await chain.dispatch(pre_call())

    expected = ["f0", "b10", "e10", "a50", "c50", "g50", "d_default"]
    assert [hook.label for hook in chain.hooks if isinstance(hook, Recorder)] == expected
    assert log == [f"{label}:PreCall" for label in expected]


async def test_events_filter_which_events_a_hook_sees() -> None:
    log: list[str] = []
    only = PreCallOnly("only", log)
    both = CallBoundaries("both", log)
    every = Recorder("every", log)
    chain = HookChain([only, both, every])

    await chain.dispatch(pre_call())
    await chain.dispatch(post_call())
    await chain.dispatch(Error(ctx=CTX, agent="a", memory=[], call_id="c1", error=ValueError("x")))

    assert log == [
        "only:PreCall",
        "both:PreCall",
        "every:PreCall",
        "both:PostCall",
        "every:PostCall",
        "every:Error",
    ]
    assert chain.for_event(PreCall) == (only, both, every)
    assert chain.for_event(PostCall) == (both, every)
    assert chain.for_event(PreReasoning) == (every,)


def test_handles_uses_the_event_class_hierarchy() -> None:
    class AnyEvent(Hook):
        events: ClassVar[tuple[type[Event], ...]] = (Event,)

    assert AnyEvent().handles(PreCall) is True
    assert PreCallOnly("x", []).handles(PreCall) is True
    assert PreCallOnly("x", []).handles(PostCall) is False
    assert Hook().handles(Error) is True


async def test_exception_in_a_hook_propagates_and_stops_the_dispatch() -> None:
    log: list[str] = []
    chain = HookChain([Failing(PreCall), Recorder("later", log, 200)])

    with pytest.raises(RuntimeError, match="hook failed on PreCall"):
        await chain.dispatch(pre_call())
    assert log == []

    await chain.dispatch(post_call())
    assert log == ["later:PostCall"]


async def test_exception_in_a_hook_propagates_from_call() -> None:
    log: list[str] = []
    model = ScriptedChatModel([{"text": "never used"}])
    agent = ReActAgent(name="a", model=model, hooks=[Failing(PreReasoning, log)])

    with pytest.raises(RuntimeError, match="hook failed on PreReasoning"):
        answer(await agent.call("hi"))

    # the model was never asked, and the hook saw the Error event for its own failure
    assert model.requests == []
    assert log == ["PreCall", "PreReasoning", "Error"]


class ClockHook(Hook):
    """A hook that contributes a tool."""

    def tools(self) -> Sequence[Callable[..., Any] | Tool]:
        def clock() -> str:
            """Tell the time."""
            return "12:00"

        return [clock]


async def test_hooks_contribute_tools_to_the_agent() -> None:
    def echo(text: str) -> str:
        return text

    callers_toolkit = Toolkit([echo])
    model = ScriptedChatModel(
        [
            {"tool_calls": [{"name": "clock"}]},
            {"match": "12:00", "text": "It is noon."},
        ]
    )
    agent = ReActAgent(name="a", model=model, toolkit=callers_toolkit, hooks=[ClockHook()])

    reply = answer(await agent.call("what time is it?"))

    assert reply.text == "It is noon."
    assert agent.toolkit.names == ["echo", "clock"]
    assert callers_toolkit.names == ["echo"]
    assert [m.tool_results[0].output for m in agent.memory if m.role == "tool"] == ["12:00"]


def test_a_hook_tool_clashing_with_a_given_tool_is_rejected() -> None:
    def clock() -> str:
        return "mine"

    with pytest.raises(ValueError, match="'clock' is already registered"):
        ReActAgent(name="a", model=ScriptedChatModel([]), toolkit=[clock], hooks=[ClockHook()])


class CallIds(Hook):
    """Records (call id, event name) of every event."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def on_event(self, event: Event) -> None:
        self.seen.append((event.call_id, type(event).__name__))


async def test_every_event_of_a_call_carries_its_id_and_concurrent_calls_differ() -> None:
    def noop() -> str:
        """Do nothing."""
        return "ok"

    turns: list[dict[str, Any]] = [
        {"match": "^first$", "tool_calls": [{"name": "noop", "input": {}}]},
        {"match": "^second$", "tool_calls": [{"name": "noop", "input": {}}]},
        {"text": "done", "repeat": True},
    ]
    ids = CallIds()
    agent = ReActAgent(name="a", model=ScriptedChatModel(turns), toolkit=[noop], hooks=[ids])
    await asyncio.gather(agent.call("first", memory=[]), agent.call("second", memory=[]))
    by_call: dict[str, list[str]] = {}
    for call_id, name in ids.seen:
        by_call.setdefault(call_id, []).append(name)
    assert len(by_call) == 2
    for names in by_call.values():
        assert names[0] == "PreCall"
        assert names[-1] == "PostCall"
        assert {"PreReasoning", "PostReasoning", "PreActing", "PostActing"} <= set(names)
    assert all(call_id.startswith("call-") for call_id in by_call)


class Deriving(Hook):
    """Keeps its agent at attach and emits a PostCall of its own at each PreCall."""

    events: ClassVar[tuple[type[Event], ...]] = (PreCall,)

    def __init__(self) -> None:
        self.attached: list[tuple[HookHost, list[str]]] = []

    def attach(self, agent: HookHost) -> None:
        self.attached.append((agent, list(agent.toolkit.names)))

    async def on_event(self, event: Event) -> None:
        agent, _ = self.attached[0]
        await agent.emit(
            PostCall(
                ctx=event.ctx,
                agent=event.agent,
                memory=event.memory,
                call_id=event.call_id,
                outcome=Finished(Msg(role="assistant", content="derived")),
            )
        )


async def test_each_agent_attaches_its_hooks_once_its_toolkit_is_complete() -> None:
    deriving, log = Deriving(), list[str]()
    first = ReActAgent(
        name="a", model=ScriptedChatModel([]), hooks=[deriving, ClockHook(), Recorder("r", log)]
    )
    second = ReActAgent(name="b", model=ScriptedChatModel([]), hooks=[deriving])
    assert deriving.attached == [(first, ["clock"]), (second, [])]


async def test_an_event_a_hook_emits_reaches_every_hook_of_its_agent() -> None:
    deriving, log = Deriving(), list[str]()
    model = ScriptedChatModel([{"text": "reply"}])
    agent = ReActAgent(name="a", model=model, hooks=[deriving, Recorder("r", log)])
    answer(await agent.call("hi", memory=[]))
    assert log[:2] == ["r:PostCall", "r:PreCall"]  # derived while the PreCall reached its hooks
    assert log.count("r:PostCall") == 2
