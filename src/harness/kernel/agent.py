"""The ReAct loop: reason, act, repeat until the model answers without calling a tool.

:class:`ReActAgent` is usable on its own. Everything the harness adds reaches it through the
two extension points, the hook chain and the toolkit; the loop itself knows nothing of
workspaces, memory files or sessions.

A call works on a *memory*, the list of messages the conversation keeps, and on the
conversation's :class:`~harness.kernel.SessionState`, what hooks keep about it from call to
call. By default those are the agent's own ``memory`` and ``state``; a caller that serves many
conversations passes them per call, so concurrent calls never share them. The system prompt is
not part of memory: it is put in front of memory for every model call.

One turn engine: :meth:`ReActAgent.call` is :meth:`ReActAgent.stream` consumed, so whatever a
turn does (hooks, persistence, the retry after a context overflow, interrupts) happens the same
way whether or not anyone watches it stream. Every call ends with an outcome
(:mod:`harness.kernel.outcome`): the stream's last item, what ``call`` returns, and what the
hooks see in :class:`~harness.kernel.PostCall` (finished or paused) or
:class:`~harness.kernel.Error` (cancelled or failed). Nothing raises to pause: a step whose
tool calls must wait ends the call with a :class:`~harness.kernel.Paused`.

A context overflow (the provider refused a request as too long) is offered to the hooks as a
:class:`~harness.kernel.ContextOverflow` event before anything of the step streamed; a hook that
shrinks memory (compaction) marks it recovered and the step runs again, within the same call, at
most ``MAX_RECOVERIES`` times: the user's input is in memory once, and no step before it runs
again.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.context import RuntimeContext
from harness.errors import AgentInterrupted, ContextOverflowError, ModelError
from harness.kernel.cancelling import cancel_and_wait
from harness.kernel.decisions import Decision, Defer, Run, lost_result
from harness.kernel.events import (
    ContextOverflow,
    Error,
    Event,
    PostActing,
    PostCall,
    PostReasoning,
    PreActing,
    PreCall,
    PreReasoning,
    ToolDecision,
)
from harness.kernel.hooks import Hook, HookChain
from harness.kernel.message import (
    SYNTHETIC,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    as_messages,
    drop_unanswered_tail,
    storable,
    unanswered_calls,
)
from harness.kernel.model import ChatModel, ChatResponse, usage_fields
from harness.kernel.outcome import (
    Cancelled,
    Ended,
    Failed,
    Finished,
    Outcome,
    Paused,
    pending_of,
)
from harness.kernel.state import SessionState
from harness.kernel.streaming import (
    STREAM,
    Emit,
    Progress,
    StreamItem,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    ended,
)
from harness.kernel.tool_context import ToolContext
from harness.kernel.toolkit import Tool, Toolkit, tool_result

__all__ = [
    "DEFAULT_MAX_ITERS",
    "MAX_ITERS_HINT",
    "ReActAgent",
    "new_call_id",
]

logger = logging.getLogger(__name__)

MAX_RECOVERIES = 2
"""Context overflows of one step the hooks may recover from before the overflow is raised."""

DEFAULT_MAX_ITERS = 15
"""Reasoning steps per call before the agent is asked to answer without tools."""

MAX_ITERS_HINT = (
    "You have used every reasoning step available for this request. Do not call any tool: "
    "answer now, summarizing what you found and what is left to do."
)


@dataclass(frozen=True, slots=True)
class _Call:
    """One running call: what every step and every event of it shares."""

    id: str
    agent: str
    ctx: RuntimeContext
    memory: list[Msg]
    state: SessionState
    emit: Emit | None
    model_options: Mapping[str, Any]

    def about(self) -> dict[str, Any]:
        """What every event of the call carries (:class:`~harness.kernel.Event`'s fields)."""
        return {
            "ctx": self.ctx,
            "agent": self.agent,
            "memory": self.memory,
            "state": self.state,
            "call_id": self.id,
        }


def new_call_id() -> str:
    """A fresh call id: ``call-`` and 12 random hex digits, carried by every event of the call."""
    return f"call-{secrets.token_hex(6)}"


class ReActAgent:
    """A reasoning-and-acting agent over a :class:`ChatModel`.

    Args:
        name: The agent's name; also the ``name`` of its assistant messages.
        sys_prompt: The system prompt put in front of every model call (may be empty).
        model: The model to reason with.
        toolkit: Tools the model may call. Tools contributed by hooks are added to a copy; the
            caller's toolkit is never changed.
        hooks: Hooks to run, ordered by priority (ties keep this order).
        max_iters: Reasoning steps per call; after the last one the model must answer in text.
        parallel_tools: Run the tool calls of one step concurrently.
    """

    def __init__(
        self,
        *,
        name: str,
        model: ChatModel,
        sys_prompt: str = "",
        toolkit: Toolkit | Iterable[Callable[..., Any] | Tool] = (),
        hooks: Iterable[Hook] = (),
        max_iters: int = DEFAULT_MAX_ITERS,
        parallel_tools: bool = True,
    ) -> None:
        if max_iters < 1:
            msg = f"max_iters must be at least 1, got {max_iters}"
            raise ValueError(msg)
        self.name = name
        self.model = model
        self.max_iters = max_iters
        self.parallel_tools = parallel_tools
        self.hooks = HookChain(hooks)
        base = toolkit if isinstance(toolkit, Toolkit) else Toolkit(toolkit)
        self.toolkit = Toolkit(base.tools)
        for hook in self.hooks.hooks:
            for tool in hook.tools():
                self.toolkit.register(tool)
        for hook in self.hooks.hooks:
            hook.attach(self)
        self.system_message: Msg | None = (
            Msg(role="system", name="system", content=sys_prompt) if sys_prompt else None
        )
        self.memory: list[Msg] = []
        self.state = SessionState()
        self._running: set[asyncio.Task[Any]] = set()
        self._interrupting: set[asyncio.Task[Any]] = set()

    async def call(
        self,
        msgs: str | Msg | Sequence[Msg] | None = None,
        *,
        ctx: RuntimeContext | None = None,
        memory: list[Msg] | None = None,
        state: SessionState | None = None,
        model_options: Mapping[str, Any] | None = None,
    ) -> Ended:
        """Run one call to its end: :meth:`stream`, consumed.

        Returns :class:`~harness.kernel.Finished` with the reply, or
        :class:`~harness.kernel.Paused` with the tool calls that wait for a decision.

        Args:
            msgs: New input: a user text, a message, a list of messages, or nothing.
            ctx: The call's context (an empty one if not given).
            memory: The conversation to continue and extend; the agent's own ``memory`` if None.
            state: What the hooks keep about the conversation; the agent's own ``state`` if
                None.
            model_options: Options for every model request of this call (such as a local
                model's ``output_schema``), under the kernel's own ``tool_choice``.

        Raises:
            AgentInterrupted: :meth:`interrupt` stopped the call.
            ModelError: The model failed (see its subclasses).
        """
        streamed = self.stream(
            msgs, ctx=ctx, memory=memory, state=state, model_options=model_options
        )
        return await ended(streamed)

    async def stream(
        self,
        msgs: str | Msg | Sequence[Msg] | None = None,
        *,
        ctx: RuntimeContext | None = None,
        memory: list[Msg] | None = None,
        state: SessionState | None = None,
        model_options: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """Run one call, yielding deltas and tool activity as they happen, then its outcome.

        Arguments as for :meth:`call`. The last item is the call's outcome, whichever way it
        ended (:mod:`harness.kernel.outcome`): a failure is an item, not an exception. Closing
        the iterator early cancels the call.
        """
        inputs = as_messages(msgs)  # bad input fails here, before anything runs
        queue: asyncio.Queue[StreamItem | None] = asyncio.Queue()
        task = asyncio.create_task(
            self._run(
                inputs,
                ctx or RuntimeContext(),
                self.memory if memory is None else memory,
                self.state if state is None else state,
                emit=queue.put_nowait,
                model_options=model_options or {},
            )
        )
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
            yield task.result()
        finally:
            if not task.done():
                await cancel_and_wait(task)

    async def emit(self, event: Event) -> None:
        """Dispatch an event a hook derived (``PreCompact``, ``PostCompact``) to every hook."""
        await self.hooks.dispatch(event)

    def interrupt(self) -> None:
        """Stop every call this agent is running; each ends :class:`~harness.kernel.Cancelled`."""
        for task in list(self._running):
            self._interrupting.add(task)
            task.cancel()

    async def _run(
        self,
        inputs: list[Msg],
        ctx: RuntimeContext,
        memory: list[Msg],
        state: SessionState,
        emit: Emit | None,
        model_options: Mapping[str, Any],
    ) -> Outcome:
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        call = _Call(new_call_id(), self.name, ctx, memory, state, emit, model_options)
        streaming = STREAM.set(emit)
        try:
            # Tool calls left unanswered by the previous call (paused for an approval) are
            # decided first, before the input joins the conversation and before the model is
            # asked anything (kernel/decisions.py).
            waiting = unanswered_calls(memory)
            if not waiting:
                memory.extend(inputs)
            if emit is not None:
                # From here on, however the call ends, its hooks hear of it (PostCall or
                # Error) with the input in memory: a caller may now say the input was taken.
                emit(Progress("accepted"))
            await self.hooks.dispatch(PreCall(**call.about(), inputs=inputs))
            still = await self._resume(call, waiting, inputs) if waiting else None
            post = PostCall(**call.about(), outcome=still or await self._loop(call))
            await self.hooks.dispatch(post)
            if post.finishing:
                await asyncio.gather(*post.finishing)
            return post.outcome
        except asyncio.CancelledError as exc:
            if task not in self._interrupting:
                await self._report(call, exc)
                raise
            task.uncancel()
            error = AgentInterrupted(f"agent {self.name!r} was interrupted")
            await self._report(call, error)
            return Cancelled(error)
        except Exception as exc:
            await self._report(call, exc)
            return Failed(exc)
        finally:
            STREAM.reset(streaming)
            self._running.discard(task)
            self._interrupting.discard(task)

    async def _report(self, call: _Call, error: BaseException) -> None:
        """Tell the hooks a call failed; a hook that fails here must not hide the original error.

        Memory keeps what the call completed (the input and every finished turn) but not an
        assistant turn whose tool calls never got results, so the conversation stays valid for
        the next request.
        """
        memory = call.memory
        kept = drop_unanswered_tail(memory)
        if len(kept) < len(memory):  # a prefix of it: only a shorter one is a change
            memory[:] = kept
        event = Error(**call.about(), error=error)
        try:
            await self.hooks.dispatch(event)
            if event.finishing:
                await asyncio.gather(*event.finishing)
        except Exception as hook_error:
            logger.exception("a hook failed while handling %r", error)
            error.add_note(f"while reporting this error, a hook failed: {hook_error!r}")

    async def _loop(self, call: _Call) -> Ended:
        for step in range(self.max_iters):
            message = await self._reason(call, step, final=False)
            calls = message.tool_uses
            if not calls:
                return Finished(message)
            pending = await self._act_all(call, calls)
            if pending:
                return Paused(tuple(pending), reply=message)
        return Finished(await self._reason(call, self.max_iters, final=True))

    async def _reason(self, call: _Call, step: int, *, final: bool) -> Msg:
        memory, emit = call.memory, call.emit
        overflows = 0
        while True:
            event = await self._request(call, step, final=final)
            # The last step still describes the tools (providers reject tool calls in a history
            # without tool definitions) but tells the model not to call them.
            options = dict(call.model_options)
            if final and event.tools:
                options["tool_choice"] = "none"
            started = time.perf_counter()
            streamed = False
            response: ChatResponse | None = None
            try:
                async for item in self.model.stream(event.messages, event.tools, **options):
                    if isinstance(item, ChatResponse):
                        response = item
                    elif emit is not None:
                        if item.text:
                            emit(TextDelta(item.text))
                        if item.thinking:
                            emit(ThinkingDelta(item.thinking))
                        streamed = streamed or bool(item.text or item.thinking)
            except ContextOverflowError as error:
                if (
                    streamed
                    or overflows >= MAX_RECOVERIES
                    or not await self._recover(call, event, error, overflows)
                ):
                    raise
                overflows += 1
                continue
            break
        if response is None:
            msg = f"model {self.model.model_name!r} ended its stream without a final response"
            raise ModelError(msg)
        metadata: dict[str, Any] = {"model": response.model or self.model.model_name}
        if response.usage is not None:
            metadata["usage"] = response.usage.as_dict()
        content = storable(response.content)  # a lone surrogate in its JSON would fail the save
        if final:
            # A tool call made anyway will not run; kept in memory without a result, it would
            # make every later request to the provider invalid.
            content = [block for block in content if not isinstance(block, ToolUseBlock)]
        message = Msg(role="assistant", name=self.name, content=content, metadata=metadata)
        memory.append(message)
        latency = time.perf_counter() - started
        await self.hooks.dispatch(
            PostReasoning(
                **call.about(),
                step=step,
                message=message,
                model=metadata["model"],
                usage=response.usage,
                latency_s=latency,
            )
        )
        if emit is not None:
            emit(Progress("step", _step_report(step, message, response, latency)))
        return message

    async def _request(self, call: _Call, step: int, *, final: bool) -> PreReasoning:
        """The step's request, from memory as it is now, as the hooks shaped it."""
        memory = call.memory
        messages = [self.system_message, *memory] if self.system_message else list(memory)
        if final:
            hint = {SYNTHETIC: True}
            messages.append(
                Msg(role="user", name="system_hint", content=MAX_ITERS_HINT, metadata=hint)
            )
        event = PreReasoning(
            **call.about(),
            step=step,
            messages=messages,
            tools=list(self.toolkit.schemas()),
        )
        await self.hooks.dispatch(event)
        return event

    async def _recover(
        self, call: _Call, request: PreReasoning, error: ContextOverflowError, attempt: int
    ) -> bool:
        """Offer the overflow to the hooks; True if one made memory fit (module docs)."""
        event = ContextOverflow(
            **call.about(),
            step=request.step,
            error=error,
            attempt=attempt,
            messages=list(request.messages),
            tools=list(request.tools),
        )
        await self.hooks.dispatch(event)
        return event.recovered

    async def _resume(
        self, call: _Call, waiting: list[ToolUseBlock], inputs: list[Msg]
    ) -> Paused | None:
        """Decide the calls the previous call left waiting; then the input joins memory.

        Returns the pause when some still wait: the new input, if any, is then refused.
        """
        pending = await self._act_all(call, waiting, resumed=True)
        if pending:
            turn = next(m for m in reversed(call.memory) if m.role == "assistant")
            return Paused(tuple(pending), accepted=not inputs, reply=turn)
        call.memory.extend(inputs)
        return None

    async def _act_all(
        self, call: _Call, uses: list[ToolUseBlock], *, resumed: bool = False
    ) -> list[Mapping[str, Any]]:
        """Decide every call of the step and run those that run; returns what must wait."""
        decided: list[Decision] = []
        for use in uses:
            event = ToolDecision(
                **call.about(),
                tool_call=use,
                decision=lost_result(use) if resumed else Run(),
                resumed=resumed,
            )
            await self.hooks.dispatch(event)
            decided.append(event.decision)
        running = [
            (index, use, decision)
            for index, (use, decision) in enumerate(zip(uses, decided, strict=True))
            if isinstance(decision, Run)
        ]
        if self.parallel_tools and len(running) > 1:
            tasks = [asyncio.create_task(self._act(call, use, run)) for _, use, run in running]
            try:
                ran = await asyncio.gather(*tasks)
            except BaseException:
                # gather leaves the other calls running when one fails; none may outlive the call.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
        else:
            ran = [await self._act(call, use, run) for _, use, run in running]
        results = dict(zip([index for index, _, _ in running], ran, strict=True))
        pending: list[Mapping[str, Any]] = []
        for index, (use, decision) in enumerate(zip(uses, decided, strict=True)):
            if isinstance(decision, Defer):
                pending += [decision.request, *decision.more]
            elif isinstance(decision, Run):
                acted = results[index]
                call.memory.extend(acted.results)
                pending += acted.pending
            else:  # answered without running
                given = storable(decision.result.model_copy(update={"id": use.id}))
                if call.emit is not None:
                    call.emit(ToolFinished(given))
                call.memory.append(Msg.tool_result(given))
        return pending

    async def _act(self, call: _Call, use: ToolUseBlock, run: Run) -> _Acted:
        """Run one call; its result, or what it waits for when the tool's own work waits.

        A tool's value that waits (:func:`~harness.kernel.outcome.pending_of`: a subagent whose
        call waits for approval) makes the call wait, each request naming the call it came
        through; any other value is the call's result.
        """
        ctx, emit = call.ctx, call.emit
        if run.arguments is not None:  # the tool runs with what a reviewer gave, not the model
            use = use.model_copy(update={"input": dict(run.arguments)})
        await self.hooks.dispatch(PreActing(**call.about(), tool_call=use))
        if emit is not None:
            emit(ToolStarted(use))
        started = time.perf_counter()
        context = ToolContext(ctx, call.agent, call.id, use, tuple(call.memory), call.state)
        value = await self.toolkit.invoke(use, ctx, context, instead=run.instead)
        if pending := pending_of(value):
            via = {"via_tool_call": use.id, "via_tool": use.name, "via_input": use.input}
            return _Acted(pending=tuple({**request, **via} for request in pending))
        result = tool_result(use, value)
        if run.note:
            result = _noted(result, run.note)
        event = PostActing(
            **call.about(),
            tool_call=use,
            result=result,
            latency_s=time.perf_counter() - started,
        )
        await self.hooks.dispatch(event)
        result = storable(event.result)  # a file name that is not UTF-8, say: escaped, not lost
        if emit is not None:
            emit(ToolFinished(result))
        return _Acted(results=(Msg.tool_result(result),))


@dataclass(frozen=True, slots=True)
class _Acted:
    """What one run call gives its step: its result for memory, or the requests it waits for."""

    results: tuple[Msg, ...] = ()
    pending: tuple[Mapping[str, Any], ...] = ()


def _noted(result: ToolResultBlock, note: str) -> ToolResultBlock:
    """A result with a line said after the tool's output."""
    if isinstance(result.output, str):
        return result.model_copy(update={"output": f"{result.output}\n\n[{note}]"})
    return result.model_copy(update={"output": [*result.output, TextBlock(text=f"[{note}]")]})


def _step_report(step: int, message: Msg, response: ChatResponse, latency: float) -> dict[str, Any]:
    """What a streaming caller learns of a finished step: its model, tokens, time, tool calls."""
    return {
        "step": step,
        "model": message.metadata["model"],
        **usage_fields(response.usage),
        "latency_s": round(latency, 4),
        "tool_calls": [use.name for use in message.tool_uses],
    }
