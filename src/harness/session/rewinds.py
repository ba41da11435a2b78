"""Rewinding a session: a new input replaces its last, as a chat's "edit" and "regenerate" do.

The last message is the user's last input: the newest user message the harness did not write
(not a tool's result, not a note). It and everything after it (the answers, the tool calls) are
set aside, and the new input takes its place. Nothing is lost: what is set aside is first
appended, whole, to ``rewound.jsonl`` in the session's directory (one JSON line per rewind:
when, and the messages), and only then does the turn's save rewrite the conversation without it
(atomically, as any rewrite). A crash between the two leaves both copies, never neither.
Deleting the session deletes its rewinds with it.

A session whose last input was compacted into a summary has nothing to replace; one whose tool
calls after it wait for a decision must be decided first (the approvals would be left
deciding nothing). Both are :class:`~harness.errors.CannotRewind`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from harness.errors import CannotRewind
from harness.kernel import Msg, ToolResultBlock, unanswered_calls, written_by_harness
from harness.workspace import WorkspaceManager

__all__ = ["REWOUND_FILE", "rewind_point", "set_aside"]

REWOUND_FILE: Final = "rewound.jsonl"


def rewind_point(messages: Sequence[Msg]) -> int:
    """The index of the session's last input: where a rewind cuts.

    Raises:
        CannotRewind: There is none, or tool calls wait for a decision.
    """
    if unanswered_calls(messages):
        msg = "tool calls of this session wait for a decision; decide them before replacing"
        raise CannotRewind(msg)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user" and _typed(message):
            return index
    raise CannotRewind("the session has no message of the user's to replace")


async def set_aside(workspace: WorkspaceManager, directory: str, messages: Sequence[Msg]) -> None:
    """Append what a rewind cuts to the session's ``rewound.jsonl``, as one whole record."""
    record = {
        "at": datetime.now(UTC).isoformat(),
        "messages": [message.model_dump(mode="json") for message in messages],
    }
    line = json.dumps(record, ensure_ascii=False) + "\n"
    await workspace.append_text(f"{directory}/{REWOUND_FILE}", line)


def _typed(message: Msg) -> bool:
    """A message the user sent: not written by the harness, not a tool's result."""
    return not written_by_harness(message) and not any(
        isinstance(block, ToolResultBlock) for block in message.content
    )
