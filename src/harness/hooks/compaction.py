"""Compaction: before a model call, long history is summarized so the context window never fills.

At every PreReasoning the conversation the call keeps (``event.memory``, system messages left
out) goes through, in order:

1. argument truncation, when ``config.truncate_args`` is set and its own trigger fires
   (whether or not compaction follows); the untruncated messages are offloaded first;
2. :meth:`ConversationCompactor.compact`, which decides whether to compact and does it (see
   :mod:`harness.compaction.compactor`).

A change is written into memory in place (``memory[:] = ...``), so the session is saved
compacted, and the step's request is rebuilt as its system messages, then the new
conversation, then any message a hook added to this step only (the last step's "answer now"
hint). Files: through the compactor, ``agents/<agent>/sessions/<session>.jsonl`` (the
transcript the summary points to) and ``memory/YYYY-MM-DD.md`` (the flush), in the user's
namespace.

Events: through the agent the hook is attached to (``HookHost.emit``), :class:`PreCompact`
once the cut is known, before anything is written, and :class:`PostCompact` after memory was
replaced, with the compaction record in ``details``; that record is then added to the
session's :class:`~harness.session.CompactionLog` when the hook was given one.

Overflow: when the provider still refuses a request as too long, the agent offers the hook a
:class:`~harness.kernel.ContextOverflow`; the hook compacts the conversation by force (whatever
the triggers say: the summary and the last user turn are kept), announces it like any
compaction and marks the overflow recovered, and the agent runs the step again. When even that
overflows (a window so small that the summary does not fit beside the system prompt and the
last turn), the second overflow makes the summary tight: without its verbatim first request,
its body cut (:func:`~harness.compaction.tightened`). When nothing shrinks, the overflow is left
unrecovered and the agent raises it.

Failures: any error of compaction is logged and the step goes on uncompacted; the summarizer's
own failure does not even get here (the compactor falls back to an extractive summary). An
interruption (``CancelledError``, :class:`AgentInterrupted`, also when wrapped in another
error) propagates, so an interrupted call stops instead of calling the model again.

Priority 10: after trace (0) so traces see the step as the loop built it, and before every
hook that shapes the request (eviction 50, user hooks 100, workspace context 900), so they all
work on the compacted conversation and the system prompt they add is never summarized.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar

from harness.compaction import (
    CompactionConfig,
    CompactionPlan,
    CompactionResult,
    ConversationCompactor,
    is_interruption,
    tightened,
    truncate_args,
)
from harness.kernel import (
    ContextOverflow,
    Event,
    Hook,
    HookHost,
    Msg,
    PostCompact,
    PreCompact,
    PreReasoning,
    report,
)
from harness.memory.render import is_summary
from harness.session import CompactionLog

__all__ = ["CompactionHook", "rebuild_request"]

logger = logging.getLogger(__name__)


def rebuild_request(
    step_messages: Sequence[Msg], old_memory: Sequence[Msg], conversation: Sequence[Msg]
) -> list[Msg]:
    """The step's request after memory changed: system messages, conversation, step extras.

    Args:
        step_messages: The request as the loop (and earlier hooks) built it.
        old_memory: Memory before the change; its messages are replaced by ``conversation``.
        conversation: The new conversation (no system messages).

    Returns:
        Every system message of the request in order, then ``conversation``, then the
        request's other messages that were not in memory (added for this step only).
    """
    in_memory = {m.id for m in old_memory}
    system = [m for m in step_messages if m.role == "system"]
    extras = [m for m in step_messages if m.role != "system" and m.id not in in_memory]
    return [*system, *conversation, *extras]


class CompactionHook(Hook):
    """Truncates old tool arguments and compacts history before each model call.

    Args:
        compactor: Does the work (its model summarizes; it may differ from the agent's).
        config: Triggers, tail and prompt.
        log: Where each compaction's record is kept with its session (None: not kept).
    """

    priority = 10
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning, ContextOverflow)

    def __init__(
        self,
        compactor: ConversationCompactor,
        config: CompactionConfig,
        *,
        log: CompactionLog | None = None,
    ) -> None:
        self.compactor = compactor
        self.config = config
        self.log = log
        self._agent: HookHost | None = None

    def attach(self, agent: HookHost) -> None:
        if self._agent is None:
            self._agent = agent

    async def on_event(self, event: Event) -> None:
        if isinstance(event, ContextOverflow):
            await self._recover(event)
            return
        if not isinstance(event, PreReasoning):
            return
        try:
            await self._compact(event)
        except Exception as exc:
            if is_interruption(exc):
                raise
            logger.warning(
                "compaction failed, continuing without compaction (session %r): %s",
                event.ctx.session_id,
                exc,
                exc_info=True,
            )

    async def _compact(self, event: PreReasoning) -> None:
        memory = event.memory
        old_memory = list(memory)
        pinned = [m for m in old_memory if m.role == "system"]
        conversation = [m for m in old_memory if m.role != "system"]
        changed = False

        if self.config.truncate_args is not None:
            truncation = truncate_args(conversation, self.config.truncate_args)
            if truncation.changed:
                if self.config.offload_before:
                    await self.compactor.offload(event.ctx, conversation)
                conversation = truncation.messages
                changed = True

        result = await self.compactor.compact(
            event.ctx, conversation, self.config, on_plan=self._pre_compact(event)
        )
        if result is not None:
            conversation = result.messages
            changed = True
        if not changed:
            return
        memory[:] = [*pinned, *conversation]
        event.messages = rebuild_request(event.messages, old_memory, conversation)
        if result is not None:
            await self._post_compact(event, result)

    def _pre_compact(
        self, event: PreReasoning | ContextOverflow
    ) -> Callable[[CompactionPlan], Awaitable[None]]:
        async def announce(plan: CompactionPlan) -> None:
            report("compaction_started", cut=plan.cut, tokens_before=plan.tokens_before)
            if self._agent is not None:
                await self._agent.emit(
                    PreCompact(
                        ctx=event.ctx,
                        agent=event.agent,
                        memory=event.memory,
                        state=event.state,
                        call_id=event.call_id,
                        cut=plan.cut,
                        tokens_before=plan.tokens_before,
                    )
                )

        return announce

    async def _recover(self, event: ContextOverflow) -> None:
        """Shrink memory after a context overflow so that the step's retry can fit.

        Left unrecovered (the agent raises the overflow) when compaction cannot shrink it; a
        failure of compaction itself is logged, like at PreReasoning, and leaves it unrecovered.
        """
        memory = event.memory
        if event.attempt > 0:
            self._tighten(event)
            return
        conversation = [m for m in memory if m.role != "system"]
        try:
            result = await self.compactor.compact(
                event.ctx, conversation, self.config, force=True, on_plan=self._pre_compact(event)
            )
        except Exception as exc:
            if is_interruption(exc):
                raise
            logger.warning(
                "compaction after a context overflow failed (session %r): %s",
                event.ctx.session_id,
                exc,
                exc_info=True,
            )
            return
        if result is None:
            event.error.add_note("compaction could not shrink the conversation")
            return
        memory[:] = [*(m for m in memory if m.role == "system"), *result.messages]
        event.recovered = True
        await self._post_compact(event, result)

    @staticmethod
    def _tighten(event: ContextOverflow) -> None:
        """After a forced compaction still overflowed: the latest summary, made tight."""
        memory = event.memory
        where = next((i for i in reversed(range(len(memory))) if is_summary(memory[i])), None)
        shorter = tightened(memory[where]) if where is not None else None
        if where is None or shorter is None:
            event.error.add_note("compaction could not shrink the conversation further")
            return
        memory[where] = shorter
        event.recovered = True
        logger.info("the summary of session %r was cut to fit the window", event.ctx.session_id)

    async def _post_compact(
        self, event: PreReasoning | ContextOverflow, result: CompactionResult
    ) -> None:
        if result.summary is None:
            return
        report("compaction", removed=result.removed, tokens_after=result.tokens_after)
        details = result.record()
        if self._agent is not None:
            await self._agent.emit(
                PostCompact(
                    ctx=event.ctx,
                    agent=event.agent,
                    memory=event.memory,
                    state=event.state,
                    call_id=event.call_id,
                    removed=result.removed,
                    summary=result.summary,
                    tokens_after=result.tokens_after,
                    details=details,
                )
            )
        if self.log is not None:
            await self.log.append(event.ctx, details)
