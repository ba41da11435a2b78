"""How a call ended: the last item of every stream, and what ``call`` returns.

A call ends in one of four ways, each a value:

- :class:`Finished`: the model answered; ``reply`` is its answer.
- :class:`Paused`: tool calls wait for a decision (an approval). Not a failure: the step's
  other calls ran, the conversation keeps the model's turn with its waiting calls, and a later
  call on the session continues once they are decided (:mod:`harness.kernel.decisions`).
  ``accepted`` is False when the call refused its new input because earlier calls of the
  session still wait: nothing of that input was kept.
- :class:`Cancelled`: :meth:`~harness.kernel.ReActAgent.interrupt` stopped it.
- :class:`Failed`: an error ended it (the model failed, a save failed, a tool's hook raised).

Pausing is a way to end, not an error: nothing raises to pause. A tool whose own work waits
(a subagent whose call waits for approval) returns a :class:`Paused` as its result, and the
call pauses with it. ``call`` returns :class:`Finished` or :class:`Paused`, and raises the
error of the other two (an interrupted call raises
:class:`~harness.errors.AgentInterrupted`), as a Python caller expects of a failure; a
streaming caller reads all four as the stream's last item and maps them itself (the CLI to an
exit code, the server to an HTTP answer).

The two a call returns (:data:`Ended`, what :class:`~harness.kernel.PostCall` carries) both
carry the model's last turn (``reply``: its answer, or the turn whose calls wait), say what
the call waits for (``pending``: empty unless it paused) and how a trace records them
(``record``), so code that only shows the reply, reports the outcome or passes on what waits
never asks which it is: ``(await agent.call(text)).reply.text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.errors import AgentInterrupted
from harness.kernel.message import Msg

__all__ = ["Cancelled", "Ended", "Failed", "Finished", "Outcome", "Paused", "pending_of"]


@dataclass(frozen=True, slots=True)
class Finished:
    """The call answered with ``reply``.

    ``output``: the answer as the output type the call asked for (``HarnessAgent.call(...,
    output=...)``), validated; None when it asked for none.
    """

    reply: Msg
    output: Any = None

    @property
    def pending(self) -> tuple[Mapping[str, Any], ...]:
        """Nothing: a finished call waits for nothing."""
        return ()

    def record(self) -> dict[str, Any]:
        """The outcome as the trace records it."""
        return {"outcome": "finished", "reply_chars": len(self.reply.text)}


@dataclass(frozen=True, slots=True)
class Paused:
    """Tool calls wait for decisions; ``pending`` says what each waits for.

    Each request is what the hook that deferred the call made of it (for approvals: id, tool,
    arguments, description, allowed decisions, expiry); a request that came through a tool
    (a subagent's) also names the call it came through (``via_tool_call``, ``via_tool``,
    ``via_input``) and the child (``subagent``, ``child_key``).
    """

    pending: tuple[Mapping[str, Any], ...]
    accepted: bool = True
    """False when the call's new input was refused because these calls waited already."""
    reply: Msg = field(kw_only=True)
    """The model's turn whose calls wait (its text is what the model said before them), so
    ``outcome.reply`` is the model's last word whichever way the call ended."""

    @property
    def message(self) -> str:
        """One line that says what waits, for a person or a log."""
        waits = f"{len(self.pending)} tool call(s) wait for a decision"
        if self.accepted:
            return f"{waits} before they run"
        return (
            f"{waits}; the new message was not accepted: decide them and continue the session first"
        )

    def record(self) -> dict[str, Any]:
        return {"outcome": "paused", "paused": [request.get("id") for request in self.pending]}


@dataclass(frozen=True, slots=True)
class Cancelled:
    """:meth:`~harness.kernel.ReActAgent.interrupt` stopped the call."""

    error: AgentInterrupted


@dataclass(frozen=True, slots=True)
class Failed:
    """An error ended the call; memory keeps what it completed (the input, finished steps)."""

    error: BaseException


Ended = Finished | Paused
"""The outcomes ``call`` returns (the other two raise their error)."""

Outcome = Finished | Paused | Cancelled | Failed


def pending_of(value: object) -> tuple[Mapping[str, Any], ...]:
    """What a tool's value waits for: a :class:`Paused`'s requests, else nothing.

    The one test of a tool's value for a pause, shared by the two readers of such values: the
    agent's loop (the call waits) and a background task, which keeps what its tool would have
    returned (the task waits).
    """
    return value.pending if isinstance(value, Paused) else ()
