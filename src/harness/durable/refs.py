"""What the workflow and its activities pass: references and outcomes, never a conversation.

Temporal keeps every payload in the workflow's history (2 MB a payload, 50 MB a history), so
nothing here grows with the conversation: a turn is named by its session and its id, and its
reply stays in the session store, where the worker that ran it saved it. The one text that
travels is the turn's new input, bounded by the caller (``harness serve`` caps it at
``max_input_chars``), with the schema of its output when it asks for one. This module imports
nothing but the standard library: the workflow's sandbox loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = ["TURN_KEY", "SegmentEnd", "TaskRef", "TurnRef"]

TURN_KEY: Final = "harness_turn"
"""The metadata key, on a turn's input message, of the turn's id: how a worker that takes the
turn over knows whether the input was already accepted (and must not be added again)."""


@dataclass(frozen=True)
class TurnRef:
    """One run of a turn: whose session, which turn, its new input (None continues it).

    ``stream``: the id of this run's events (a served turn's event stream; each continuation
    after decisions has its own, as a served continuation does in process). ``output_schema``
    and ``output_name``: the JSON schema a new turn's answer must fit (structured output), and
    its name; a schema travels as the caller gave it (``harness serve`` bounds the request).
    """

    agent: str
    session_id: str
    turn: str
    user_id: str | None = None
    text: str | None = None
    stream: str = ""
    output_schema: dict[str, Any] | None = None
    output_name: str = "answer"


@dataclass(frozen=True)
class SegmentEnd:
    """How one run of the turn's activity ended: finished, paused, failed or cancelled.

    ``pending``: the approval ids a paused turn waits for, and ``expires_in``: the seconds until
    the last of them expires (then the turn goes on, as if they were rejected); ``error``: a
    failure's one line.
    """

    kind: Literal["finished", "paused", "failed", "cancelled"]
    pending: list[str] = field(default_factory=list)
    error: str | None = None
    expires_in: float | None = None


@dataclass(frozen=True)
class TaskRef:
    """One background task: its record (by id, in its user's namespace), and more.

    ``text``: the whole task the parent gave (the record keeps only its head); ``depth``: the
    spawning call's subagent depth (the child's is one more).
    """

    agent: str
    task_id: str
    user_id: str | None
    text: str
    depth: int = 0
