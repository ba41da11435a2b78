"""``harness trace SESSION``: a session's trace as a timeline, with what each call cost.

Reads ``agents/<agent>/traces/<session>.jsonl`` of the user's namespace (the format is in
:mod:`harness.observability.trace_file`) and prints, per call, one row per event (time since
the call started, the event, its details) and a totals line: steps, tokens in and out, time in
the model, in tools and elsewhere, tool calls, tool errors, evictions, compactions and errors;
then the session's totals when it has several calls. ``--json`` prints the records and the
totals instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from harness.agent import DEFAULT_AGENT_NAME
from harness.cli._common import (
    AgentOpt,
    SessionArg,
    StoreOpt,
    UserOpt,
    WorkspaceOpt,
    one_line_errors,
    opened_workspace,
    run_async,
    shortened,
    shown_id,
    valid_path,
)
from harness.cli._output import out
from harness.errors import ConfigError
from harness.models.prices import load_prices
from harness.observability import CallSummary, read_trace, summarize, total

__all__ = ["timeline_table", "totals_line", "trace_command"]

PLAIN: dict[str, Any] = {"markup": False, "highlight": False, "soft_wrap": True}

Record = Mapping[str, Any]


def trace_command(
    session: SessionArg,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    agent: AgentOpt = DEFAULT_AGENT_NAME,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the records and totals as JSON.")
    ] = False,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help='Price table, JSON: {"<model>": {"input": ..., "output": ...}} per million; '
            "each call's cost is shown.",
            callback=valid_path,
        ),
    ] = None,
) -> None:
    """Show a session's trace: every event of every call, and what each call cost."""

    async def _read() -> tuple[str, list[dict[str, Any]]]:
        async with opened_workspace(workspace, store) as manager:
            where, records = await read_trace(manager, agent, session, user)
        if records is None:
            # Ids quoted (and long ones cut): one with a line break must not break the line.
            whose = f" of user {shown_id(user)}" if user else ""
            place = (
                shown_id(str(manager.root / where)) if manager.is_local else f"{where} in the store"
            )
            msg = (
                f"no trace of session {shortened(session)}{whose} for agent {shortened(agent)}: "
                f"looked for {place}; traces are written by agents with tracing on "
                "(check --workspace, --store, --user and --agent)"
            )
            raise ConfigError(msg)
        return where, records

    with one_line_errors():
        table = load_prices(prices) if prices is not None else None
    where, records = run_async(_read())
    calls = summarize(records, table)
    if as_json:
        data = {
            "session_id": session,
            "user_id": user,
            "agent": agent,
            "path": where,
            "records": records,
            "calls": [call.as_dict() for call in calls],
            "total": total(calls).as_dict(),
        }
        out.print_json(json.dumps(data, ensure_ascii=False, default=str))
        return
    whose = f" for user {user}" if user else ""
    out.print(
        f"Trace of session {session} of agent {agent}{whose}: {len(records)} events, "
        f"{len(calls)} calls ({where})",
        **PLAIN,
    )
    by_id = {call.call_id: call for call in calls}
    for call_id, group in _groups(records):
        out.print()
        out.print(timeline_table(call_id, group))
        if call_id is not None and call_id in by_id:
            out.print(f"totals: {totals_line(by_id[call_id])}", **PLAIN)
    if len(calls) > 1:
        out.print()
        out.print(f"session totals ({len(calls)} calls): {totals_line(total(calls))}", **PLAIN)
    if table is not None and (unpriced := _unpriced(records, table)):
        out.print(f"no price in {prices} for {', '.join(unpriced)}: no cost shown", **PLAIN)


def _unpriced(records: Sequence[Record], prices: Mapping[str, Any]) -> list[str]:
    """The models of steps that reported tokens and have no price, quoted."""
    models = {
        str(rec.get("model") or "")
        for rec in records
        if rec.get("event") == "PostReasoning"
        and (rec.get("input_tokens") or rec.get("output_tokens"))
        and str(rec.get("model") or "") not in prices
    }
    return [shortened(model) for model in sorted(models)]


def _groups(records: Sequence[Record]) -> Iterator[tuple[str | None, list[Record]]]:
    """Runs of consecutive records of the same call (None: outside any call)."""
    current: list[Record] = []
    current_id: str | None = None
    for rec in records:
        call_id = rec.get("call_id") if isinstance(rec.get("call_id"), str) else None
        if current and call_id != current_id:
            yield current_id, current
            current = []
        current_id = call_id
        current.append(rec)
    if current:
        yield current_id, current


def _seconds(ts: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(ts)).timestamp()
    except ValueError:
        return None


def timeline_table(call_id: str | None, group: Sequence[Record]) -> Table:
    """One call's events, a row each, with the time since the call began."""
    first = group[0]
    title = f"call {call_id}" if call_id else "outside a call"
    table = Table("time", "event", title=Text(f"{title} — {first.get('ts', '?')}"))
    table.add_column("details", overflow="fold")  # paths and ids in full, never cut
    start = _seconds(first.get("ts"))
    for rec in group:
        elapsed = rec.get("elapsed_s")
        if not isinstance(elapsed, int | float):
            now = _seconds(rec.get("ts"))
            elapsed = now - start if now is not None and start is not None else None
        offset = f"+{elapsed:.3f}s" if elapsed is not None else "?"
        table.add_row(offset, Text(str(rec.get("event", "?"))), Text(_details(rec)))
    return table


def _ms(value: Any) -> str:
    return f"{value * 1000:.1f} ms" if isinstance(value, int | float) else "?"


_COMMON = frozenset({"ts", "event", "agent", "session_id", "user_id", "call_id", "elapsed_s"})


def _details(rec: Record) -> str:
    """What a record says, in a few words."""
    match rec.get("event"):
        case "PreCall":
            return f"{rec.get('inputs')} new messages, {rec.get('messages')} in the conversation"
        case "PreReasoning":
            return (
                f"step {rec.get('step')}: {rec.get('messages')} messages, {rec.get('tools')} tools"
            )
        case "PostReasoning":
            tokens = (
                f"{_input(rec)} in / {rec.get('output_tokens')} out tokens"
                if rec.get("input_tokens") is not None
                else "no usage reported"
            )
            calls = rec.get("tool_calls") or []
            asks = f", calls {', '.join(map(str, calls))}" if calls else ""
            return (
                f"step {rec.get('step')}: {rec.get('model')}, {tokens}, "
                f"{_ms(rec.get('latency_s'))}{asks}"
            )
        case "PreActing":
            return f"{rec.get('tool')} ({rec.get('tool_call_id')})"
        case "PostActing":
            text = (
                f"{rec.get('tool')}({rec.get('arguments', '')}) -> "
                f"{rec.get('result_chars')} chars, {_ms(rec.get('latency_s'))}"
            )
            if rec.get("is_error"):
                text += ", ERROR"
            if rec.get("evicted"):
                text += f", evicted to {rec.get('evicted_path')} ({rec.get('kept_chars')} kept)"
            if rec.get("task_id"):
                text += f", task {rec.get('task_id')}"
            return text
        case "PostCall" if rec.get("outcome") == "paused":
            waits = ", ".join(str(ident) for ident in rec.get("paused") or [])
            return (
                f"paused for approval {waits} after {rec.get('steps')} steps, "
                f"{_ms(rec.get('latency_s'))}"
            )
        case "PostCall":
            return (
                f"reply {rec.get('reply_chars')} chars after {rec.get('steps')} steps, "
                f"{_ms(rec.get('latency_s'))}"
            )
        case "Error":
            return f"{rec.get('type')}: {rec.get('message')} after {_ms(rec.get('latency_s'))}"
        case "PreCompact":
            return f"cutting {rec.get('cut')} messages, {rec.get('tokens_before')} tokens"
        case "PostCompact":
            return (
                f"removed {rec.get('removed')} messages, tokens "
                f"{rec.get('tokens_before')} -> {rec.get('tokens_after')}"
            )
    extra = {k: v for k, v in rec.items() if k not in _COMMON}
    return " ".join(
        f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in extra.items()
    )


def _input(rec: Record) -> str:
    """A step's prompt tokens, with the cached part when the provider reported one."""
    total, read, written = (
        rec.get(k) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens")
    )
    if not (isinstance(total, int) and isinstance(read, int) and isinstance(written, int)):
        return str(total)
    if not read and not written:
        return str(total)
    uncached = max(0, total - read - written)
    return f"{total} ({read} cached, {written} written to cache, {uncached} uncached)"


def _cached(call: CallSummary) -> str:
    if not call.cache_read_tokens and not call.cache_write_tokens:
        return ""
    uncached = max(0, call.input_tokens - call.cache_read_tokens - call.cache_write_tokens)
    share = call.cache_read_tokens / call.input_tokens if call.input_tokens else 0.0
    return (
        f" ({call.cache_read_tokens} cached = {share:.0%}, {call.cache_write_tokens} written to "
        f"cache, {uncached} uncached)"
    )


def totals_line(call: CallSummary) -> str:
    """What a call (or a session) cost, in one line."""
    return (
        f"{call.outcome}, {call.steps} steps, tokens {call.input_tokens} in{_cached(call)} / "
        f"{call.output_tokens} out, time {call.latency_s:.3f}s (model {call.model_s:.3f}s, "
        f"tools {call.tools_s:.3f}s, other {call.other_s:.3f}s), {call.tool_calls} tool calls, "
        f"{call.tool_errors} tool errors, {call.evictions} evictions, "
        f"{call.compactions} compactions, {call.errors} errors{_cost(call)}"
    )


def _cost(call: CallSummary) -> str:
    return "" if call.cost is None else f", cost {call.cost:.6f}"
