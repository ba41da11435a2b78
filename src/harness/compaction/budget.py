"""How much of the context window the conversation may take, from what the provider counted.

A request is a *fixed part* that no compaction shrinks (the system messages, the tool schemas,
a hint the step adds) and the *conversation* (the messages of memory). When a provider refuses
a request as too long it usually says how many tokens the request needed and how many the
window holds (:class:`~harness.errors.ContextOverflowError`). Recovery uses those instead of
guessing::

    ratio   = provider's prompt tokens / estimated tokens of the request
    room    = (window - answer's room) * MARGIN              (provider tokens for the prompt)
    target  = room / ratio - fixed part                      (estimated tokens)

so the conversation is made to fit on the first try. The estimate (2.5 characters a token)
overestimates; the ratio corrects it for this provider and this request. ``MARGIN`` absorbs
that the fixed part and the conversation do not tokenize alike.

Some servers count no tool schemas at all (llama-cpp-python's server leaves them out of the
prompt unless the request sets ``tool_choice``). A ratio below :data:`LOWEST_RATIO` cannot come
from text a tokenizer counted (it would mean more than six characters a token), so then the
tools are taken as not counted and the ratio is measured without them; otherwise the first
recovery would cut the conversation far below what fits.

When the fixed part, counted at its fewest tokens (:data:`LOWEST_RATIO`), leaves no room, no
compaction can help, and :func:`too_small` says so (``WindowTooSmall``): a refusal is never a
guess. Before any model call, when the window is known
ahead, :func:`check_fixed_part` says the same from a lower bound (the system messages alone,
counted at :data:`LOWEST_RATIO`; tools are not counted, since a server may leave them out), so
a refusal there is never a guess.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from harness.compaction._summary import (
    FORCED_RESULT_CHARS,
    MIN_RESULT_CHARS,
    fitted,
    latest_summary,
    shrink_tail,
)
from harness.compaction.tokens import estimate_message, estimate_text, estimate_tokens
from harness.errors import ContextOverflowError, WindowTooSmall
from harness.kernel import Msg, ToolSchema

__all__ = [
    "LOWEST_RATIO",
    "MARGIN",
    "RecoveryBudget",
    "RequestSize",
    "answer_reserve",
    "check_fixed_part",
    "fit_conversation",
    "measure",
    "recovery_budget",
    "too_small",
]

LOWEST_RATIO: Final = 0.4
"""Provider tokens per estimated token are at least this for text a tokenizer counted."""

HIGHEST_RATIO: Final = 20.0
"""A ratio above this is not believed (and is clamped): no text is that dense."""

MARGIN: Final = 0.9
"""The share of the prompt's room a recovery aims at."""

MAX_DEFAULT_RESERVE: Final = 4_096


def answer_reserve(window: int, configured: int | None = None) -> int:
    """Tokens kept free for the answer: ``configured``, else an eighth of the window (<= 4,096)."""
    if configured is not None:
        return configured
    return min(window // 8, MAX_DEFAULT_RESERVE)


def _tool_tokens(tool: ToolSchema) -> int:
    schema = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return estimate_text(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class RequestSize:
    """A request in estimated tokens: what never shrinks, and the conversation.

    Attributes:
        system: The system messages and any message the step added that memory does not hold.
        tools: The tool schemas.
        tool_count: How many tools.
        conversation: The messages that come from memory.
    """

    system: int
    tools: int
    tool_count: int
    conversation: int


def measure(
    messages: Sequence[Msg], tools: Sequence[ToolSchema], memory: Sequence[Msg]
) -> RequestSize:
    """Split a request into its fixed part and its conversation (``memory``'s messages)."""
    kept = {m.id for m in memory if m.role != "system"}
    system = conversation = 0
    for message in messages:
        if message.role != "system" and message.id in kept:
            conversation += estimate_message(message)
        else:
            system += estimate_message(message)
    return RequestSize(system, sum(_tool_tokens(t) for t in tools), len(tools), conversation)


@dataclass(frozen=True, slots=True)
class RecoveryBudget:
    """What a recovery may keep, from a refused request and the provider's sizes.

    Attributes:
        window: The window, as the provider stated it.
        reserve: Provider tokens kept for the answer.
        ratio: Provider tokens per estimated token of what the provider counted.
        tools_counted: False when the sizes show the provider did not count the tool schemas.
        fixed: The fixed part, in estimated tokens (tools included when counted).
        least_fixed: The fewest provider tokens the fixed part can take (at ``LOWEST_RATIO``).
        target: Estimated tokens the conversation may take (<= 0: nothing fits).
    """

    window: int
    reserve: int
    ratio: float
    tools_counted: bool
    fixed: int
    least_fixed: int
    target: int

    @property
    def room(self) -> int:
        """Estimated tokens a request without a fixed part may take (the summarizer's)."""
        return max(1, math.floor((self.window - self.reserve) * MARGIN / self.ratio))

    @property
    def fixed_tokens(self) -> int:
        """The fixed part in the provider's tokens, at the request's ratio."""
        return math.ceil(self.fixed * self.ratio)

    @property
    def fixed_fits(self) -> bool:
        """False when the fixed part, even at its fewest tokens, leaves no room at all."""
        return self.least_fixed + self.reserve < self.window


def recovery_budget(
    size: RequestSize, error: BaseException, reserve: int | None = None
) -> RecoveryBudget | None:
    """The budget the overflow's sizes give; None when the provider stated none.

    One ratio for the whole request is right when the fixed part and the conversation tokenize
    alike. When it leaves the conversation nothing, the fixed part may be what the estimate
    overrates (tool schemas a provider renders compactly): then the fixed part is counted at
    its fewest tokens and the conversation gets the rest of the provider's count; a retry that
    still overflows is measured again.

    Args:
        size: The refused request, measured.
        error: The overflow; its sizes are read when it is a ``ContextOverflowError``.
        reserve: The answer's room when the provider did not state it (None: the default).
    """
    if not isinstance(error, ContextOverflowError):
        return None
    prompt, window = error.prompt_tokens, error.limit_tokens
    if prompt is None or window is None or prompt <= 0:
        return None
    kept = (
        error.answer_tokens if error.answer_tokens is not None else answer_reserve(window, reserve)
    )
    with_tools = size.system + size.tools + size.conversation
    without_tools = size.system + size.conversation
    tools_counted = True
    ratio = prompt / max(1, with_tools)
    if ratio < LOWEST_RATIO and size.tools and prompt / max(1, without_tools) >= LOWEST_RATIO:
        tools_counted, ratio = False, prompt / max(1, without_tools)
    ratio = min(max(ratio, 1 / HIGHEST_RATIO), HIGHEST_RATIO)
    fixed = size.system + (size.tools if tools_counted else 0)
    least_fixed = math.ceil(fixed * LOWEST_RATIO)
    room = (window - kept) * MARGIN
    target = math.floor(room / ratio) - fixed
    if target <= 0 and least_fixed < min(room, prompt) and size.conversation > 0:
        conversation_ratio = (prompt - least_fixed) / size.conversation
        target = math.floor((room - least_fixed) / conversation_ratio)
    return RecoveryBudget(window, kept, ratio, tools_counted, fixed, least_fixed, target)


_CHANGE = (
    "give the model's real window with --context-window (CompactionConfig.context_window) if it "
    "is larger, or offer fewer tools (allowed_tools=)"
)


def too_small(
    budget: RecoveryBudget, size: RequestSize, *, measured: bool = False
) -> WindowTooSmall:
    """The error for a fixed part that the window the provider stated cannot hold.

    ``measured``: the fixed part's size is the ratio's (a second overflow, the conversation
    already cut to its least), not its fewest possible tokens.
    """
    tools = f" and {size.tool_count} tool schemas" if budget.tools_counted and size.tools else ""
    taken = f"about {budget.fixed_tokens:,}" if measured else f"at least {budget.least_fixed:,}"
    msg = (
        f"the model's context window ({budget.window:,} tokens, as the provider says) cannot "
        f"hold the fixed part of a request: the system prompt{tools} take {taken} tokens and "
        f"{budget.reserve:,} are kept for the answer, leaving no room for the conversation; use "
        "a model with a larger window (a local model's is --context-window), or offer fewer "
        "tools (allowed_tools=)"
    )
    return WindowTooSmall(msg)


def check_fixed_part(
    messages: Sequence[Msg],
    tools: Sequence[ToolSchema],
    memory: Sequence[Msg],
    *,
    window: int,
    reserve: int | None = None,
) -> None:
    """Refuse, before any model call, a fixed part that surely does not fit ``window``.

    Raises:
        WindowTooSmall: The system messages alone, at the lowest count a tokenizer gives
            (:data:`LOWEST_RATIO`), and the answer's room exceed the window.
    """
    kept_ids = {m.id for m in memory if m.role != "system"}
    fixed = [m for m in messages if m.role == "system" or m.id not in kept_ids]
    at_least = math.ceil(sum(estimate_message(m) for m in fixed) * LOWEST_RATIO)
    kept = answer_reserve(window, reserve)
    if at_least + kept < window:
        return
    size = measure(messages, tools, memory)
    tools_note = (
        f", before {size.tool_count} tool schemas (about {math.ceil(size.tools * LOWEST_RATIO):,}"
        " tokens more where the provider counts them) and any conversation"
        if size.tools
        else ", before any conversation"
    )
    msg = (
        f"the model's context window ({window:,} tokens) cannot hold the fixed part of a request:"
        f" the system prompt takes at least {at_least:,} tokens and {kept:,} are kept for the "
        f"answer{tools_note}; {_CHANGE}"
    )
    raise WindowTooSmall(msg)


def fit_conversation(conversation: Sequence[Msg], target: int) -> list[Msg] | None:
    """The conversation made to take at most ``target`` estimated tokens, as far as it can.

    Its latest summary is cut to what the rest leaves (:func:`fitted`); when the rest leaves
    not even room for the summary's header, the tool results outside the summary are cut first,
    halving down to :data:`MIN_RESULT_CHARS` (their head and tail stay). What the user wrote is
    never cut. None when nothing changed (it fits, or nothing can shrink).
    """
    messages = list(conversation)
    if estimate_tokens(messages) <= target:
        return None
    summary = latest_summary(messages)
    where = next((i for i, m in enumerate(messages) if m is summary), None)
    rest = [m for i, m in enumerate(messages) if i != where]
    floor = 0
    if summary is not None:
        floor = estimate_message(fitted(summary, 0) or summary)
    changed = False
    limit = FORCED_RESULT_CHARS * 2
    while estimate_tokens(rest) + floor > target and limit > MIN_RESULT_CHARS:
        limit = max(MIN_RESULT_CHARS, limit // 2)
        rest, shrunk = shrink_tail(rest, limit)
        changed = changed or shrunk > 0
    if summary is not None and where is not None:
        shorter = fitted(summary, target - estimate_tokens(rest))
        rest.insert(where, shorter or summary)
        changed = changed or shorter is not None
    return rest if changed else None
