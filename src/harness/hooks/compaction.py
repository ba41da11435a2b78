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
compaction and marks the overflow recovered, and the agent runs the step again. When the
provider's error states the sizes (most do), the forced compaction is sized from them
(:mod:`harness.compaction.budget`): the refused request's fixed part (system prompt, tool
schemas) and the provider's count give the tokens the conversation may take, and the summary
(then, if need be, the kept tool results) is cut to that, so the step's retry fits the first
time; a fixed part that leaves no room at all is a :class:`~harness.errors.WindowTooSmall`,
raised at once. If the retry still overflows, its sizes cut the conversation again. Without
sizes, the second overflow makes the summary tight instead: without its verbatim first
request, its body cut (:func:`~harness.compaction.tightened`). When nothing shrinks, the
overflow is left unrecovered and the agent raises it.

:class:`FixedPartCheck`, when the window is known ahead (``config.context_window``), refuses
the first step of a call whose system prompt alone surely cannot fit it, before the model is
asked (:func:`~harness.compaction.budget.check_fixed_part`).

Failures: any error of compaction is logged and the step goes on uncompacted; the summarizer's
own failure does not even get here (the compactor falls back to an extractive summary). An
interruption (``CancelledError``, :class:`AgentInterrupted`, also when wrapped in another
error) propagates, so an interrupted call stops instead of calling the model again.

Priority 10: after trace (0) so traces see the step as the loop built it, and before every
hook that shapes the request (subagents 80, skills 85, user hooks 100, workspace context 900),
so they all work on the compacted conversation and the system prompt they add is never
summarized. :class:`FixedPartCheck` runs at 950, after them all, to see the request the model
would get.
"""

from __future__ import annotations

import dataclasses
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
from harness.compaction.budget import (
    RecoveryBudget,
    check_fixed_part,
    fit_conversation,
    measure,
    recovery_budget,
    too_small,
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
from harness.memory.provenance import prompt_trust
from harness.memory.render import is_summary
from harness.session import CompactionLog

__all__ = ["CompactionHook", "FixedPartCheck", "rebuild_request"]

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
            event.ctx,
            conversation,
            self.config,
            on_plan=self._pre_compact(event),
            shown=prompt_trust(event.state),
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

        Raises:
            WindowTooSmall: The provider's sizes show that the fixed part of the request alone
                leaves no room for any conversation.
        """
        memory = event.memory
        budget = self._budget(event)
        if event.attempt > 0:
            if budget is None:
                self._tighten(event)
            else:
                self._refit(event, budget)
            return
        conversation = [m for m in memory if m.role != "system"]
        config = self.config
        if budget is not None:  # the summarizer's request must fit the same window
            limit = min(config.max_summary_input_tokens, budget.room)
            config = dataclasses.replace(config, max_summary_input_tokens=limit)
        try:
            result = await self.compactor.compact(
                event.ctx,
                conversation,
                config,
                force=True,
                on_plan=self._pre_compact(event),
                target_tokens=max(0, budget.target) if budget is not None else None,
                shown=prompt_trust(event.state),
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

    def _budget(self, event: ContextOverflow) -> RecoveryBudget | None:
        """What the conversation may take, from the provider's sizes; None when not stated."""
        if not event.messages:
            return None
        size = measure(event.messages, event.tools, event.memory)
        budget = recovery_budget(size, event.error, self.config.reserve_tokens)
        if budget is None:
            return None
        logger.info(
            "context overflow of session %r: the provider counted %s of %s tokens; the "
            "conversation may take about %s estimated tokens (%s now, fixed part %s, ratio %.2f%s)",
            event.ctx.session_id,
            getattr(event.error, "requested_tokens", None),
            budget.window,
            budget.target,
            size.conversation,
            budget.fixed,
            budget.ratio,
            "" if budget.tools_counted else ", tool schemas not counted",
        )
        if not budget.fixed_fits:
            raise too_small(budget, size) from event.error
        return budget

    @staticmethod
    def _refit(event: ContextOverflow, budget: RecoveryBudget) -> None:
        """After a sized recovery still overflowed: the conversation cut to the new sizes.

        The conversation is at its least already, so the ratio now measures mostly the fixed
        part: when that alone leaves no room, the call is refused (``WindowTooSmall``) rather
        than tried once more for nothing.
        """
        if budget.fixed_tokens + budget.reserve >= budget.window:
            size = measure(event.messages, event.tools, event.memory)
            raise too_small(budget, size, measured=True) from event.error
        memory = event.memory
        conversation = [m for m in memory if m.role != "system"]
        fit = fit_conversation(conversation, max(0, budget.target))
        if fit is None:
            event.error.add_note(
                "compaction could not shrink the conversation further: the provider allows "
                f"{budget.window:,} tokens, of which the system prompt and tools take at least "
                f"{budget.least_fixed:,} and the answer {budget.reserve:,}; the latest turn "
                "alone takes more than what is left"
            )
            return
        memory[:] = [*(m for m in memory if m.role == "system"), *fit]
        event.recovered = True
        logger.info(
            "the conversation of session %r was cut to fit the window", event.ctx.session_id
        )

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


class FixedPartCheck(Hook):
    """Refuses a call whose system prompt alone surely cannot fit the known context window.

    At the first step of each call, after every hook shaped the request (priority 950), so the
    system prompt it measures is the one the model would get; before the model is asked, so no
    call is spent on a request that cannot succeed. Registered only when the window is known
    (``config.context_window``); without it, the first overflow's sizes say the same
    (:class:`CompactionHook`).

    Args:
        config: The compaction settings: the window and the answer's room.
    """

    priority = 950
    events: ClassVar[tuple[type[Event], ...]] = (PreReasoning,)

    def __init__(self, config: CompactionConfig) -> None:
        self.config = config

    async def on_event(self, event: Event) -> None:
        window = self.config.context_window
        if not isinstance(event, PreReasoning) or event.step != 0 or window is None:
            return
        check_fixed_part(
            event.messages,
            event.tools,
            event.memory,
            window=window,
            reserve=self.config.reserve_tokens,
        )
