"""``harness trace SESSION``: the timeline, the totals, ``--json`` and a missing trace."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from _tracing import SESSION, USER, read_records, run_full_call, trace_file
from typer.testing import CliRunner

from harness import RuntimeContext
from harness.cli.main import app
from harness.observability import record, summarize, total
from harness.workspace import WorkspaceManager

runner = CliRunner()


def traced_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    asyncio.run(run_full_call(root))
    asyncio.run(run_full_call(root))  # a second call on the same session
    return root


def test_the_timeline_and_totals_match_the_records(tmp_path: Path) -> None:
    root = traced_workspace(tmp_path)
    result = runner.invoke(
        app, ["trace", SESSION, "--workspace", str(root), "--user", USER], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    records = read_records(trace_file(root))
    calls = summarize(records)
    assert len(calls) == 2
    out = result.stdout
    assert f"{len(records)} events, 2 calls" in out
    for call in calls:
        assert f"call {call.call_id}" in out
    totals = re.findall(
        r"^totals: ok, (\d+) steps, tokens (\d+) in / (\d+) out, time ([\d.]+)s "
        r"\(model ([\d.]+)s, tools ([\d.]+)s, other ([\d.]+)s\), (\d+) tool calls, "
        r"(\d+) tool errors, (\d+) evictions, (\d+) compactions, (\d+) errors$",
        out,
        re.MULTILINE,
    )
    assert [(int(t[0]), int(t[1]), int(t[2]), *map(int, t[7:])) for t in totals] == [
        (
            c.steps,
            c.input_tokens,
            c.output_tokens,
            c.tool_calls,
            c.tool_errors,
            c.evictions,
            c.compactions,
            c.errors,
        )
        for c in calls
    ]
    assert [float(t[3]) for t in totals] == [round(c.latency_s, 3) for c in calls]
    # the calls themselves: two model steps with 250 tokens in, 25 out, three tools each
    assert [t[:3] for t in totals] == [("2", "250", "25")] * 2
    whole = total(calls)
    assert (
        f"session totals (2 calls): ok, 4 steps, tokens {whole.input_tokens} in / "
        f"{whole.output_tokens} out" in out
    )
    # one row per event: the tool rows show arguments, errors and eviction
    assert out.count("PostActing") == 6
    assert 'lookup({"term": "alpha"}) -> 12 chars' in out
    assert "ERROR" in out
    assert "evicted to large_tool_results/harness/dump-" in out
    assert "step 0: scripted, 100 in / 20 out tokens" in out


def test_json_prints_the_records_and_totals(tmp_path: Path) -> None:
    root = traced_workspace(tmp_path)
    result = runner.invoke(app, ["trace", SESSION, "-w", str(root), "-u", USER, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    records = read_records(trace_file(root))
    assert data["records"] == records
    assert data["path"] == f"users/{USER}/agents/harness/traces/{SESSION}.jsonl"
    assert data["calls"] == [c.as_dict() for c in summarize(records)]
    assert data["total"]["input_tokens"] == 500
    assert data["total"]["tool_errors"] == 2
    assert (data["session_id"], data["user_id"], data["agent"]) == (SESSION, USER, "harness")


def test_records_outside_a_call_are_shown(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ctx = RuntimeContext(session_id="bg")
    asyncio.run(record(WorkspaceManager(root), "harness", ctx, "memory_flush", facts=3))
    result = runner.invoke(app, ["trace", "bg", "-w", str(root)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "outside a call" in result.stdout
    assert "memory_flush" in result.stdout
    assert "facts=3" in result.stdout
    assert "1 events, 0 calls" in result.stdout


def test_a_missing_trace_exits_2_saying_where_it_looked(tmp_path: Path) -> None:
    root = traced_workspace(tmp_path)
    result = runner.invoke(app, ["trace", SESSION, "-w", str(root)])  # no user: shared namespace
    assert result.exit_code == 2
    assert result.stdout == ""
    expected = root / "agents" / "harness" / "traces" / f"{SESSION}.jsonl"
    assert result.stderr.strip() == (
        f"error: no trace of session '{SESSION}' for agent 'harness': looked for {expected}; "
        "traces are written by agents with tracing on "
        "(check --workspace, --store, --user and --agent)"
    )
    other = runner.invoke(app, ["trace", SESSION, "-w", str(root), "-u", USER, "-a", "other"])
    assert other.exit_code == 2
    assert f"users/{USER}/agents/other/traces/{SESSION}.jsonl;" in other.stderr


def test_prices_show_what_each_call_cost(tmp_path: Path) -> None:
    root = traced_workspace(tmp_path)
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"scripted": {"input": 2.0, "output": 10.0}}))
    args = ["trace", SESSION, "-w", str(root), "-u", USER, "--prices", str(table)]
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    # each call: 250 tokens in at 2 and 25 out at 10 per million
    assert re.findall(r"^totals: .*, cost ([\d.]+)$", result.stdout, re.MULTILINE) == [
        "0.000750",
        "0.000750",
    ]
    assert re.search(r"^session totals .*, cost 0\.001500$", result.stdout, re.MULTILINE)
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert [call["cost"] for call in data["calls"]] == [0.00075, 0.00075]

    table.write_text(json.dumps({"another-model": {"input": 1.0, "output": 1.0}}))
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert ", cost" not in result.stdout  # an unknown price is not a cost of 0
    assert f"no price in {table} for 'scripted': no cost shown" in result.stdout
