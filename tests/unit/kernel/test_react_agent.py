"""Contract tests for the ReAct loop (harness.kernel.agent) driven by the scripted model."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any

import pytest

from _outcomes import answer
from harness.context import RuntimeContext
from harness.errors import AgentInterrupted, ModelError, ScriptExhaustedError
from harness.kernel import (
    DEFAULT_MAX_ITERS,
    Cancelled,
    ChatChunk,
    ChatModel,
    ChatResponse,
    Error,
    Event,
    Failed,
    Finished,
    Hook,
    Msg,
    PostActing,
    PostCall,
    PostReasoning,
    PreActing,
    PreCall,
    PreReasoning,
    Progress,
    ReActAgent,
    StreamItem,
    TextBlock,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolResultBlock,
    ToolSchema,
    ToolStarted,
    ToolUseBlock,
    Usage,
    report,
)
from harness.kernel.agent import MAX_ITERS_HINT
from harness.models.scripted import ScriptedChatModel

# --- helpers ----------------------------------------------------------------------------------

ACCEPTED = Progress("accepted")
"""A streamed call's first item: the call has taken its input."""


class Recording:
    """A ChatModel wrapper that records every request's messages and tools (and options)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.requests: list[tuple[list[Msg], list[ToolSchema]]] = []
        self.options: list[dict[str, Any]] = []

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.requests.append((list(messages), list(tools)))
        self.options.append(dict(options))
        async for item in self.inner.stream(messages, tools, **options):
            yield item


def scripted(*turns: dict[str, Any]) -> Recording:
    return Recording(ScriptedChatModel(list(turns)))


class EventLog(Hook):
    """Records every event it sees."""

    def __init__(self) -> None:
        self.seen: list[Event] = []

    async def on_event(self, event: Event) -> None:
        self.seen.append(event)

    @property
    def names(self) -> list[str]:
        return [type(event).__name__ for event in self.seen]

    def of(self, kind: type[Event]) -> list[Any]:
        return [event for event in self.seen if isinstance(event, kind)]


class StallingModel:
    """Streams one chunk, then waits until cancelled."""

    model_name = "stalling"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        yield ChatChunk(text="partial ")
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        yield ChatResponse(content=[])  # pragma: no cover


class FailingModel:
    model_name = "failing"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        yield ChatChunk(text="so far ")
        raise self.error


class SlowTool:
    """An async tool `wait` that blocks until released (or cancelled)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def wait(self) -> str:
        """Wait for a while."""
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return "waited"


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


async def within(waiting: Awaitable[Any], seconds: float = 2) -> None:
    """Await something the test expects to happen soon; fail instead of hanging."""
    await asyncio.wait_for(waiting, timeout=seconds)


def transcript(memory: list[Msg]) -> list[str]:
    """One line per message: its role and its text, tool calls or tool results."""
    lines = []
    for msg in memory:
        parts = [msg.text] if msg.text else []
        parts += [
            f"-> {use.name}({', '.join(f'{k}={v}' for k, v in use.input.items())})"
            for use in msg.tool_uses
        ]
        parts += [result.text for result in msg.tool_results]
        lines.append(f"{msg.role}: {' '.join(parts)}")
    return lines


def unanswered_tool_calls(memory: list[Msg]) -> set[str]:
    uses = {block.id for msg in memory for block in msg.tool_uses}
    results = {block.id for msg in memory for block in msg.tool_results}
    return uses - results


ADD_THEN_ANSWER = (
    {
        "match": "add",
        "text": "Let me check.",
        "tool_calls": [{"name": "add", "input": {"a": 2, "b": 3}}],
    },
    {"match": "^5$", "text": "The sum is 5.", "usage": {"input_tokens": 30, "output_tokens": 6}},
)


# --- the loop ---------------------------------------------------------------------------------


async def test_single_answer() -> None:
    model = scripted({"text": "Hello there!"})
    agent = ReActAgent(name="helper", model=model)

    reply = answer(await agent.call("hi"))

    assert reply.role == "assistant"
    assert reply.name == "helper"
    assert reply.content == [TextBlock(text="Hello there!")]
    assert reply.metadata == {"model": "scripted"}
    assert [(m.role, m.text) for m in agent.memory] == [
        ("user", "hi"),
        ("assistant", "Hello there!"),
    ]
    assert agent.memory[-1] is reply
    [(messages, tools)] = model.requests
    assert [(m.role, m.text) for m in messages] == [("user", "hi")]
    assert tools == []


async def test_tool_loop() -> None:
    model = scripted(*ADD_THEN_ANSWER)
    agent = ReActAgent(name="calc", model=model, toolkit=[add])

    reply = answer(await agent.call("please add 2 and 3"))

    assert reply.text == "The sum is 5."
    assert reply.metadata == {
        "model": "scripted",
        "usage": {
            "input_tokens": 30,
            "output_tokens": 6,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
        },
    }
    user, call_msg, result_msg, final = agent.memory
    assert user.text == "please add 2 and 3"
    assert call_msg.tool_uses == [ToolUseBlock(id="call_0", name="add", input={"a": 2, "b": 3})]
    assert result_msg.role == "tool"
    assert result_msg.content == [ToolResultBlock(id="call_0", name="add", output="5")]
    assert final is reply
    assert len(model.requests) == 2
    second_request, second_tools = model.requests[1]
    assert second_request == [user, call_msg, result_msg]
    assert [tool.name for tool in second_tools] == ["add"]


async def test_memory_carries_over_between_calls() -> None:
    model = scripted({"match": "one", "text": "first"}, {"match": "two", "text": "second"})
    agent = ReActAgent(name="a", model=model)

    answer(await agent.call("one"))
    answer(await agent.call("two"))

    assert [m.text for m in agent.memory] == ["one", "first", "two", "second"]
    assert [m.text for m in model.requests[1][0]] == ["one", "first", "two"]


async def test_call_without_input_continues_memory() -> None:
    model = scripted({"text": "continued"})
    agent = ReActAgent(name="a", model=model)
    agent.memory.append(Msg(role="user", content="earlier"))

    reply = answer(await agent.call())

    assert reply.text == "continued"
    assert [m.text for m in model.requests[0][0]] == ["earlier"]


async def test_tool_errors_go_back_to_the_model_and_the_loop_continues() -> None:
    model = scripted(
        {"match": "go", "tool_calls": [{"name": "missing"}]},
        {"match": "unknown tool", "text": "That tool does not exist."},
    )
    agent = ReActAgent(name="a", model=model, toolkit=[add])

    reply = answer(await agent.call("go"))

    assert reply.text == "That tool does not exist."
    [result] = agent.memory[2].tool_results
    assert result.is_error
    assert result.output == "Error: unknown tool 'missing'. Available tools: add"


async def test_tool_calls_of_one_step_run_concurrently() -> None:
    left_ready, right_ready = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    async def left() -> str:
        left_ready.set()
        # Only finishes if `right` runs while `left` waits.
        await asyncio.wait_for(right_ready.wait(), timeout=2)
        await asyncio.sleep(0)
        finished.append("left")
        return "left done"

    async def right() -> str:
        right_ready.set()
        await asyncio.wait_for(left_ready.wait(), timeout=2)
        finished.append("right")
        return "right done"

    model = scripted(
        {"match": "both", "tool_calls": [{"name": "left"}, {"name": "right"}]},
        {"match": "done", "text": "finished"},
    )
    agent = ReActAgent(name="a", model=model, toolkit=[left, right])

    reply = answer(await agent.call("run both"))

    assert reply.text == "finished"
    results = [m.tool_results[0] for m in agent.memory if m.role == "tool"]
    assert [(r.id, r.output, r.is_error) for r in results] == [
        ("call_0", "left done", False),
        ("call_1", "right done", False),
    ]
    # results are kept in the order of the calls, not the order they finished in
    assert finished == ["right", "left"]


async def test_parallel_tools_false_runs_calls_one_after_another() -> None:
    log: list[str] = []

    async def first() -> str:
        log.append("first start")
        await asyncio.sleep(0)
        log.append("first end")
        return "1"

    async def second() -> str:
        log.append("second start")
        await asyncio.sleep(0)
        log.append("second end")
        return "2"

    model = scripted(
        {"match": "go", "tool_calls": [{"name": "first"}, {"name": "second"}]},
        {"text": "ok"},
    )
    agent = ReActAgent(name="a", model=model, toolkit=[first, second], parallel_tools=False)

    answer(await agent.call("go"))

    assert log == ["first start", "first end", "second start", "second end"]


async def test_a_failing_step_cancels_its_other_tool_calls() -> None:
    slow = SlowTool()

    async def fast() -> str:
        return "fast"

    class FailBeforeFast(Hook):
        events = (PreActing,)

        async def on_event(self, event: Event) -> None:
            assert isinstance(event, PreActing)
            if event.tool_call.name == "fast":
                await within(slow.started.wait())
                msg = "cannot run fast"
                raise RuntimeError(msg)

    log = EventLog()
    model = scripted({"tool_calls": [{"name": "wait"}, {"name": "fast"}]})
    agent = ReActAgent(
        name="a", model=model, toolkit=[slow.wait, fast], hooks=[FailBeforeFast(), log]
    )

    with pytest.raises(RuntimeError, match="cannot run fast"):
        answer(await agent.call("go"))

    # the sibling tool did not outlive the call that started it
    assert slow.cancelled is True
    assert log.names[-1] == "Error"
    assert "PostActing" not in log.names


async def test_max_iters_defaults_to_15_then_a_final_call_that_may_not_use_tools() -> None:
    ticks: list[int] = []

    def tick() -> str:
        ticks.append(1)
        return "ticked"

    model = scripted(
        {"match": "every reasoning step", "text": "I ran out of steps."},
        {"tool_calls": [{"name": "tick"}], "repeat": True},
    )
    agent = ReActAgent(name="a", model=model, toolkit=[tick])

    reply = answer(await agent.call("keep going"))

    assert DEFAULT_MAX_ITERS == 15
    assert agent.max_iters == 15
    assert reply.text == "I ran out of steps."
    assert len(ticks) == 15
    assert len(model.requests) == 16
    assert all([t.name for t in tools] == ["tick"] for _, tools in model.requests[:15])
    final_messages, final_tools = model.requests[15]
    # tools stay described (a history with tool calls needs them) but may not be called
    assert [t.name for t in final_tools] == ["tick"]
    assert model.options == [{}] * 15 + [{"tool_choice": "none"}]
    hint = final_messages[-1]
    assert (hint.role, hint.name, hint.text) == ("user", "system_hint", MAX_ITERS_HINT)
    # the hint is for that request only
    assert all(m.name != "system_hint" for m in agent.memory)
    assert len(agent.memory) == 1 + 15 * 2 + 1


async def test_custom_max_iters() -> None:
    model = scripted(
        {"match": "every reasoning step", "text": "stopping"},
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 1}}], "repeat": True},
    )
    agent = ReActAgent(name="a", model=model, toolkit=[add], max_iters=2)

    reply = answer(await agent.call("loop"))

    assert reply.text == "stopping"
    assert [len(tools) for _, tools in model.requests] == [1, 1, 1]
    assert model.options == [{}, {}, {"tool_choice": "none"}]


async def test_tool_calls_in_the_final_answer_are_dropped() -> None:
    model = scripted(
        {
            "text": "still working",
            "tool_calls": [{"name": "add", "input": {"a": 1, "b": 1}}],
            "repeat": True,
        }
    )
    agent = ReActAgent(name="a", model=model, toolkit=[add], max_iters=1)

    reply = answer(await agent.call("loop"))

    assert reply.content == [TextBlock(text="still working")]
    assert unanswered_tool_calls(agent.memory) == set()
    assert [m.role for m in agent.memory] == ["user", "assistant", "tool", "assistant"]


def test_max_iters_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_iters must be at least 1, got 0"):
        ReActAgent(name="a", model=ScriptedChatModel([]), max_iters=0)


async def test_system_prompt_first_in_every_request_and_never_in_memory() -> None:
    model = scripted(*({**turn, "repeat": True} for turn in ADD_THEN_ANSWER))
    agent = ReActAgent(name="a", model=model, sys_prompt="You are terse.", toolkit=[add])

    answer(await agent.call("add them"))
    answer(await agent.call("add again"))

    assert len(model.requests) == 4
    for messages, _ in model.requests:
        assert (messages[0].role, messages[0].text) == ("system", "You are terse.")
        assert all(m.role != "system" for m in messages[1:])
    assert all(m.role != "system" for m in agent.memory)


async def test_without_system_prompt_no_system_message_is_sent() -> None:
    model = scripted({"text": "ok"})
    agent = ReActAgent(name="a", model=model, sys_prompt="")

    answer(await agent.call("hi"))

    assert agent.system_message is None
    assert [m.role for m in model.requests[0][0]] == ["user"]


async def test_model_stream_without_final_response_is_a_model_error() -> None:
    class NoFinal:
        model_name = "nofinal"

        async def stream(
            self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
        ) -> AsyncIterator[ChatChunk | ChatResponse]:
            yield ChatChunk(text="dangling")

    log = EventLog()
    agent = ReActAgent(name="a", model=NoFinal(), hooks=[log])

    with pytest.raises(
        ModelError, match="model 'nofinal' ended its stream without a final response"
    ):
        answer(await agent.call("hi"))
    assert log.names[-1] == "Error"


async def test_script_exhausted_quotes_the_last_message() -> None:
    agent = ReActAgent(name="a", model=ScriptedChatModel([{"match": "weather", "text": "sunny"}]))

    with pytest.raises(ScriptExhaustedError) as info:
        answer(await agent.call("tell me a joke"))

    assert str(info.value) == (
        "scripted model has no turn left that matches the request; last message: 'tell me a joke'"
    )


# --- events -----------------------------------------------------------------------------------


async def test_event_sequence_all_carrying_the_calls_context() -> None:
    log = EventLog()
    agent = ReActAgent(name="calc", model=scripted(*ADD_THEN_ANSWER), toolkit=[add], hooks=[log])
    ctx = RuntimeContext(session_id="s1", user_id="u1")

    reply = answer(await agent.call("add please", ctx=ctx))

    assert log.names == [
        "PreCall",
        "PreReasoning",
        "PostReasoning",
        "ToolDecision",
        "PreActing",
        "PostActing",
        "PreReasoning",
        "PostReasoning",
        "PostCall",
    ]
    assert all(event.ctx is ctx for event in log.seen)
    assert all(event.agent == "calc" for event in log.seen)
    assert all(event.memory is agent.memory for event in log.seen)

    [pre_call] = log.of(PreCall)
    assert [m.text for m in pre_call.inputs] == ["add please"]
    assert [pre.step for pre in log.of(PreReasoning)] == [0, 1]
    post_reasoning = log.of(PostReasoning)
    assert [p.step for p in post_reasoning] == [0, 1]
    assert [p.message for p in post_reasoning] == [agent.memory[1], agent.memory[3]]
    assert [p.usage for p in post_reasoning] == [None, Usage(input_tokens=30, output_tokens=6)]
    assert [p.model for p in post_reasoning] == ["scripted", "scripted"]
    [pre_acting] = log.of(PreActing)
    assert pre_acting.tool_call == ToolUseBlock(id="call_0", name="add", input={"a": 2, "b": 3})
    [post_acting] = log.of(PostActing)
    assert post_acting.result == ToolResultBlock(id="call_0", name="add", output="5")
    assert post_acting.latency_s >= 0
    [post_call] = log.of(PostCall)
    assert post_call.outcome == Finished(reply)


async def test_call_without_ctx_gets_an_empty_context() -> None:
    log = EventLog()
    agent = ReActAgent(name="a", model=scripted({"text": "ok"}), hooks=[log])

    answer(await agent.call("hi"))

    ctx = log.seen[0].ctx
    assert ctx == RuntimeContext()
    assert all(event.ctx is ctx for event in log.seen)


async def test_pre_reasoning_messages_change_only_the_request() -> None:
    class Inject(Hook):
        events = (PreReasoning,)

        async def on_event(self, event: Event) -> None:
            assert isinstance(event, PreReasoning)
            extra = Msg(role="system", content=f"step {event.step}")
            event.messages = [extra, *event.messages]
            event.messages.append(Msg(role="user", content="(reminder)"))

    model = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 2, "b": 3}}]}, {"text": "The sum is 5."}
    )
    agent = ReActAgent(name="a", model=model, toolkit=[add], hooks=[Inject()])

    answer(await agent.call("add"))

    first, _ = model.requests[0]
    second, _ = model.requests[1]
    assert [m.text for m in first] == ["step 0", "add", "(reminder)"]
    assert second[0].text == "step 1"
    assert second[-1].text == "(reminder)"
    assert [m.role for m in second[1:-1]] == ["user", "assistant", "tool"]
    assert [m.role for m in agent.memory] == ["user", "assistant", "tool", "assistant"]
    assert all(not m.text.startswith("step") and m.text != "(reminder)" for m in agent.memory)


async def test_pre_reasoning_tools_change_only_the_request() -> None:
    class HideTools(Hook):
        events = (PreReasoning,)

        async def on_event(self, event: Event) -> None:
            assert isinstance(event, PreReasoning)
            event.tools = []

    model = scripted({"text": "ok"})
    agent = ReActAgent(name="a", model=model, toolkit=[add], hooks=[HideTools()])

    answer(await agent.call("hi"))

    assert model.requests[0][1] == []
    assert agent.toolkit.names == ["add"]


async def test_post_acting_result_replacement_is_what_memory_keeps() -> None:
    class Redact(Hook):
        events = (PostActing,)

        async def on_event(self, event: Event) -> None:
            assert isinstance(event, PostActing)
            event.result = ToolResultBlock(
                id=event.result.id, name=event.result.name, output="[redacted]"
            )

    model = scripted(
        ADD_THEN_ANSWER[0], {"match": r"\[redacted\]", "text": "The result was hidden."}
    )
    agent = ReActAgent(name="a", model=model, toolkit=[add], hooks=[Redact()])

    items = [item async for item in agent.stream("add")]

    assert agent.memory[2].content == [
        ToolResultBlock(id="call_0", name="add", output="[redacted]")
    ]
    assert model.requests[1][0][-1].tool_results[0].output == "[redacted]"
    finished = [item for item in items if isinstance(item, ToolFinished)]
    assert finished == [ToolFinished(ToolResultBlock(id="call_0", name="add", output="[redacted]"))]
    assert agent.memory[-1].text == "The result was hidden."


async def test_post_call_reply_replacement_is_what_the_caller_gets() -> None:
    replacement = Msg(role="assistant", content="rewritten")

    class Rewrite(Hook):
        events = (PostCall,)

        async def on_event(self, event: Event) -> None:
            assert isinstance(event, PostCall)
            event.outcome = Finished(replacement)

    agent = ReActAgent(
        name="a", model=scripted({"text": "original", "repeat": True}), hooks=[Rewrite()]
    )

    reply = answer(await agent.call("hi"))
    streamed = [item async for item in agent.stream("again")]

    assert reply is replacement
    assert streamed[-1] == Finished(replacement)


async def test_model_failure_dispatches_error_then_reraises() -> None:
    failure = ModelError("provider down")
    log = EventLog()
    agent = ReActAgent(name="a", model=FailingModel(failure), hooks=[log])
    ctx = RuntimeContext(session_id="s")

    with pytest.raises(ModelError) as info:
        answer(await agent.call("hi", ctx=ctx))

    assert info.value is failure
    assert log.names == ["PreCall", "PreReasoning", "Error"]
    [error] = log.of(Error)
    assert error.error is failure
    assert error.ctx is ctx
    assert [m.text for m in error.memory] == ["hi"]
    assert not hasattr(failure, "__notes__")


async def test_hook_failing_during_error_adds_a_note_and_the_original_error_propagates() -> None:
    class BrokenErrorHandler(Hook):
        events = (Error,)

        async def on_event(self, event: Event) -> None:
            msg = "cannot save"
            raise OSError(msg)

    later = EventLog()
    failure = ModelError("provider down")
    agent = ReActAgent(name="a", model=FailingModel(failure), hooks=[BrokenErrorHandler(), later])

    with pytest.raises(ModelError) as info:
        answer(await agent.call("hi"))

    assert info.value is failure
    assert info.value.__notes__ == [
        "while reporting this error, a hook failed: OSError('cannot save')"
    ]
    # the failing hook stopped the dispatch of Error to later hooks
    assert "Error" not in later.names


# --- interruption and cancellation ------------------------------------------------------------


async def test_interrupt_during_a_slow_tool() -> None:
    slow = SlowTool()
    log = EventLog()
    model = scripted(
        {"match": "wait", "tool_calls": [{"name": "wait"}]}, {"match": "again", "text": "fine"}
    )
    agent = ReActAgent(name="a", model=model, toolkit=[slow.wait], hooks=[log])

    task = asyncio.create_task(agent.call("wait for it"))
    await within(slow.started.wait())
    agent.interrupt()

    with pytest.raises(AgentInterrupted, match="agent 'a' was interrupted"):
        await task
    assert slow.cancelled is True
    assert log.names[-1] == "Error"
    assert isinstance(log.of(Error)[0].error, AgentInterrupted)
    assert "PostActing" not in log.names
    # the tool call that never got its result is gone, so memory stays a valid conversation
    assert [(m.role, m.text) for m in agent.memory] == [("user", "wait for it")]
    assert log.of(Error)[0].memory == agent.memory

    # the agent can be called again afterwards
    assert (answer(await agent.call("again"))).text == "fine"
    assert [m.role for m in model.requests[-1][0]] == ["user", "user"]


async def test_interrupt_during_a_slow_model_stream() -> None:
    model = StallingModel()
    log = EventLog()
    agent = ReActAgent(name="a", model=model, hooks=[log])

    items: list[StreamItem] = []

    async def consume() -> None:
        async for item in agent.stream("hi"):
            items.append(item)

    task = asyncio.create_task(consume())
    await within(model.started.wait())
    agent.interrupt()

    await task
    assert items[:2] == [ACCEPTED, TextDelta("partial ")]
    [cancelled] = items[2:]  # the stream ends with how the call ended: no exception
    assert isinstance(cancelled, Cancelled)
    assert isinstance(cancelled.error, AgentInterrupted)
    assert model.cancelled is True
    assert log.names == ["PreCall", "PreReasoning", "Error"]
    assert isinstance(log.of(Error)[0].error, AgentInterrupted)
    # nothing of the partial answer is kept
    assert [m.role for m in agent.memory] == ["user"]


async def test_interrupt_a_call_awaited_in_the_callers_task() -> None:
    model = StallingModel()
    agent = ReActAgent(name="a", model=model)

    async def interrupt_soon() -> None:
        await within(model.started.wait())
        agent.interrupt()

    helper = asyncio.create_task(interrupt_soon())
    with pytest.raises(AgentInterrupted):
        answer(await agent.call("hi"))
    await helper

    # the caller's own task was not left cancelled
    current = asyncio.current_task()
    assert current is not None
    assert current.cancelling() == 0
    await asyncio.sleep(0)


async def test_interrupt_stops_every_running_call() -> None:
    slow = SlowTool()
    agent = ReActAgent(
        name="a",
        model=scripted({"tool_calls": [{"name": "wait"}], "repeat": True}),
        toolkit=[slow.wait],
    )

    first = asyncio.create_task(agent.call("one", memory=[]))
    second = asyncio.create_task(agent.call("two", memory=[]))
    await within(slow.started.wait())
    await asyncio.sleep(0)
    agent.interrupt()

    results = await asyncio.gather(first, second, return_exceptions=True)

    assert [type(result) for result in results] == [AgentInterrupted, AgentInterrupted]


async def test_interrupt_without_a_running_call_does_nothing() -> None:
    agent = ReActAgent(name="a", model=scripted({"text": "ok"}))

    agent.interrupt()

    assert (answer(await agent.call("hi"))).text == "ok"


async def test_external_cancellation_propagates() -> None:
    slow = SlowTool()
    log = EventLog()
    agent = ReActAgent(
        name="a",
        model=scripted({"tool_calls": [{"name": "wait"}]}),
        toolkit=[slow.wait],
        hooks=[log],
    )

    task = asyncio.create_task(agent.call("go"))
    await within(slow.started.wait())
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert slow.cancelled is True
    assert log.names[-1] == "Error"
    assert isinstance(log.of(Error)[0].error, asyncio.CancelledError)


# --- streaming --------------------------------------------------------------------------------


async def test_stream_yields_deltas_tool_activity_and_finally_the_reply() -> None:
    agent = ReActAgent(name="calc", model=scripted(*ADD_THEN_ANSWER), toolkit=[add])

    items = [item async for item in agent.stream("add please")]

    call = ToolUseBlock(id="call_0", name="add", input={"a": 2, "b": 3})
    assert items[0] == ACCEPTED  # first: the call has taken its input
    steps = [item for item in items if isinstance(item, Progress) and item.kind == "step"]
    assert [(p.kind, p.data["step"], p.data["tool_calls"]) for p in steps] == [
        ("step", 0, ["add"]),
        ("step", 1, []),
    ]
    # Each step's report comes when that step's model call has ended, before what follows.
    assert items.index(steps[0]) == 4
    assert items.index(steps[1]) == len(items) - 2
    assert [item for item in items if not isinstance(item, Progress)] == [
        TextDelta("Let "),
        TextDelta("me "),
        TextDelta("check."),
        ToolStarted(call),
        ToolFinished(ToolResultBlock(id="call_0", name="add", output="5")),
        TextDelta("The "),
        TextDelta("sum "),
        TextDelta("is "),
        TextDelta("5."),
        Finished(agent.memory[-1]),
    ]
    assert agent.memory[-1].text == "The sum is 5."


async def test_stream_yields_thinking_deltas() -> None:
    class Thinker:
        model_name = "thinker"

        async def stream(
            self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
        ) -> AsyncIterator[ChatChunk | ChatResponse]:
            yield ChatChunk(thinking="hmm")
            yield ChatChunk(text="yes")
            yield ChatResponse(content=[TextBlock(text="yes")])

    agent = ReActAgent(name="a", model=Thinker())

    items = [item async for item in agent.stream("?")]

    assert items[:3] == [ACCEPTED, ThinkingDelta("hmm"), TextDelta("yes")]
    assert isinstance(items[3], Progress)
    assert isinstance(items[4], Finished)
    assert items[4].reply.text == "yes"
    assert items[4].reply.metadata == {"model": "thinker"}


async def test_a_stream_ends_with_the_calls_failure_and_call_raises_it() -> None:
    failure = ModelError("boom")
    agent = ReActAgent(name="a", model=FailingModel(failure))

    items = [item async for item in agent.stream("hi")]

    assert items == [ACCEPTED, TextDelta("so far "), Failed(failure)]
    with pytest.raises(ModelError, match="boom"):
        await agent.call("again")


async def test_closing_the_stream_early_cancels_the_call() -> None:
    slow = SlowTool()
    log = EventLog()
    agent = ReActAgent(
        name="a",
        model=scripted({"tool_calls": [{"name": "wait"}]}),
        toolkit=[slow.wait],
        hooks=[log],
    )

    stream = agent.stream("go")
    async with contextlib.aclosing(stream):
        async for item in stream:
            if isinstance(item, ToolStarted):
                break

    assert slow.cancelled is True
    assert log.names[-1] == "Error"
    assert isinstance(log.of(Error)[0].error, asyncio.CancelledError)
    assert "PostActing" not in log.names


# --- concurrency ------------------------------------------------------------------------------


async def test_per_call_memory_keeps_concurrent_conversations_apart() -> None:
    both_waiting = asyncio.Barrier(2)

    async def meet(who: str) -> str:
        """Wait for the other conversation, so both are in flight at once."""
        await asyncio.wait_for(both_waiting.wait(), timeout=2)
        return f"met {who}"

    model = scripted(
        {"match": "alice", "tool_calls": [{"name": "meet", "input": {"who": "alice"}}]},
        {"match": "bob", "tool_calls": [{"name": "meet", "input": {"who": "bob"}}]},
        {"match": "met alice", "text": "Hi Alice."},
        {"match": "met bob", "text": "Hi Bob."},
    )
    log = EventLog()
    agent = ReActAgent(name="a", model=model, toolkit=[meet], hooks=[log])
    alice_memory: list[Msg] = []
    bob_memory: list[Msg] = []
    alice_ctx = RuntimeContext(session_id="alice")
    bob_ctx = RuntimeContext(session_id="bob")

    alice_reply, bob_reply = await asyncio.gather(
        agent.call("I am alice", memory=alice_memory, ctx=alice_ctx),
        agent.call("I am bob", memory=bob_memory, ctx=bob_ctx),
    )

    assert answer(alice_reply).text == "Hi Alice."
    assert answer(bob_reply).text == "Hi Bob."
    assert transcript(alice_memory) == [
        "user: I am alice",
        "assistant: -> meet(who=alice)",
        "tool: met alice",
        "assistant: Hi Alice.",
    ]
    assert transcript(bob_memory) == [
        "user: I am bob",
        "assistant: -> meet(who=bob)",
        "tool: met bob",
        "assistant: Hi Bob.",
    ]
    assert agent.memory == []
    assert [event.ctx is alice_ctx for event in log.seen].count(True) == 9
    assert [event.ctx is bob_ctx for event in log.seen].count(True) == 9
    for event in log.seen:
        expected = alice_memory if event.ctx is alice_ctx else bob_memory
        assert event.memory is expected


async def test_a_consumer_cancelled_while_a_stream_cleans_up_is_cancelled() -> None:
    """asyncio hands a cancel to the task being awaited; the stream must not eat it."""

    class SlowErrorHook(Hook):
        events = (Error,)

        def __init__(self) -> None:
            self.cleaning = asyncio.Event()

        async def on_event(self, event: Event) -> None:
            self.cleaning.set()
            await asyncio.sleep(0.2)  # a hook saving the session as the call ends

    model = StallingModel()
    hook = SlowErrorHook()
    agent = ReActAgent(name="a", model=model, hooks=[hook])
    went_on: list[str] = []

    async def consume() -> None:
        async with contextlib.aclosing(agent.stream("hi")) as stream:
            async for _ in stream:
                break  # closing the stream early cancels the call, which then cleans up
        went_on.append("after the stream")

    consumer = asyncio.create_task(consume())
    await within(hook.cleaning.wait())
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert went_on == []


class Reporter(Hook):
    """Reports each tool call it sees, as a hook with something to tell a streaming caller."""

    events = (PreActing,)

    async def on_event(self, event: Event) -> None:
        assert isinstance(event, PreActing)
        report("about_to_run", tool=event.tool_call.name)


async def test_a_hooks_report_lands_in_the_stream_where_it_happened() -> None:
    agent = ReActAgent(
        name="calc", model=scripted(*ADD_THEN_ANSWER), toolkit=[add], hooks=[Reporter()]
    )

    items = [item async for item in agent.stream("add please")]

    reported = Progress("about_to_run", {"tool": "add"})
    assert items.index(reported) + 1 == next(
        i for i, item in enumerate(items) if isinstance(item, ToolStarted)
    )


async def test_reports_of_a_call_nobody_streams_go_nowhere() -> None:
    inner = ReActAgent(
        name="inner", model=scripted(*ADD_THEN_ANSWER), toolkit=[add], hooks=[Reporter()]
    )

    async def delegate() -> str:
        """Ask the inner agent."""
        return (answer(await inner.call("add please"))).text

    outer = ReActAgent(
        name="outer",
        model=scripted({"tool_calls": [{"name": "delegate", "input": {}}]}, {"text": "Done."}),
        toolkit=[delegate],
    )

    items = [item async for item in outer.stream("go")]
    kinds = [item.kind for item in items if isinstance(item, Progress)]
    # The inner call ran inside the outer's tool, not streamed: none of its reports leak out.
    assert kinds == ["accepted", "step", "step"]


async def test_call_is_stream_consumed_events_memory_and_reply_alike() -> None:
    """One turn engine: what a call does does not depend on whether anyone watches it stream."""

    def run() -> tuple[ReActAgent, EventLog]:
        log = EventLog()
        model = scripted(
            {"match": "add", "tool_calls": [{"name": "add", "input": {"a": 2, "b": 3}}]},
            {"match": "^5$", "text": "The sum is 5."},
        )
        return ReActAgent(name="a", model=model, toolkit=[add], hooks=[log]), log

    called, called_log = run()
    reply = answer(await called.call("add 2 and 3"))
    streamed, streamed_log = run()
    items = [item async for item in streamed.stream("add 2 and 3")]

    assert isinstance(items[-1], Finished)
    assert items[-1].reply.text == reply.text == "The sum is 5."
    assert called_log.names == streamed_log.names
    strip = {"id", "timestamp"}
    assert [m.model_dump(exclude=strip) for m in called.memory] == [
        m.model_dump(exclude=strip) for m in streamed.memory
    ]


async def test_work_a_hook_leaves_at_post_call_runs_beside_later_hooks_and_ends_the_call() -> None:
    """``PostCall.finishing``: a hook's started write does not hold back the hooks after it,
    and the call returns only once the write is done (also for ``Error.finishing``)."""
    order: list[str] = []
    release = asyncio.Event()

    async def write(name: str) -> None:
        await release.wait()
        order.append(f"{name} written")

    class Starts(Hook):
        priority = 0
        events = (PostCall, Error)

        async def on_event(self, event: Event) -> None:
            assert isinstance(event, PostCall | Error)
            event.finishing.append(asyncio.ensure_future(write(type(event).__name__)))

    class Later(Hook):
        priority = 10
        events = (PostCall, Error)

        async def on_event(self, event: Event) -> None:
            order.append(f"{type(event).__name__} later hook")
            release.set()  # the write could not finish before this hook ran

    agent = ReActAgent(name="a", model=scripted({"text": "ok"}), hooks=[Starts(), Later()])
    answer(await agent.call("hi"))
    assert order == ["PostCall later hook", "PostCall written"]

    order.clear()
    release.clear()
    failing = ReActAgent(name="b", model=scripted(), hooks=[Starts(), Later()])
    with pytest.raises(ScriptExhaustedError):
        answer(await failing.call("hi"))
    assert order == ["Error later hook", "Error written"]
