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
import json
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from harness.compaction.config import MESSAGES_PLACEHOLDER, CompactionConfig, TruncateArgsConfig
from harness.compaction.tokens import count_tokens, estimate_tokens
from harness.compaction.truncation import keep_start, truncate_message_args
from harness.context import RuntimeContext
from harness.errors import AgentInterrupted
from harness.kernel import (
    ChatModel,
    ContentBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    complete,
    new_id,
)
from harness.memory.flush import MemoryFlushManager
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
]

logger = logging.getLogger(__name__)

SUMMARY_METADATA_KEY: Final = "compaction"
"""The key of a summary message's metadata that records what it covered."""

FIRST_REQUEST_CHARS: Final = 2_000
"""How much of the user's first request a summary quotes verbatim."""

FORCED_RESULT_CHARS: Final = 4_000
"""A forced compaction cuts tool results in the kept tail longer than this to head and tail."""

_RESULT_CHARS_FOR_SUMMARY: Final = 500
_ARG_CHARS_FOR_SUMMARY: Final = 200
_EARLIER_SUMMARY_CHARS: Final = 4_000
_REQUEST_CHARS: Final = 1_000
_MAX_ARTIFACTS: Final = 30
_MIN_INPUT_CHARS: Final = 2_000
_LABELS: Final = {"user": "Human", "assistant": "AI", "tool": "Tool", "system": "System"}
_SUMMARY_BODY = re.compile(r"<summary>\n(.*)\n</summary>", re.DOTALL)


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


# --- the cut -------------------------------------------------------------------------------


def _blocked_cuts(messages: Sequence[Msg]) -> list[bool]:
    """``blocked[c]`` is True when cutting before message ``c`` would split a tool call.

    A call spans from the message that issues it to its last result; a result pairs with the
    latest earlier call of its id, so an id a provider reuses in a later turn does not join
    the two turns into one span.
    """
    n = len(messages)
    latest: dict[str, int] = {}
    spans: dict[tuple[str, int], int] = {}
    for index, message in enumerate(messages):
        for block in message.content:
            if isinstance(block, ToolUseBlock):
                latest[block.id] = index
                spans[(block.id, index)] = index
            elif isinstance(block, ToolResultBlock) and block.id in latest:
                spans[(block.id, latest[block.id])] = index
    diff = [0] * (n + 2)
    for (_, first), last in spans.items():
        if last > first:
            diff[first + 1] += 1
            diff[last + 1] -= 1
    blocked: list[bool] = []
    running = 0
    for cut in range(n + 1):
        running += diff[cut]
        blocked.append(running > 0)
    return blocked


def safe_cut(messages: Sequence[Msg], cut: int, *, forward: bool = False) -> int:
    """The nearest cut at or before ``cut`` (after, with ``forward``) that splits no tool call.

    Cutting before message 0 or after the last message is always safe.
    """
    blocked = _blocked_cuts(messages)
    cut = max(0, min(cut, len(messages)))
    step = 1 if forward else -1
    while blocked[cut]:
        cut += step
    return cut


def _last_user_turn(messages: Sequence[Msg]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user" and not is_summary(messages[index]):
            return index
    return None


# --- rendering -----------------------------------------------------------------------------


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _head_tail(text: str, limit: int, note: str) -> str:
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    return f"{text[:half]}\n...({len(text) - 2 * half:,} characters {note})...\n{text[-half:]}"


def render_for_summary(message: Msg) -> str:
    """One message as the summarizer sees it: ``Human: ...``, tool calls and results shortened."""
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text.strip():
                parts.append(block.text.strip())
        elif isinstance(block, ToolUseBlock):
            args = json.dumps(block.input, ensure_ascii=False, default=str)
            parts.append(f"[tool_call: {block.name}({_shorten(args, _ARG_CHARS_FOR_SUMMARY)})]")
        elif isinstance(block, ToolResultBlock):
            text = _shorten(block.text.strip(), _RESULT_CHARS_FOR_SUMMARY)
            parts.append(f"[tool_result: {block.name or '?'}] {text}".rstrip())
        elif isinstance(block, ImageBlock):
            parts.append("[image]")
    label = _LABELS.get(message.role, message.role.upper())
    return f"{label}: {' '.join(parts)}"


def _summary_body(message: Msg) -> str:
    """The summary proper of a summary message (the text between its ``<summary>`` tags)."""
    found = _SUMMARY_BODY.search(message.text)
    return found.group(1) if found else message.text


def first_request(messages: Sequence[Msg]) -> str | None:
    """The user's first request in the session, as far as these messages still know it.

    Earlier summaries carry it in their metadata; otherwise it is the first user message.
    """
    for message in messages:
        if is_summary(message):
            meta = message.metadata.get(SUMMARY_METADATA_KEY)
            if isinstance(meta, Mapping) and isinstance(meta.get("first_request"), str):
                return str(meta["first_request"])
        elif message.role == "user" and message.text.strip():
            return message.text.strip()[:FIRST_REQUEST_CHARS]
    return None


def _fit(parts: list[str], budget: int) -> list[str]:
    """Cut each part to an equal share of ``budget`` characters if together they exceed it."""
    total = sum(len(p) for p in parts) + 2 * len(parts)
    if total <= budget or not parts:
        return parts
    share = max(200, budget // len(parts) - 64)  # room for the separator and the note
    return [_head_tail(p, share, "omitted") for p in parts]


def summary_input(
    *,
    template: str,
    request: str | None,
    earlier: Sequence[Msg],
    prefix: Sequence[Msg],
    max_tokens: int,
) -> tuple[str, int]:
    """The summarizer's prompt, trimmed to ``max_tokens``, and how many messages were left out.

    The first request and the earlier summaries always go in (each cut to a share of half the
    budget if together they are too long); the new messages fill the rest newest first, and a
    marker stands where older ones were left out.
    """
    fixed_chars = len(template) - len(MESSAGES_PLACEHOLDER)
    budget = max(_MIN_INPUT_CHARS, (max_tokens * 5) // 2 - fixed_chars - 16)
    required: list[str] = []
    if request:
        required.append(f"The user's first request in this session (verbatim):\n{request}")
    required.extend(f"Earlier summary:\n{_summary_body(m)}" for m in earlier)
    lines = [render_for_summary(m) for m in prefix]
    required = _fit(required, budget // 2 if lines else budget)
    left = budget - sum(len(p) + 2 for p in required)
    kept: list[str] = []
    marker_room = 120
    for line in reversed(lines):
        room = left - marker_room - 2
        if len(line) + 2 <= room:
            kept.append(line)
            left -= len(line) + 2
        elif not kept and room > 200:
            kept.append(line[: room - 3] + "...")  # the newest message alone is too long
            left -= room + 2
            break
        else:
            break
    kept.reverse()
    omitted = len(lines) - len(kept)
    body = list(required)
    if omitted:
        body.append(
            f"[... {omitted} older message(s) left out to fit the summarizer's input; "
            "they are in the saved transcript ...]"
        )
    body.extend(kept)
    return template.replace(MESSAGES_PLACEHOLDER, "\n\n".join(body)), omitted


def _artifacts(messages: Sequence[Msg]) -> list[str]:
    found: dict[str, None] = {}
    for message in messages:
        for call in message.tool_uses:
            for key, value in call.input.items():
                lowered = key.lower()
                if (
                    ("path" in lowered or "file" in lowered)
                    and isinstance(value, str)
                    and 0 < len(value) <= 300
                ):
                    found.setdefault(f"{value} ({call.name})", None)
    return list(found)[:_MAX_ARTIFACTS]


def extractive_summary(
    *,
    request: str | None,
    earlier: Sequence[Msg],
    prefix: Sequence[Msg],
    recent: int,
    reason: str,
) -> str:
    """A summary in the four sections, built from the messages themselves without a model.

    It quotes rather than summarizes: the first request, the latest earlier summary, the last
    ``recent`` user requests, how often each tool was used and the paths tool calls named.
    """
    requests = [
        _shorten(" ".join(m.text.split()), _REQUEST_CHARS)
        for m in prefix
        if m.role == "user" and m.text.strip()
    ]
    tools = Counter(call.name for m in prefix for call in m.tool_uses)
    summary = [
        f"(Extractive summary: the summarizing model was not used ({reason}); the lines below "
        "quote the conversation instead of summarizing it.)",
        f"Messages summarized: {len(prefix)}.",
    ]
    if earlier:
        body = _head_tail(_summary_body(earlier[-1]), _EARLIER_SUMMARY_CHARS, "omitted")
        summary.append(f"Earlier summary:\n{body}")
    if recent and requests:
        summary.append(
            "Latest user requests, oldest first:\n"
            + "\n".join(f"- {r}" for r in requests[-recent:])
        )
    if tools:
        summary.append(
            "Tools used: " + ", ".join(f"{name} ({count}x)" for name, count in tools.items())
        )
    artifacts = _artifacts(prefix)
    next_steps = (
        f"Continue from the latest request: {requests[-1]}"
        if requests
        else "Continue from the messages that follow this summary."
    )
    return "\n\n".join(
        [
            f"## SESSION INTENT\n{request or 'None'}",
            "## SUMMARY\n" + "\n\n".join(summary),
            "## ARTIFACTS\n" + ("\n".join(f"- {a}" for a in artifacts) or "None"),
            f"## NEXT STEPS\n{next_steps}",
        ]
    )


def summary_message_text(summary: str, *, transcript: str | None, request: str | None) -> str:
    """The text of the summary message: where the full history is, the summary, the request."""
    if transcript:
        head = (
            "You are in the middle of a conversation that has been summarized.\n\n"
            f"The full conversation history has been saved to {transcript} should you need "
            "to refer back to it for details.\n\nA condensed summary follows:"
        )
    else:
        head = "Here is a summary of the conversation to date:"
    text = f"{head}\n\n<summary>\n{summary}\n</summary>"
    if request:
        text += (
            "\n\nThe user's first request in this session, verbatim:\n"
            f"<first_request>\n{request}\n</first_request>"
        )
    return text


def _shrink_tail(tail: list[Msg]) -> tuple[list[Msg], int]:
    """Cut oversized tool results and tool arguments of a forced compaction's tail."""
    args = TruncateArgsConfig()
    shrunk = 0
    result: list[Msg] = []
    for message in tail:
        message, count = truncate_message_args(message, args)
        shrunk += count
        if message.tool_results:
            content: list[ContentBlock] = []
            changed = False
            for block in message.content:
                if isinstance(block, ToolResultBlock) and len(block.text) > FORCED_RESULT_CHARS:
                    text = _head_tail(
                        block.text, FORCED_RESULT_CHARS, "cut to fit the context window"
                    )
                    block = block.model_copy(update={"output": text})
                    changed = True
                    shrunk += 1
                content.append(block)
            if changed:
                message = message.model_copy(update={"content": content})
        result.append(message)
    return result, shrunk


def _latest_summary(messages: Sequence[Msg]) -> Msg | None:
    for message in reversed(messages):
        if is_summary(message):
            return message
    return None


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


# --- the compactor -------------------------------------------------------------------------

PlanCallback = Callable[[CompactionPlan], Awaitable[None]]


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
        latest = _latest_summary(messages)
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
            return StepOutcome("failed", _error_text(exc))
        return StepOutcome("ok", f"{appended} new message(s) appended")

    async def _flush(self, ctx: RuntimeContext, prefix: Sequence[Msg]) -> StepOutcome:
        if self.flush is None:
            return StepOutcome("skipped", "no flush manager")
        try:
            result = await self.flush.flush(ctx, prefix)
        except Exception as exc:
            if is_interruption(exc):
                raise
            logger.warning("memory flush before compaction failed for %r: %s", ctx.session_id, exc)
            return StepOutcome("failed", _error_text(exc))
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
                reason = f"the summarizer failed: {_error_text(exc)}"
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
    ) -> CompactionResult | None:
        """Compact the conversation if it is due (or ``force``); None when nothing was done.

        Args:
            ctx: The call's context: which session's transcript and memory to write.
            messages: The conversation without system messages.
            config: Triggers, tail size, summary prompt and input budget.
            force: Compact even if no trigger fires, nothing is new since the last compaction
                or the conversation is shorter than ``keep_messages``; shrink the kept tail
                to the last user turn. For overflow recovery.
            on_plan: Awaited once the cut is known, before anything is written (the hook
                turns it into a ``PreCompact`` event).

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
            tail, shrunk = _shrink_tail(tail)
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
            await self._flush(ctx, prefix)
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
                    SUMMARY_METADATA_KEY: {
                        "id": compaction_id,
                        "covered_through": head[-1].id,
                        "last_id": messages[-1].id,
                        "first_kept_id": tail[0].id if tail else None,
                        "transcript": transcript,
                        "extractive": extractive,
                        "first_request": request,
                    }
                },
            )
        new_messages = ([summary] if summary is not None else []) + tail
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
            last_turn = _last_user_turn(messages)
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
