"""The events an agent emits to its hooks.

Every event carries the call's :class:`RuntimeContext` (``ctx``), the agent's name, the
call's conversation (``memory``: the messages the agent keeps, in order), the conversation's
:class:`~harness.kernel.SessionState` (``state``: what hooks keep about it from call to call,
saved with it) and the call's id (``call_id``, fresh for every call: what a hook keys per-call
state by, since two calls may run at once on one agent). Fields documented as mutable are the
points where hooks change what happens next:

- :class:`PreReasoning.messages` is rebuilt from memory for every step, so whatever a hook puts
  there (a system-prompt section, a trimmed history) is seen by this one model call and never
  written back into memory;
- :class:`ToolDecision.decision` runs a tool call, answers it without running it, or makes the
  call pause before it (:mod:`harness.kernel.decisions`);
- :class:`PostActing.result` replaces the tool result that memory keeps;
- :class:`PostCall.outcome` replaces the outcome the caller receives (finished or paused);
- :class:`ContextOverflow.recovered`, set by a hook that shrank ``memory`` after the provider
  refused a request as too long, makes the agent try that step once more;
- :class:`PostCall.finishing` (and :class:`Error.finishing`) takes work a hook has started
  (a task) that the hooks after it need not wait for, but the call does: the trace's record
  of the call is written while the session's last save runs, and the call returns once both
  are done.

``memory`` is the conversation itself, and whatever a hook leaves in it is saved with the
session: a hook changes it only where it means the change to last, at PreReasoning (which runs
before the step's request is built from it) or at PostCompact. The harness's own hooks that do:
compaction replaces its start (``memory[:] = ...``, announced with
:class:`PreCompact`/:class:`PostCompact`, and again after a :class:`ContextOverflow`), and the
subagents hook appends the notice of a finished background task. Every other hook only reads it.

Messages are values: a hook that wants a message to read differently replaces it in the list
(``msg.model_copy(update=...)``) and never edits it in place. The same message objects are in
memory, in the step's request and in the session store's record of what it saved, so an
in-place edit would leak into all of them.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field

from harness.context import RuntimeContext
from harness.kernel.decisions import Decision
from harness.kernel.message import Msg, ToolResultBlock, ToolUseBlock
from harness.kernel.model import ToolSchema, Usage
from harness.kernel.outcome import Ended
from harness.kernel.state import SessionState

__all__ = [
    "ContextOverflow",
    "Error",
    "Event",
    "PostActing",
    "PostCall",
    "PostCompact",
    "PostReasoning",
    "PreActing",
    "PreCall",
    "PreCompact",
    "PreReasoning",
    "ToolDecision",
]


@dataclass(slots=True, kw_only=True)
class Event:
    """Base of all events."""

    ctx: RuntimeContext
    agent: str
    memory: list[Msg]
    call_id: str
    state: SessionState = field(default_factory=SessionState)


@dataclass(slots=True, kw_only=True)
class PreCall(Event):
    """A call starts; ``inputs`` are already appended to memory.

    Except when the previous call left tool calls waiting (paused): ``inputs`` join memory
    once those are decided, right after this event (:mod:`harness.kernel.decisions`).
    """

    inputs: list[Msg]


@dataclass(slots=True, kw_only=True)
class PreReasoning(Event):
    """A model call is about to be made with ``messages`` and ``tools`` (both mutable)."""

    step: int
    messages: list[Msg]
    tools: list[ToolSchema]


@dataclass(slots=True, kw_only=True)
class ContextOverflow(Event):
    """The provider refused step ``step``'s request as too long for its context window.

    Nothing of the step was streamed yet. A hook that makes ``memory`` shorter (compaction) sets
    ``recovered``, and the agent runs the step again from PreReasoning; otherwise ``error`` is
    raised. ``attempt`` counts the overflows of this step before this one (0 for the first), up
    to ``MAX_RECOVERIES - 1``, so a hook can shrink harder each time. ``messages`` and ``tools``
    are the refused request as the hooks shaped it (read only): beside the sizes the provider
    stated on ``error``, they tell a hook how much of the request memory is and how much never
    shrinks (the system prompt, the tool schemas).
    """

    step: int
    error: BaseException
    attempt: int = 0
    recovered: bool = False
    messages: list[Msg] = field(default_factory=list)
    tools: list[ToolSchema] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class PostReasoning(Event):
    """The model answered; ``message`` is already in memory."""

    step: int
    message: Msg
    model: str
    usage: Usage | None
    latency_s: float


@dataclass(slots=True, kw_only=True)
class ToolDecision(Event):
    """What happens to a tool call, decided before any tool of its step runs (mutable).

    ``decision`` starts as :class:`~harness.kernel.Run` for a call the model just made, and as
    a lost result for one found unanswered when the call started (``resumed``); a hook may set
    it to run (with other arguments), to a result given instead, or to wait
    (:mod:`harness.kernel.decisions`).
    """

    tool_call: ToolUseBlock
    decision: Decision
    resumed: bool = False


@dataclass(slots=True, kw_only=True)
class PreActing(Event):
    """A tool is about to run."""

    tool_call: ToolUseBlock


@dataclass(slots=True, kw_only=True)
class PostActing(Event):
    """A tool finished; ``result`` (mutable) is what memory will keep."""

    tool_call: ToolUseBlock
    result: ToolResultBlock
    latency_s: float


@dataclass(slots=True, kw_only=True)
class PostCall(Event):
    """A call ended as it meant to: answered, or paused before tool calls that wait.

    ``outcome`` (mutable) is what the caller receives: :class:`~harness.kernel.Finished`
    with the reply, or :class:`~harness.kernel.Paused` with what waits (memory then keeps the
    model's turn with its waiting calls). A cancelled or failed call is an :class:`Error`.
    """

    outcome: Ended
    finishing: list[Awaitable[object]] = field(default_factory=list)
    """Started work the call waits for after the last hook (a hook's failure if it raises)."""


@dataclass(slots=True, kw_only=True)
class Error(Event):
    """A call failed or was interrupted; its outcome (cancelled or failed) carries ``error``."""

    error: BaseException
    finishing: list[Awaitable[object]] = field(default_factory=list)
    """Started work the call waits for after the last hook (a failure is noted on ``error``)."""


@dataclass(slots=True, kw_only=True)
class PreCompact(Event):
    """Compaction is about to replace the first ``cut`` messages of memory with a summary."""

    cut: int
    tokens_before: int


@dataclass(slots=True, kw_only=True)
class PostCompact(Event):
    """Compaction replaced ``removed`` messages with ``summary``."""

    removed: int
    summary: Msg
    tokens_after: int
    details: dict[str, object] = field(default_factory=dict)
