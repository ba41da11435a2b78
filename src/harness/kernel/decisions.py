"""What happens to a tool call the model made: it runs, gets a result instead, or waits.

Before any tool of a step runs, the agent offers each of the step's calls, one by one, to the
hooks as a :class:`~harness.kernel.ToolDecision` whose ``decision`` starts as :class:`Run` (a
new call) or as a lost result (a call found unanswered when a call starts: see below). A hook
(approvals, :mod:`harness.hooks.approvals`) may set it to:

- :class:`Run`: the tool runs, with the call's arguments or the ones given (an edit), or what
  runs in its place (a subagent continued with its decisions);
- :class:`Substitute`: the tool does not run; ``result`` is what the model is told instead (a
  rejection, a reviewer's answer, the result of a run that already happened);
- :class:`Defer`: the tool does not run yet. Once the step's other calls are done and their
  results are in memory, the call ends :class:`~harness.kernel.Paused`, listing what each
  deferred call's ``request`` says; the assistant turn stays in memory with its calls, and
  a later call on the same conversation decides the calls still unanswered before anything
  else (the model is not asked again first).

A call that starts on a conversation whose last assistant turn has unanswered tool calls offers
those to the hooks with ``resumed=True`` and a default of :func:`lost_result`: without a hook
that knows the call was waiting (and was decided), the tool may or may not have run before the
previous call ended, so it is never run again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness.kernel.message import ToolResultBlock, ToolUseBlock

__all__ = [
    "LOST_RESULT",
    "Decision",
    "Defer",
    "Run",
    "Substitute",
    "lost_result",
]

LOST_RESULT: Final = (
    "Error: the result of this tool call was lost (a line of the saved session could not be "
    "read); run the tool again if the result is still needed."
)
"""The result given to a tool call whose own result is missing from the conversation."""


@dataclass(frozen=True, slots=True)
class Run:
    """Run the tool; with ``arguments``, run it with those instead of the model's (an edit)."""

    arguments: Mapping[str, Any] | None = None
    note: str | None = None
    """Said after the tool's output (why the arguments differ from the model's, say)."""
    instead: Callable[[], Awaitable[Any]] | None = None
    """Runs in the tool's place, its value read as the tool's would be: a subagent whose call
    waited, continued with the decisions taken on it. Its result (or its pause, when the
    subagent waits again) is the call's, as if the tool had returned it."""


@dataclass(frozen=True, slots=True)
class Substitute:
    """Do not run the tool; the model reads ``result`` as the call's result."""

    result: ToolResultBlock


@dataclass(frozen=True, slots=True)
class Defer:
    """Do not run the tool now: the call pauses, and ``request`` says what it waits for.

    ``more``: further requests the same call waits for (a subagent waiting on several).
    """

    request: Mapping[str, Any]
    more: Sequence[Mapping[str, Any]] = ()


Decision = Run | Substitute | Defer


def lost_result(call: ToolUseBlock) -> Substitute:
    """The error result of a call whose result is missing: it is never run again."""
    return Substitute(
        ToolResultBlock(id=call.id, name=call.name, output=LOST_RESULT, is_error=True)
    )
