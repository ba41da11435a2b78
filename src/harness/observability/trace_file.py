"""The per-session trace file: one JSON object per line, one line per event.

Where: ``agents/<agent>/traces/<session>.jsonl`` in the namespace of the call's user
(``users/<user>/`` for a call made for a user, the workspace root otherwise), written through
the :class:`~harness.workspace.WorkspaceManager` so it lives on whatever backend the workspace
uses. ``<agent>`` and ``<session>`` are made into path segments with
:func:`~harness.workspace.safe_segment`; a call without a session id traces to ``default``.

Every record has:

- ``ts``: when the event happened, ISO-8601 in UTC with microseconds;
- ``event``: what happened: the kernel event's class name (``PreCall``, ``PreReasoning``,
  ``PostReasoning``, ``PreActing``, ``PostActing``, ``PostCall``, ``Error``, ``PreCompact``,
  ``PostCompact``), or a name given to :func:`record` for work outside the loop
  (``memory_flush``, ``task`` ...);
- ``agent``, ``session_id``, ``user_id``;
- ``call_id``: the call the event belongs to (``None`` for work outside a call);
- ``elapsed_s``: seconds since the call started (only on events of a call).

and then the event's own fields:

=================  ==========================================================================
``PreCall``        ``inputs`` (new messages), ``messages`` (conversation length)
``PreReasoning``   ``step``, ``messages``, ``tools``
``PostReasoning``  ``step``, ``model``, ``input_tokens`` (the whole prompt),
                   ``output_tokens``, ``cache_read_tokens`` and ``cache_write_tokens`` (of
                   the prompt, served from and written to the provider's cache; all
                   ``None`` when the provider reported no usage), ``latency_s``,
                   ``tool_calls`` (names), ``text_chars``
``PreActing``      ``tool``, ``tool_call_id``
``PostActing``     ``tool``, ``tool_call_id``, ``arguments`` (JSON, cut to
                   :data:`MAX_ARGUMENT_CHARS`), ``result_chars`` (what the tool returned),
                   ``is_error``, ``latency_s``; ``evicted: true``, ``evicted_path`` and
                   ``kept_chars`` when the result was moved to a file; ``task_id`` when a
                   subagent tool started a background task
``PostCall``       ``outcome`` (``finished`` or ``paused``), ``reply_chars`` (finished) or
                   ``paused`` (the approval ids it waits for), ``inputs``, ``steps``,
                   ``latency_s`` (the whole call)
``Error``          ``type``, ``message`` (cut to :data:`MAX_MESSAGE_CHARS`), ``latency_s``
``PreCompact``     ``cut``, ``tokens_before``
``PostCompact``    ``removed``, ``tokens_before``, ``tokens_after``, ``forced``, ``extractive``
=================  ==========================================================================

Writes are appends of whole records (see :meth:`WorkspaceManager.append_text`), so concurrent
writers never interleave. A reader skips a line it cannot parse rather than failing on it.

:func:`summarize` turns the records of a session into per-call totals (tokens, time in the
model, in tools and elsewhere, counts), which ``harness trace`` prints.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from harness.context import DEFAULT_SESSION_ID, RuntimeContext
from harness.models.prices import Price, cost_of
from harness.workspace import AGENTS_DIR, TRACES_DIR, WorkspaceManager, safe_segment, scoped

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_MESSAGE_CHARS",
    "TRACES_DIR",
    "CallSummary",
    "encode_records",
    "now_iso",
    "read_trace",
    "record",
    "summarize",
    "total",
    "trace_path",
    "write_records",
]

logger = logging.getLogger(__name__)


MAX_ARGUMENT_CHARS: Final = 300
"""Characters of a tool call's JSON arguments kept in a trace record (the rest is cut)."""

MAX_MESSAGE_CHARS: Final = 500
"""Characters of an error message kept in a trace record."""


def trace_path(agent: str, session_id: str | None) -> str:
    """The workspace-relative trace file of a session (before user scoping)."""
    session = safe_segment(session_id or DEFAULT_SESSION_ID)
    return f"{AGENTS_DIR}/{safe_segment(agent)}/{TRACES_DIR}/{session}.jsonl"


def now_iso() -> str:
    """The current time as a record's ``ts``."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters, marked with ``...`` when shortened."""
    return text if len(text) <= limit else text[:limit] + "..."


def encode_records(records: Iterable[Mapping[str, Any]]) -> str:
    """Records as JSON lines (each ending in a newline); unknown values become strings."""
    return "".join(
        json.dumps(rec, ensure_ascii=False, default=str, separators=(",", ":")) + "\n"
        for rec in records
    )


async def write_records(
    workspace: WorkspaceManager,
    agent: str,
    session_id: str | None,
    user_id: str | None,
    records: Sequence[Mapping[str, Any]],
) -> str | None:
    """Append records to a session's trace in one whole-record append.

    Returns the workspace path written, or None (nothing to write).

    Raises:
        StorageError: The backend could not append.
    """
    if not records:
        return None
    return await workspace.append_text(
        trace_path(agent, session_id), encode_records(records), user_id
    )


async def record(
    workspace: WorkspaceManager,
    agent: str,
    ctx: RuntimeContext,
    event: str,
    *,
    call_id: str | None = None,
    **fields: Any,
) -> bool:
    """Append one record for work that happens outside the reasoning loop.

    For background work the trace hook cannot see: the memory flush, a subagent task starting
    or finishing, a maintenance pass. Call it when the work is done, with the context of the
    call it belongs to, e.g. in the flush::

        await record(workspace, agent, ctx, "memory_flush", facts=3, path=result.path,
                     latency_s=elapsed)

    or in a task's runner::

        await record(workspace, agent, ctx, "task", task_id=rec.task_id, status="completed",
                     subagent=rec.agent_id, latency_s=elapsed)

    The record is written at once (it is not buffered with a call's records, which may be
    written already) and gets ``ts``, ``event``, ``agent``, ``session_id``, ``user_id`` and
    ``call_id`` (None unless given) ahead of ``fields``; values that are not JSON become
    strings. Tracing never breaks the work it describes: a failed write is logged as a
    warning and reported by returning False.

    Args:
        workspace: The agent's workspace.
        agent: The agent's name (the trace's directory).
        ctx: The context of the call the work belongs to (its session and user).
        event: What happened, in snake case (``memory_flush``, ``task``).
        call_id: The call it belongs to, when known.
        **fields: The event's details.

    Returns:
        Whether the record was written.
    """
    rec: dict[str, Any] = {
        "ts": now_iso(),
        "event": event,
        "agent": agent,
        "session_id": ctx.session_id,
        "user_id": ctx.user_id,
        "call_id": call_id,
        **fields,
    }
    try:
        await write_records(workspace, agent, ctx.session_id, ctx.user_id, [rec])
    except Exception as exc:
        logger.warning(
            "could not write the %s trace record of session %r: %s", event, ctx.session_id, exc
        )
        return False
    return True


async def read_trace(
    workspace: WorkspaceManager, agent: str, session_id: str, user_id: str | None = None
) -> tuple[str, list[dict[str, Any]] | None]:
    """A session's trace records, in file order.

    Looks only in the user's own namespace (a trace is never shared). Lines that are not JSON
    objects are skipped with a warning.

    Returns:
        The workspace path looked at, and the records (None when there is no trace file).
    """
    path = trace_path(agent, session_id)
    where = scoped(path, user_id)
    text = await workspace.read_own(path, user_id, limit=None)  # traces grow with the session
    if text is None:
        return where, None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            logger.warning("skipping line %d of %s: not a JSON object", number, where)
            continue
        records.append(value)
    return where, records


# -- totals ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSummary:
    """What one call (or, from :func:`total`, all of them) cost and did.

    ``tools_s`` is wall time with at least one tool running (tools of one step may run
    concurrently, so their latencies are merged, not added); ``other_s`` is the rest of the
    call's time: hooks, compaction, saving.
    """

    call_id: str
    started: str | None = None
    outcome: str = "open"
    """``ok`` or ``paused`` (PostCall), ``error`` (Error), or ``open`` (the call's end was
    not recorded)."""
    inputs: int = 0
    reply_chars: int = 0
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    latency_s: float = 0.0
    model_s: float = 0.0
    tools_s: float = 0.0
    other_s: float = 0.0
    tool_calls: int = 0
    tool_errors: int = 0
    evictions: int = 0
    compactions: int = 0
    errors: int = 0
    cost: float | None = None
    """What the call's model steps cost at the reader's price table; None without a table, or
    when a step that reported tokens ran a model the table does not price."""

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready values."""
        return {name: getattr(self, name) for name in self.__slots__}


_TOKEN_FIELDS: Final = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _merged_length(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``intervals``."""
    length, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        length += stop - max(start, end)
        end = stop
    return length


def _summarize_call(
    call_id: str, records: Sequence[Mapping[str, Any]], prices: Mapping[str, Price] | None
) -> CallSummary:
    fields: dict[str, Any] = {"call_id": call_id, "started": records[0].get("ts")}
    model_s, steps = 0.0, 0
    cost: float | None = 0.0 if prices else None
    tokens = dict.fromkeys(_TOKEN_FIELDS, 0)
    tool_intervals: list[tuple[float, float]] = []
    tool_calls = tool_errors = evictions = compactions = errors = 0
    for rec in records:
        match rec.get("event"):
            case "PreCall":
                fields["inputs"] = int(_number(rec.get("inputs")))
            case "PostReasoning":
                steps += 1
                model_s += _number(rec.get("latency_s"))
                for name in _TOKEN_FIELDS:
                    tokens[name] += int(_number(rec.get(name)))
                if prices and cost is not None:
                    cost = _plus(cost, _step_cost(prices, rec))
            case "PostActing":
                tool_calls += 1
                tool_errors += bool(rec.get("is_error"))
                evictions += bool(rec.get("evicted"))
                latency = _number(rec.get("latency_s"))
                end = _number(rec.get("elapsed_s"))
                tool_intervals.append((end - latency, end))
            case "PostCompact":
                compactions += 1
            case "PostCall":
                fields.update(
                    outcome="paused" if rec.get("outcome") == "paused" else "ok",
                    reply_chars=int(_number(rec.get("reply_chars"))),
                    latency_s=_number(rec.get("latency_s")),
                )
            case "Error":
                errors += 1
                fields.update(outcome="error", latency_s=_number(rec.get("latency_s")))
    tools_s = _merged_length(tool_intervals)
    latency = fields.get("latency_s") or max(
        (_number(rec.get("elapsed_s")) for rec in records), default=0.0
    )
    return CallSummary(
        **fields,
        steps=steps,
        input_tokens=tokens["input_tokens"],
        output_tokens=tokens["output_tokens"],
        cache_read_tokens=tokens["cache_read_tokens"],
        cache_write_tokens=tokens["cache_write_tokens"],
        model_s=model_s,
        tools_s=tools_s,
        other_s=max(0.0, latency - model_s - tools_s),
        tool_calls=tool_calls,
        tool_errors=tool_errors,
        evictions=evictions,
        compactions=compactions,
        errors=errors,
        cost=cost,
    )


def _step_cost(prices: Mapping[str, Price], rec: Mapping[str, Any]) -> float | None:
    """A step's cost; None when it reported tokens of a model without a price."""
    given = int(_number(rec.get("input_tokens"))), int(_number(rec.get("output_tokens")))
    priced = cost_of(prices, rec.get("model"), *given)
    if priced is None and not any(given):
        return 0.0  # no usage reported: nothing to price
    return priced


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def summarize(
    records: Sequence[Mapping[str, Any]], prices: Mapping[str, Price] | None = None
) -> list[CallSummary]:
    """Per-call totals, in the order the calls appear; records without a call are left out.

    With ``prices`` (the operator's table, :func:`harness.models.load_prices`), each call's
    ``cost`` too.
    """
    calls: dict[str, list[Mapping[str, Any]]] = {}
    for rec in records:
        call_id = rec.get("call_id")
        if isinstance(call_id, str):
            calls.setdefault(call_id, []).append(rec)
    return [_summarize_call(call_id, recs, prices) for call_id, recs in calls.items()]


def total(calls: Sequence[CallSummary]) -> CallSummary:
    """The sums over ``calls`` (``call_id`` ``"total"``; outcome ``error`` if any failed)."""
    summed = CallSummary(call_id="total", started=calls[0].started if calls else None)
    summed_apart = ("call_id", "started", "outcome", "cost")
    numeric = [name for name in CallSummary.__slots__ if name not in summed_apart]
    values: dict[str, Any] = {name: sum(getattr(call, name) for call in calls) for name in numeric}
    values["cost"] = functools.reduce(_plus, (call.cost for call in calls), 0.0 if calls else None)
    outcome = (
        "error"
        if any(c.outcome == "error" for c in calls)
        else "open"
        if any(c.outcome == "open" for c in calls)
        else "ok"
    )
    return replace(summed, outcome=outcome, **values)
