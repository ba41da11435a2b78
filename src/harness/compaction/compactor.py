"""Conversation compaction: the start of a long conversation becomes one summary message.

One compaction, in order:

1. **Decide.** Nothing happens unless a trigger fires (messages or tokens, see
   :class:`CompactionConfig`) or the caller forces it; nor when no message was added since the
   last compaction (re-summarizing a summary degrades it); nor when the part to summarize holds
   nothing but earlier summaries.
2. **Cut.** The newest messages are kept (``keep_messages``, or a token budget). The cut never
   separates a tool call from any of its results, parallel calls included: it moves back to
   before the assistant message that issued them, or, when that would leave nothing to
   summarize, forward past the whole tool run.
3. **Save first.** The whole conversation goes to the session transcript (idempotent by
   message id) and the summarized part, earlier summaries left out, is flushed to memory.
   Either may fail; the failure is recorded in the result and compaction goes on. An
   interruption is never a failure: it propagates from every step.
4. **Summarize** earlier summaries together with the new part, so the user's original intent
   survives any number of compactions. The input is trimmed to ``max_summary_input_tokens``,
   newest messages first. If the summarizer fails, times out or answers nothing, history is
   not replaced by an empty summary: an *extractive* summary built without a model takes its
   place (the first request verbatim, the latest requests, the tools used, the paths touched).
5. **Replace.** The result is ``[summary] + kept tail``. The summary is a user message named
   ``__compaction_summary__`` with a new id ``__compaction_summary__:<hex>``; it points to
   the transcript, quotes the user's first request verbatim, and records in
   ``metadata["compaction"]`` what it covered.

A forced compaction (overflow recovery) skips the triggers and shrinks the tail too: it keeps
only the last user turn and cuts oversized tool results and arguments in it, so even a
conversation shorter than ``keep_messages`` (one huge tool result) can be made to fit.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from harness.compaction._cut import last_user_turn, safe_cut
from harness.compaction._summary import (
    SUMMARY_METADATA_KEY,
    error_text,
    extractive_summary,
    first_request,
    latest_summary,
    render_for_summary,
    shrink_tail,
    summary_input,
    summary_message_text,
    tightened,
)
from harness.compaction.budget import fit_conversation
from harness.compaction.config import CompactionConfig
from harness.compaction.tokens import count_tokens, estimate_tokens
from harness.compaction.truncation import keep_start
from harness.context import RuntimeContext
from harness.errors import AgentInterrupted
from harness.kernel import (
    ChatModel,
    Msg,
    TextBlock,
    complete,
    new_id,
)
from harness.memory.flush import MemoryFlushManager
from harness.memory.provenance import TRUST_KEY, Trust, context_trust
from harness.memory.render import SUMMARY_NAME, is_summary
from harness.memory.transcript import TranscriptWriter

__all__ = [
    "SUMMARY_METADATA_KEY",
    "CompactionPlan",
    "CompactionResult",
    "ConversationCompactor",
    "StepOutcome",
    "extractive_summary",
    "first_request",
    "is_interruption",
    "render_for_summary",
    "safe_cut",
    "summary_input",
    "summary_message_text",
    "tightened",
]

logger = logging.getLogger(__name__)


def is_interruption(error: BaseException) -> bool:
    """True if ``error`` is, or was caused by, a cancellation or an interrupt.

    Follows ``__cause__`` and ``__context__`` and stops on cycles, so a wrapped interruption
    ("compaction failed: CancelledError") is still recognized as one. A ``TimeoutError`` is
    not: a timeout raises it from the cancellation it used to stop the work.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, asyncio.CancelledError | AgentInterrupted | KeyboardInterrupt):
            return True
        if isinstance(current, TimeoutError):
            return False
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What happened to a side step (flush, offload): ``ok``, ``failed`` or ``skipped``."""

    status: Literal["ok", "failed", "skipped"]
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        """The outcome as JSON-ready data."""
        return {"status": self.status, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction is about to do, before any side effect: for ``PreCompact``."""

    cut: int
    tokens_before: int
    forced: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """One compaction: the new conversation and the record of how it was made.

    Attributes:
        id: The compaction's id (also in the summary's id and metadata).
        created_at: When it was made.
        messages: The new conversation: the summary, then the kept tail.
        removed: How many messages of the old conversation the summary replaced.
        tokens_before: The old conversation's tokens (usage-corrected).
        tokens_after: The new conversation's estimated tokens.
        first_kept_id: The id of the first message of the kept tail (None: nothing kept).
        summary: The summary message; None only when a forced compaction had nothing to
            summarize and only shrank the tail.
        summary_hash: SHA-256 of the summary's text.
        extractive: The summary was built without a model (the summarizer failed).
        summarizer_error: Why the summarizer's answer was not used, if it was not.
        flush: The memory flush's outcome.
        offload: The transcript offload's outcome.
        transcript_path: The transcript the summary points to (None: not saved).
        forced: Made by force (overflow recovery), not by a trigger.
        shrunk: Oversized tool results and calls cut in the kept tail (forced only).
    """

    id: str
    created_at: datetime
    messages: list[Msg]
    removed: int
    tokens_before: int
    tokens_after: int
    first_kept_id: str | None
    summary: Msg | None
    summary_hash: str | None
    extractive: bool = False
    summarizer_error: str | None = None
    flush: StepOutcome = field(default_factory=lambda: StepOutcome("skipped"))
    offload: StepOutcome = field(default_factory=lambda: StepOutcome("skipped"))
    transcript_path: str | None = None
    forced: bool = False
    shrunk: int = 0

    def record(self) -> dict[str, Any]:
        """The compaction as one JSON-ready record, for the session's compaction log."""
        return {
            "id": self.id,
            "time": self.created_at.isoformat(),
            "messages_before": self.removed + len(self.messages) - (self.summary is not None),
            "messages_after": len(self.messages),
            "removed": self.removed,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "first_kept_id": self.first_kept_id,
            "summary_id": self.summary.id if self.summary is not None else None,
            "summary_hash": self.summary_hash,
            "extractive": self.extractive,
            "summarizer_error": self.summarizer_error,
            "flush": self.flush.as_dict(),
            "offload": self.offload.as_dict(),
            "transcript": self.transcript_path,
            "forced": self.forced,
            "shrunk": self.shrunk,
        }


# --- the compactor -------------------------------------------------------------------------

PlanCallback = Callable[[CompactionPlan], Awaitable[None]]

MIN_SUMMARY_TOKENS = 120
"""Estimated tokens below which a sized compaction does not ask for a summary: its header
alone takes most of them, so whatever the summarizer wrote would be cut away."""


class ConversationCompactor:
    """Replaces the start of a conversation with a summary, saving it first.

    Args:
        model: The summarizing model (it can differ from the agent's: a cheaper one).
        flush: Flushes the summarized messages to memory first (None: no flush).
        transcript: Offloads the whole conversation to the session transcript first, so the
            summary can point to it (None: no offload).
        summary_timeout: Seconds the summarizer may take before the extractive fallback is
            used instead (None: no limit).
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        flush: MemoryFlushManager | None = None,
        transcript: TranscriptWriter | None = None,
        summary_timeout: float | None = 300.0,
    ) -> None:
        if summary_timeout is not None and summary_timeout <= 0:
            msg = f"summary_timeout must be > 0 seconds or None, got {summary_timeout!r}"
            raise ValueError(msg)
        self.model = model
        self.flush = flush
        self.transcript = transcript
        self.summary_timeout = summary_timeout

    def should_compact(self, messages: Sequence[Msg], config: CompactionConfig) -> bool:
        """True when a trigger fires and something was added since the last compaction."""
        if not messages or self._unchanged_since_last(messages):
            return False
        if config.trigger_messages > 0 and len(messages) >= config.trigger_messages:
            return True
        trigger = config.effective_trigger_tokens
        return trigger > 0 and count_tokens(messages) >= trigger

    @staticmethod
    def _unchanged_since_last(messages: Sequence[Msg]) -> bool:
        latest = latest_summary(messages)
        if latest is None:
            return False
        meta = latest.metadata.get(SUMMARY_METADATA_KEY)
        return isinstance(meta, Mapping) and meta.get("last_id") == messages[-1].id

    async def offload(self, ctx: RuntimeContext, messages: Sequence[Msg]) -> StepOutcome:
        """Write the conversation to the session transcript; a failure is returned, not raised.

        Raises:
            asyncio.CancelledError, AgentInterrupted: The call is being interrupted.
        """
        if self.transcript is None:
            return StepOutcome("skipped", "no transcript writer")
        try:
            appended = await self.transcript.offload(ctx, messages)
        except Exception as exc:
            if is_interruption(exc):
                raise
            logger.warning("offload before compaction failed for %r: %s", ctx.session_id, exc)
            return StepOutcome("failed", error_text(exc))
        return StepOutcome("ok", f"{appended} new message(s) appended")

    async def _flush(self, ctx: RuntimeContext, prefix: Sequence[Msg], shown: Trust) -> StepOutcome:
        if self.flush is None:
            return StepOutcome("skipped", "no flush manager")
        try:
            result = await self.flush.flush(ctx, prefix, shown=shown)
        except Exception as exc:
            if is_interruption(exc):
                raise
            logger.warning("memory flush before compaction failed for %r: %s", ctx.session_id, exc)
            return StepOutcome("failed", error_text(exc))
        where = f"wrote {result.path}" if result.path else "nothing to write"
        return StepOutcome("ok", f"{result.messages} message(s) read, {where}")

    async def _summarize(self, prompt: str) -> tuple[str, str | None]:
        """The summarizer's answer, or ``("", reason)`` when it failed or answered nothing."""
        try:
            async with asyncio.timeout(self.summary_timeout):
                response = await complete(self.model, [Msg(role="user", content=prompt)])
        except Exception as exc:
            if is_interruption(exc):
                raise
            if isinstance(exc, TimeoutError):
                reason = f"the summarizer took longer than {self.summary_timeout:g} s"
            else:
                reason = f"the summarizer failed: {error_text(exc)}"
            logger.warning("compaction falls back to an extractive summary: %s", reason)
            return "", reason
        text = "".join(b.text for b in response.content if isinstance(b, TextBlock)).strip()
        if not text:
            logger.warning("the summarizer answered nothing; using an extractive summary")
            return "", "the summarizer answered nothing"
        return text, None

    async def compact(
        self,
        ctx: RuntimeContext,
        messages: Sequence[Msg],
        config: CompactionConfig,
        *,
        force: bool = False,
        on_plan: PlanCallback | None = None,
        target_tokens: int | None = None,
        shown: Trust = Trust.USER,
    ) -> CompactionResult | None:
        """Compact the conversation if it is due (or ``force``); None when nothing was done.

        The summary is as trusted as what it replaces (``shown``: the lowest label of the
        memory the system prompt showed; :func:`~harness.memory.provenance.context_trust`),
        recorded in its metadata, so a page read before a compaction still lowers what the
        model writes after it.

        Args:
            ctx: The call's context: which session's transcript and memory to write.
            messages: The conversation without system messages.
            config: Triggers, tail size, summary prompt and input budget.
            force: Compact even if no trigger fires, nothing is new since the last compaction
                or the conversation is shorter than ``keep_messages``; shrink the kept tail
                to the last user turn. For overflow recovery.
            on_plan: Awaited once the cut is known, before anything is written (the hook
                turns it into a ``PreCompact`` event).
            target_tokens: With ``force``, the estimated tokens the new conversation may take
                (from the provider's sizes, :mod:`harness.compaction.budget`): the summary,
                and if need be the kept tail's tool results, are cut to fit it. When the tail
                leaves the summary less than :data:`MIN_SUMMARY_TOKENS`, the summarizer is not
                asked (the extractive summary, cut to fit, stands in).

        Raises:
            asyncio.CancelledError, AgentInterrupted: The call was interrupted; nothing is
                replaced.
        """
        messages = list(messages)
        if not messages:
            return None
        if not force and not self.should_compact(messages, config):
            return None
        tokens_before = count_tokens(messages)
        cut = self._cut(messages, config, force=force)
        if cut is None:
            return None
        if on_plan is not None:
            await on_plan(CompactionPlan(cut=cut, tokens_before=tokens_before, forced=force))

        head, tail = messages[:cut], messages[cut:]
        earlier = [m for m in head if is_summary(m)]
        prefix = [m for m in head if not is_summary(m)]
        shrunk = 0
        if force:
            tail, shrunk = shrink_tail(tail)
            if not head and not shrunk:
                return None

        offload = (
            await self.offload(ctx, messages)
            if config.offload_before
            else StepOutcome("skipped", "offload_before is off")
        )
        transcript = (
            self.transcript.transcript_path(ctx)
            if offload.status == "ok" and self.transcript is not None
            else None
        )
        flush = (
            await self._flush(ctx, prefix, context_trust(earlier, shown))
            if config.flush_before and prefix
            else StepOutcome("skipped", "nothing to flush" if config.flush_before else "off")
        )

        compaction_id = new_id()
        created = datetime.now(UTC)
        summary: Msg | None = None
        extractive = False
        error: str | None = None
        if head:
            request = first_request(messages)
            room = None if target_tokens is None else target_tokens - estimate_tokens(tail)
            if force and room is not None and room < MIN_SUMMARY_TOKENS:
                # The summary would be cut to its one line anyway: no model call for it.
                text, error = "", "the context window leaves no room for a summary"
                logger.info("compaction of %r: %s", ctx.session_id, error)
            else:
                prompt, _ = summary_input(
                    template=config.summary_prompt,
                    request=request,
                    earlier=earlier,
                    prefix=prefix,
                    max_tokens=config.max_summary_input_tokens,
                )
                text, error = await self._summarize(prompt)
            if error is not None:
                extractive = True
                text = extractive_summary(
                    request=request,
                    earlier=earlier,
                    prefix=prefix,
                    recent=config.recent_requests,
                    reason=error,
                )
            summary = Msg(
                id=f"{SUMMARY_NAME}:{compaction_id}",
                role="user",
                name=SUMMARY_NAME,
                content=summary_message_text(text, transcript=transcript, request=request),
                timestamp=created,
                metadata={
                    TRUST_KEY: context_trust(head, shown).value,
                    SUMMARY_METADATA_KEY: {
                        "id": compaction_id,
                        "covered_through": head[-1].id,
                        "last_id": messages[-1].id,
                        "first_kept_id": tail[0].id if tail else None,
                        "transcript": transcript,
                        "extractive": extractive,
                        "first_request": request,
                    },
                },
            )
        new_messages = ([summary] if summary is not None else []) + tail
        if force and target_tokens is not None:
            fit = fit_conversation(new_messages, target_tokens)
            if fit is not None:
                new_messages = fit
                summary = next((m for m in fit if summary is not None and m.id == summary.id), None)
        return CompactionResult(
            id=compaction_id,
            created_at=created,
            messages=new_messages,
            removed=cut,
            tokens_before=tokens_before,
            tokens_after=estimate_tokens(new_messages),
            first_kept_id=tail[0].id if tail else None,
            summary=summary,
            summary_hash=(
                hashlib.sha256(summary.text.encode("utf-8")).hexdigest() if summary else None
            ),
            extractive=extractive,
            summarizer_error=error,
            flush=flush,
            offload=offload,
            transcript_path=transcript,
            forced=force,
            shrunk=shrunk,
        )

    @staticmethod
    def _cut(messages: list[Msg], config: CompactionConfig, *, force: bool) -> int | None:
        """Where the kept tail starts, or None when there is nothing worth summarizing."""
        n = len(messages)
        raw = keep_start(
            messages, keep_messages=config.keep_messages, keep_tokens=config.effective_keep_tokens
        )
        if force:
            last_turn = last_user_turn(messages)
            raw = max(raw, last_turn if last_turn is not None else n)

        def has_new(cut: int) -> bool:
            return any(not is_summary(m) for m in messages[:cut])

        cut = safe_cut(messages, raw)
        if not has_new(cut):
            # Moving back left nothing new to summarize: move forward past the tool run.
            forward = safe_cut(messages, raw, forward=True)
            if has_new(forward) and (forward < n or force):
                cut = forward
        if force:
            return cut
        return cut if has_new(cut) else None
