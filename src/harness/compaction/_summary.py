"""What the summarizer is given, what a summary message says, and the extractive fallback."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

from harness.compaction.config import MESSAGES_PLACEHOLDER, TruncateArgsConfig
from harness.compaction.tokens import estimate_message, estimate_text
from harness.compaction.truncation import truncate_message_args
from harness.kernel import (
    ContentBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from harness.memory.render import is_summary

__all__ = [
    "SUMMARY_METADATA_KEY",
    "error_text",
    "extractive_summary",
    "first_request",
    "fitted",
    "latest_summary",
    "render_for_summary",
    "shrink_tail",
    "summary_input",
    "summary_message_text",
    "tightened",
]

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


_FIRST_REQUEST_HEAD: Final = "\n\nThe user's first request in this session, verbatim:\n"


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
        text += f"{_FIRST_REQUEST_HEAD}<first_request>\n{request}\n</first_request>"
    return text


TIGHT_SUMMARY_CHARS: Final = 1_200
"""What a summary keeps of its body when even the forced compaction did not fit the window."""


def tightened(message: Msg) -> Msg | None:
    """The summary message made tight; None when that would not make it shorter.

    Tight: without its verbatim first request, which :func:`summary_message_text` puts last,
    and with its body cut to :data:`TIGHT_SUMMARY_CHARS`. For a context overflow that a forced
    compaction did not cure: a window so small that the summary does not fit beside the system
    prompt and the last turn. The first request stays in the summary's metadata (later
    summaries still quote it) and in the transcript.
    """
    text = message.text
    quoted = text.rfind(_FIRST_REQUEST_HEAD)
    if quoted != -1:
        text = text[:quoted]
    body = _summary_body(message)
    if body in text:
        text = text.replace(body, _head_tail(body, TIGHT_SUMMARY_CHARS, "cut to fit the window"))
    if len(text) >= len(message.text):
        return None
    return message.model_copy(update={"content": [TextBlock(text=text)]})


MIN_RESULT_CHARS: Final = 500
"""The least of a tool result a conversation made to fit keeps (its head and its tail)."""

_CUT_NOTE_TOKENS: Final = 24
"""Room for the note that stands where a summary's body was cut."""


def fitted(message: Msg, max_tokens: int) -> Msg | None:
    """The summary message cut to ``max_tokens`` estimated tokens; None if it fits already.

    Like :func:`tightened`, by as much as the budget asks: first without its verbatim first
    request, then with its body cut (head and tail kept, a note between), down to no body at
    all, and last to one line that says where the conversation is kept (the metadata, with the
    first request, stays whole). The result may still exceed ``max_tokens``.
    """
    if estimate_message(message) <= max_tokens:
        return None
    text = message.text
    quoted = text.rfind(_FIRST_REQUEST_HEAD)
    if quoted != -1:
        text = text[:quoted]
    shorter = message.model_copy(update={"content": [TextBlock(text=text)]})
    over = estimate_message(shorter) - max_tokens
    body = _summary_body(message)
    if over > 0 and body and body in text:
        keep = max(0, len(body) - (over + _CUT_NOTE_TOKENS) * 5 // 2)
        cut = (
            _head_tail(body, keep, "cut to fit the window")
            if keep >= 2
            else f"...({len(body):,} characters cut to fit the window)..."
        )
        if estimate_text(cut) < estimate_text(body):
            text = text.replace(body, cut)
        if keep < 2 and estimate_text(text) > max_tokens:  # not even the header fits: one line
            text = _cut_summary_text(message)
    if len(text) >= len(message.text):
        return None
    return message.model_copy(update={"content": [TextBlock(text=text)]})


def _cut_summary_text(message: Msg) -> str:
    """The least a summary says: that there was a conversation, and where it is kept."""
    meta = message.metadata.get(SUMMARY_METADATA_KEY)
    transcript = meta.get("transcript") if isinstance(meta, Mapping) else None
    where = f", saved in {transcript}" if isinstance(transcript, str) and transcript else ""
    return f"(An earlier conversation{where}; its summary was cut to fit the context window.)"


def shrink_tail(tail: list[Msg], result_chars: int = FORCED_RESULT_CHARS) -> tuple[list[Msg], int]:
    """Cut oversized tool results and tool arguments of a forced compaction's tail.

    Tool results longer than ``result_chars`` keep their head and tail.
    """
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
                if isinstance(block, ToolResultBlock) and len(block.text) > result_chars:
                    text = _head_tail(block.text, result_chars, "cut to fit the context window")
                    block = block.model_copy(update={"output": text})
                    changed = True
                    shrunk += 1
                content.append(block)
            if changed:
                message = message.model_copy(update={"content": content})
        result.append(message)
    return result, shrunk


def latest_summary(messages: Sequence[Msg]) -> Msg | None:
    for message in reversed(messages):
        if is_summary(message):
            return message
    return None


def error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
