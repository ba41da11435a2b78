"""Where to cut a conversation for compaction: never between a tool call and its results."""

from __future__ import annotations

from collections.abc import Sequence

from harness.kernel import Msg, ToolResultBlock, ToolUseBlock
from harness.memory.render import is_summary

__all__ = ["last_user_turn", "safe_cut"]


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


def last_user_turn(messages: Sequence[Msg]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user" and not is_summary(messages[index]):
            return index
    return None
