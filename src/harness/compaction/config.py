"""Compaction settings: when to compact, what to keep, and how to shrink tool arguments.

Two ways to say *when*:

- fixed numbers, the original's defaults: compact at 50 messages or 80,000 estimated tokens,
  keep the last 20 messages;
- relative to the model's context window (``trigger_fraction``, ``keep_fraction`` with
  ``context_window``), because a fixed 80,000 tokens never fires for a 1M-token model and fires
  too late for a 32k one.

Setting a trigger to 0 disables that trigger; a fraction, when given, replaces the fixed number
it corresponds to. ``compaction=None`` on the agent disables compaction altogether.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_MAX_SUMMARY_INPUT_TOKENS",
    "DEFAULT_SUMMARY_PROMPT",
    "TRUNCATION_TEXT",
    "CompactionConfig",
    "TruncateArgsConfig",
]

MESSAGES_PLACEHOLDER: Final = "{messages}"

DEFAULT_SUMMARY_PROMPT: Final = """\
<role>
Context Extraction Assistant
</role>

<primary_objective>
Extract the highest-quality, most relevant context from the conversation below.
</primary_objective>

<objective_information>
The conversation is close to the model's input limit. What you write will replace the \
conversation history, so keep only what matters for the user's overall goal. Earlier summaries \
may appear in the input: carry their SESSION INTENT forward unchanged unless the user changed \
their goal, and merge their other sections with the new messages.
</objective_information>

<instructions>
Do not repeat actions that are already complete. Structure the summary with exactly these four \
markdown sections, and write "None" for a section that has nothing:

## SESSION INTENT
The user's primary goal and their original request, in their words where possible.

## SUMMARY
Key context, decisions and their reasons, and options that were rejected.

## ARTIFACTS
Files and resources created, modified or read, with their paths and what changed.

## NEXT STEPS
What remains to be done.

Respond only with the extracted context.
</instructions>

<messages>
{messages}
</messages>
"""
"""The summarizer's prompt; ``{messages}`` is replaced by the conversation to summarize."""

DEFAULT_MAX_SUMMARY_INPUT_TOKENS: Final = 60_000
"""Estimated tokens of the summarizer's prompt; longer input is trimmed to fit."""

TRUNCATION_TEXT: Final = "...(argument truncated)"
"""Appended to the kept head of a truncated tool argument."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _non_negative(owner: str, **values: int) -> None:
    for name, value in values.items():
        _require(value >= 0, f"{owner}.{name} must be >= 0 (0 disables it), got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncateArgsConfig:
    """Shortens long string arguments of old tool calls, without a model.

    It has its own trigger and takes effect whenever that trigger fires, whether or not
    compaction runs (the original discarded its work unless compaction fired too).

    Args:
        trigger_messages: Truncate when the conversation has this many messages; 0 disables.
        trigger_tokens: Truncate when it has this many tokens; 0 disables.
        keep_messages: The newest messages left untouched (when ``keep_tokens`` is 0).
        keep_tokens: If > 0, the newest messages that fit this many tokens are left untouched.
        max_arg_length: String arguments longer than this many characters are truncated.
        keep_chars: How many leading characters of a truncated argument are kept.
        truncation_text: Appended to the kept characters.
    """

    trigger_messages: int = 25
    trigger_tokens: int = 40_000
    keep_messages: int = 20
    keep_tokens: int = 0
    max_arg_length: int = 2_000
    keep_chars: int = 20
    truncation_text: str = TRUNCATION_TEXT

    def __post_init__(self) -> None:
        owner = "TruncateArgsConfig"
        _non_negative(
            owner,
            trigger_messages=self.trigger_messages,
            trigger_tokens=self.trigger_tokens,
            keep_messages=self.keep_messages,
            keep_tokens=self.keep_tokens,
            keep_chars=self.keep_chars,
        )
        _require(
            self.max_arg_length > 0,
            f"{owner}.max_arg_length must be > 0, got {self.max_arg_length!r}",
        )
        _require(
            self.keep_chars < self.max_arg_length,
            f"{owner}.keep_chars must be smaller than max_arg_length "
            f"({self.max_arg_length}), got {self.keep_chars!r}",
        )
        _require(
            bool(self.truncation_text),
            f"{owner}.truncation_text must not be empty: it marks what was truncated",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionConfig:
    """When and how conversation history is replaced by a summary.

    Args:
        trigger_messages: Compact when the conversation (system messages left out) has this
            many messages; 0 disables this trigger.
        trigger_tokens: Compact when it has this many tokens (estimated, corrected by the
            provider's reported usage); 0 disables this trigger.
        keep_messages: How many of the newest messages to keep verbatim (when no token budget
            is set).
        keep_tokens: If > 0, keep the newest messages that fit this many tokens instead.
        trigger_fraction: Compact at this fraction of ``context_window`` tokens; replaces
            ``trigger_tokens``.
        keep_fraction: Keep the newest messages that fit this fraction of ``context_window``;
            replaces ``keep_tokens``.
        context_window: The model's context window in tokens; required by the fractions.
            When known, a first call whose system prompt alone cannot fit it is refused
            (:class:`~harness.errors.WindowTooSmall`) before the model is asked.
        reserve_tokens: Tokens kept free for the answer when sizing a recovery, where the
            provider's error does not state the request's ``max_tokens`` (None: an eighth of
            the window, at most 4,096).
        flush_before: Flush the summarized messages to memory before summarizing them.
        offload_before: Write the whole conversation to the session transcript before
            compacting, so the summary can point to the full history.
        summary_prompt: The summarizer's prompt; must contain ``{messages}``.
        max_summary_input_tokens: The summarizer's input is trimmed to this many tokens, so
            summarizing an overflowing conversation does not overflow the summarizer.
        truncate_args: Shorten long arguments of old tool calls (None: never).
        recent_requests: How many of the latest user requests an extractive summary (made
            when the summarizer fails) quotes besides the first one.

    Raises:
        ValueError: A value is out of range; the message names the field.
    """

    trigger_messages: int = 50
    trigger_tokens: int = 80_000
    keep_messages: int = 20
    keep_tokens: int = 0
    trigger_fraction: float | None = None
    keep_fraction: float | None = None
    context_window: int | None = None
    reserve_tokens: int | None = None
    flush_before: bool = True
    offload_before: bool = True
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    max_summary_input_tokens: int = DEFAULT_MAX_SUMMARY_INPUT_TOKENS
    truncate_args: TruncateArgsConfig | None = None
    recent_requests: int = 3

    def __post_init__(self) -> None:
        owner = "CompactionConfig"
        _non_negative(
            owner,
            trigger_messages=self.trigger_messages,
            trigger_tokens=self.trigger_tokens,
            keep_messages=self.keep_messages,
            keep_tokens=self.keep_tokens,
            recent_requests=self.recent_requests,
        )
        _require(
            MESSAGES_PLACEHOLDER in self.summary_prompt,
            f"{owner}.summary_prompt must contain the placeholder {MESSAGES_PLACEHOLDER}, "
            "where the conversation to summarize goes",
        )
        _require(
            self.max_summary_input_tokens > 0,
            f"{owner}.max_summary_input_tokens must be > 0, got {self.max_summary_input_tokens!r}",
        )
        if self.reserve_tokens is not None:
            _non_negative(owner, reserve_tokens=self.reserve_tokens)
        if self.context_window is not None:
            _require(
                self.context_window > 0,
                f"{owner}.context_window must be > 0, got {self.context_window!r}",
            )
        for name in ("trigger_fraction", "keep_fraction"):
            value = getattr(self, name)
            if value is None:
                continue
            _require(
                0 < value <= 1 if name == "trigger_fraction" else 0 < value < 1,
                f"{owner}.{name} must be a fraction of the context window "
                f"({'0 < f <= 1' if name == 'trigger_fraction' else '0 < f < 1'}), got {value!r}",
            )
            _require(
                self.context_window is not None,
                f"{owner}.{name} needs context_window (the model's window in tokens)",
            )
        trigger, keep = self.effective_trigger_tokens, self.effective_keep_tokens
        if trigger > 0 and keep > 0:
            field = "keep_fraction" if self.keep_fraction is not None else "keep_tokens"
            _require(
                keep < trigger,
                f"{owner}.{field} ({keep} tokens) must be smaller than the token trigger "
                f"({trigger} tokens), or every compaction would trigger the next",
            )

    @property
    def effective_trigger_tokens(self) -> int:
        """The token trigger in force: from ``trigger_fraction`` if set, else ``trigger_tokens``."""
        if self.trigger_fraction is not None and self.context_window is not None:
            return max(1, math.floor(self.context_window * self.trigger_fraction))
        return self.trigger_tokens

    @property
    def effective_keep_tokens(self) -> int:
        """The tail's token budget in force (0: keep ``keep_messages`` messages instead)."""
        if self.keep_fraction is not None and self.context_window is not None:
            return max(1, math.floor(self.context_window * self.keep_fraction))
        return self.keep_tokens
